"""Making a release: measure once, estimate, write, validate.

* :mod:`censusdp.release.measure` -- noisy measurements (the only step that sees the
  confidential histograms);
* :mod:`censusdp.release.topdown` -- TopDown / bottom-up estimation from the noisy
  measurements (least squares, rounding, failsafe); it never imports I/O;
* :mod:`censusdp.release.pipeline` -- orchestration of a run (``censusdp run``);
* :mod:`censusdp.release.manifest` -- the run manifest, written and read;
* :mod:`censusdp.release.validate` -- checks that a release is whole and consistent.
"""

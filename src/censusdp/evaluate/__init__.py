"""Accuracy evaluation of a release: metrics, error bars, sweeps and a readable report.

* :func:`evaluate` compares a release with the truth it was made from (``censusdp
  evaluate``); :func:`read_release` and :func:`evaluate_data` are its parts.
* :func:`expected_errors` predicts the errors of a release from the release alone (no
  truth: ``censusdp evaluate RUN``; :mod:`~censusdp.evaluate.errorbars`).
* :func:`sweep` reruns the mechanism over a range of budgets (``censusdp sweep``,
  JASON 2020, Figs. 6-1 and 6-2).
* :mod:`~censusdp.evaluate.metrics` (TVD, MAE, RMSE, bias by size bin),
  :mod:`~censusdp.evaluate.districts` (off-spine districts),
  :mod:`~censusdp.evaluate.trials` (empirical error bars),
  :mod:`~censusdp.evaluate.nmf` (closed-form noise of the measurements),
  :mod:`~censusdp.evaluate.checks` (invariants re-checked) and
  :mod:`~censusdp.evaluate.report` (HTML) hold the pieces.
"""

from censusdp.evaluate.core import (
    DEFAULT_DISTRICT_TARGETS,
    DEFINITIONS,
    EvaluateOptions,
    ReleaseFiles,
    evaluate,
    evaluate_data,
    json_ready,
    read_release,
)
from censusdp.evaluate.errorbars import expected_errors
from censusdp.evaluate.report import render_report, write_report
from censusdp.evaluate.sweep import SweepOptions, sweep

__all__ = [
    "DEFAULT_DISTRICT_TARGETS",
    "DEFINITIONS",
    "EvaluateOptions",
    "ReleaseFiles",
    "SweepOptions",
    "evaluate",
    "evaluate_data",
    "expected_errors",
    "json_ready",
    "read_release",
    "render_report",
    "sweep",
    "write_report",
]

"""The Dinur-Nissim reconstruction laboratory (JASON JSR-19-2F, secs. 4.2-4.5, 5.5-5.6).

* :mod:`~censusdp.attacks.dinur_nissim.noise` -- the experiment noise on every answer;
* :mod:`~censusdp.attacks.dinur_nissim.reconstruction` -- one reconstruction (least
  squares or LP, then rounding) and App. A.1's adaptive pairs scheme;
* :mod:`~censusdp.attacks.dinur_nissim.curves` -- fraction recovered over many trials,
  vs queries (figs. 4-1, 4-4) and vs epsilon and query multiple (fig. 5-7);
* :mod:`~censusdp.attacks.dinur_nissim.thresholds` -- queries needed for full recovery
  vs n (figs. 4-2, 4-3);
* :mod:`~censusdp.attacks.dinur_nissim.sum_accuracy` -- accuracy of a noisy sum (fig. 5-6);
* :mod:`~censusdp.attacks.dinur_nissim.predictions` -- Appendix A's predictions;
* :mod:`~censusdp.attacks.dinur_nissim.report` -- plots and file output (``attack dn``,
  ``attack dn-figures``; imported on use, so importing the algorithms never loads
  matplotlib).
"""

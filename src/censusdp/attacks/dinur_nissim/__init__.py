"""The Dinur-Nissim reconstruction laboratory (JASON JSR-19-2F, secs. 4.2-4.5, 5.5-5.6).

The algorithms are in :mod:`~censusdp.attacks.dinur_nissim.experiment`; plots and file
output in :mod:`~censusdp.attacks.dinur_nissim.report` (imported on use, so importing the
algorithms never loads matplotlib).
"""

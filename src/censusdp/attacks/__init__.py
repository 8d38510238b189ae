"""Attacks on published statistics: reconstruction from too many accurate answers.

``censusdp.attacks.dinur_nissim`` is the Dinur-Nissim reconstruction laboratory of
JASON (JSR-19-2F) secs. 4.2-4.5, 5.5-5.6 and Appendices A-B. Plotting and
file output for it live in ``censusdp.attacks.dinur_nissim.report`` (imported lazily, so
importing the algorithms never loads matplotlib).
"""

from __future__ import annotations

from typing import Any

from censusdp.attacks.dinur_nissim.curves import (
    LaplaceGrid,
    LaplaceGridOptions,
    RecoveryCurve,
    RecoveryCurveOptions,
    laplace_grid,
    recovery_curve,
)
from censusdp.attacks.dinur_nissim.noise import NoiseSpec, jason_gaussian_variance
from censusdp.attacks.dinur_nissim.predictions import information_predictions
from censusdp.attacks.dinur_nissim.reconstruction import (
    Reconstruction,
    adaptive_pairs_attack,
    reconstruct,
)
from censusdp.attacks.dinur_nissim.sum_accuracy import (
    SumAccuracy,
    expected_sum_accuracy,
    sum_query_accuracy,
)
from censusdp.attacks.dinur_nissim.thresholds import (
    RecoveryThresholds,
    RecoveryThresholdsOptions,
    recovery_thresholds,
)

__all__ = [
    "DnOptions",
    "FiguresOptions",
    "LaplaceGrid",
    "LaplaceGridOptions",
    "NoiseSpec",
    "Reconstruction",
    "RecoveryCurve",
    "RecoveryCurveOptions",
    "RecoveryThresholds",
    "RecoveryThresholdsOptions",
    "SumAccuracy",
    "adaptive_pairs_attack",
    "expected_sum_accuracy",
    "information_predictions",
    "jason_gaussian_variance",
    "laplace_grid",
    "reconstruct",
    "recovery_curve",
    "recovery_thresholds",
    "reproduce_figures",
    "run_dn_report",
    "sum_query_accuracy",
]

_REPORT_NAMES = ("DnOptions", "FiguresOptions", "reproduce_figures", "run_dn_report")


def __getattr__(name: str) -> Any:
    # The report functions import matplotlib and file I/O; load them on first use.
    if name in _REPORT_NAMES:
        from censusdp.attacks.dinur_nissim import report as _dn_report

        return getattr(_dn_report, name)
    raise AttributeError(f"module 'censusdp.attacks' has no attribute {name!r}")

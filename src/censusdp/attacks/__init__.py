"""Attacks on published statistics: reconstruction from too many accurate answers.

``censusdp.attacks.dinur_nissim`` is the Dinur-Nissim reconstruction laboratory of
JASON (JSR-19-2F) secs. 4.2-4.5, 5.5-5.6 and Appendices A-B. Plotting and
file output for it live in ``censusdp.attacks.dinur_nissim.report`` (imported lazily, so
importing the algorithms never loads matplotlib).
"""

from __future__ import annotations

from typing import Any

from censusdp.attacks.dinur_nissim.experiment import (
    LaplaceGrid,
    NoiseSpec,
    Reconstruction,
    RecoveryCurve,
    RecoveryThresholds,
    SumAccuracy,
    adaptive_pairs_attack,
    expected_sum_accuracy,
    information_predictions,
    jason_gaussian_variance,
    laplace_grid,
    reconstruct,
    recovery_curve,
    recovery_thresholds,
    sum_query_accuracy,
)

__all__ = [
    "LaplaceGrid",
    "NoiseSpec",
    "Reconstruction",
    "RecoveryCurve",
    "RecoveryThresholds",
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


def __getattr__(name: str) -> Any:
    # The report functions import matplotlib and file I/O; load them on first use.
    if name in ("run_dn_report", "reproduce_figures"):
        from censusdp.attacks.dinur_nissim import report as _dn_report

        return getattr(_dn_report, name)
    raise AttributeError(f"module 'censusdp.attacks' has no attribute {name!r}")

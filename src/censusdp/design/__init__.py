"""The mechanism design lab: strategies, small-count mechanisms and budget allocation.

* :mod:`censusdp.design.strategy`: expected error of the matrix mechanism for a
  workload and a strategy (identity, hierarchical, Haar wavelet, the workload itself,
  or an HDMM-style optimised strategy) and the SVD lower bound.
* :mod:`censusdp.design.small_n`: mechanisms for one count in ``{0..n}`` (uniform,
  range-restricted and truncated geometric, the fair mechanism, LP-optimal ones).
* :mod:`censusdp.design.allocation`: geolevel and query budget shares that minimise the
  error of a target workload of tables, compared with a preset, emitted as a preset.
* :mod:`censusdp.design.figures` and :mod:`censusdp.design.report`: figures and files
  (the only modules here that write).
"""

from __future__ import annotations

from censusdp.design._errors import DesignError
from censusdp.design.allocation import (
    AllocationReport,
    AllocationRequest,
    TargetTable,
    budget_to_toml,
    optimize_allocation,
    own_target_workload,
    revealed_target_workload,
    simulate_errors,
)
from censusdp.design.small_n import (
    SmallNReport,
    SmallNRequest,
    fair_mechanism,
    geometric_clamped,
    optimal_mechanism,
    small_n_report,
)
from censusdp.design.strategy import (
    PRIVACY_NORMS,
    STRATEGIES,
    WORKLOADS,
    StrategyReport,
    StrategyRequest,
    compare_strategies,
    evaluate_strategy,
    make_workload,
    parse_domain,
)

__all__ = [
    "PRIVACY_NORMS",
    "STRATEGIES",
    "WORKLOADS",
    "AllocationReport",
    "AllocationRequest",
    "DesignError",
    "SmallNReport",
    "SmallNRequest",
    "StrategyReport",
    "StrategyRequest",
    "TargetTable",
    "budget_to_toml",
    "compare_strategies",
    "evaluate_strategy",
    "fair_mechanism",
    "geometric_clamped",
    "make_workload",
    "optimal_mechanism",
    "optimize_allocation",
    "own_target_workload",
    "parse_domain",
    "revealed_target_workload",
    "simulate_errors",
    "small_n_report",
]

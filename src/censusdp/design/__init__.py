"""The mechanism design lab: strategies, small-count mechanisms and budget allocation.

* :mod:`censusdp.design.strategy`: expected error of the matrix mechanism for a
  workload and a strategy (identity, hierarchical, Haar wavelet, the workload itself,
  or an HDMM-style optimised strategy) and the SVD lower bound.
"""

from __future__ import annotations

from censusdp.design._errors import DesignError
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
    "DesignError",
    "StrategyReport",
    "StrategyRequest",
    "compare_strategies",
    "evaluate_strategy",
    "make_workload",
    "parse_domain",
]

"""Strategy evaluation and optimisation for the matrix mechanism (``censusdp design strategy``).

What is measured decides how accurate a release can be (JASON JSR-19-2F sec. 5.1.3;
Abowd & Schmutte appendix C): the matrix mechanism answers a workload ``W`` (the
published queries) by measuring a strategy ``A`` with noise scaled to ``A``'s
sensitivity and answering ``W A^+ y``. This module evaluates standard strategies,
optimises one, and reports the SVD lower bound.

Normalisation of every number reported (unit-variance noise, strategy scaled to
sensitivity 1; ``m`` workload queries on ``n`` cells):

    rootmse   = sqrt( sens(A)^2 ||W A^+||_F^2 / m ),
    svd_bound = sqrt( (sum_i lambda_i(W))^2 / (n m) ),

where ``sens(A)`` is the largest column L2 norm for ``privacy="zcdp"`` and the largest
column L1 norm for ``privacy="pure"``, and ``lambda_i(W)`` are the singular values of
``W``. For a noise variance ``sigma^2`` multiply both by ``sigma``: e.g. a Gaussian
mechanism with ``rho``-zCDP on an L2-sensitivity-1 strategy has ``sigma^2 = 1 / (2
rho)`` (Bun & Steinke 2016), a Laplace mechanism with ``epsilon``-DP on an
L1-sensitivity-1 strategy ``sigma^2 = 2 / epsilon^2``.

``svd_bound`` is the SVD bound of Li & Miklau (2013, "Optimal error of query sets under
the differentially-private matrix mechanism", Thm. 3): under L2 sensitivity no
strategy has a smaller rootmse. Under pure DP the same number is reported: it is still
a lower bound, because a column's L1 norm is at least its L2 norm, so every strategy's
L1 rootmse is at least its L2 rootmse; it is not tight for pure DP in general.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from scipy import sparse

from censusdp.design._accuracy import (
    sensitivity,
    squared_error,
    svd_singular_sum,
    workload_rank,
    workload_sensitivity,
)
from censusdp.design._errors import DesignError
from censusdp.design._matrices import (
    EigenStrategy,
    Factor,
    KronStrategy,
    MarginalsStrategy,
    Workload,
    all_range_factor,
    haar_matrix,
    hierarchical_matrix,
    identity_factor,
    marginal_keys_with_ways,
    marginals_workload,
    prefix_factor,
    total_factor,
)
from censusdp.design._optimize import (
    default_p,
    marginals_l2_optimum,
    optimize_kron,
    optimize_marginals,
)
from censusdp.privacy.accounting import rho_from_epsilon
from censusdp.privacy.parameters import positive_fraction
from censusdp.privacy.randomness import experiment_generator
from censusdp.progress import Progress
from censusdp.version import __version__

__all__ = [
    "PL94_DOMAIN",
    "PL94_MARGINALS",
    "PRIVACY_NORMS",
    "STRATEGIES",
    "WORKLOADS",
    "StrategyReport",
    "StrategyRequest",
    "compare_strategies",
    "evaluate_strategy",
    "make_workload",
    "parse_domain",
    "strategy_sweep",
]

STRATEGIES: tuple[str, ...] = ("identity", "hierarchical", "wavelet", "workload", "optimized")
"""Strategy names accepted by :func:`evaluate_strategy`."""

WORKLOADS: tuple[str, ...] = ("all-range", "prefix", "identity", "total")
"""One-attribute workload names; join them with ``*`` for a Kronecker product, or use
``marginals[:D1xD2x...][:WAYS]`` or ``pl94``."""

PRIVACY_NORMS: dict[str, int] = {"zcdp": 2, "pure": 1}
"""Sensitivity norm of each privacy model: L2 for zCDP (Gaussian noise), L1 for pure DP."""

PL94_DOMAIN: tuple[int, ...] = (8, 2, 2, 63)
"""HHGQ x VOTINGAGE x HISPANIC x CENRACE, the PL94 detailed histogram (2,016 cells)."""

PL94_MARGINALS: dict[str, tuple[int, ...]] = {
    "total": (),
    "cenrace": (3,),
    "hispanic": (2,),
    "votingage": (1,),
    "hhgq": (0,),
    "hispanic*cenrace": (2, 3),
    "votingage*cenrace": (1, 3),
    "votingage*hispanic": (1, 2),
    "votingage*hispanic*cenrace": (1, 2, 3),
    "detailed": (0, 1, 2, 3),
}
"""The 2020 production queries that are marginals of :data:`PL94_DOMAIN` (attribute
indices kept); the production strategy also measures ``hhinstlevels``, a recode of
HHGQ, which is not a marginal and is left out of workload ``pl94``."""

_FACTORS: dict[str, Callable[[int], Factor]] = {
    "all-range": all_range_factor,
    "prefix": prefix_factor,
    "identity": identity_factor,
    "total": total_factor,
}


_FORMULATIONS = {
    "kron-pidentity": "Kronecker product of p-identity strategies [I; Theta] D (HDMM OPT_0 / "
    "OPT_x), L-BFGS-B from the identity and random starts",
    "kron-l2": "Kronecker product of L2-optimal strategies, one per attribute: the Lagrange "
    "dual of min tr(G X^-1) s.t. diag(X) <= 1 maximised over log multipliers by L-BFGS, "
    "the strategy (Y G Y)^(1/4) Y^-1 read off the multipliers (zCDP only)",
    "marginals-eigen": "the L2 optimum of a marginals workload: Gram sum_S "
    "sqrt(lambda_W(S)) P_S over the common eigenspaces of marginal Gram matrices, the rows "
    "of sqrt(mu_S) P_S measured (zCDP only; equal to the SVD bound)",
    "marginals": "non-negative weights on all 2^d marginals (HDMM OPT_M)",
}


def parse_domain(n: int | str | tuple[int, ...] | list[int] | None) -> tuple[int, ...] | None:
    """``64``, ``"64"``, ``"2x2x63"`` (or ``"2,2,63"``) or ``(2, 2, 63)`` as attribute sizes."""
    if n is None:
        return None
    if isinstance(n, bool):
        raise DesignError(f"n is {n!r}; it must be a positive integer or sizes like 2x3x4")
    if isinstance(n, int | np.integer):
        parts: list[Any] = [int(n)]
    elif isinstance(n, str):
        text = n.strip().lower().replace(",", "x")
        parts = text.split("x") if text else []
        try:
            parts = [int(p) for p in parts]
        except ValueError:
            raise DesignError(
                f"n is {n!r}; it must be a positive integer or sizes like 2x3x4"
            ) from None
    else:
        parts = list(n)
    if not parts or any(
        isinstance(p, bool) or not isinstance(p, int | np.integer) or p < 1 for p in parts
    ):
        raise DesignError(f"n is {n!r}; every attribute size must be a positive integer")
    return tuple(int(p) for p in parts)


def _parse_ways(text: str, d: int) -> list[int] | None:
    text = text.strip()
    if text == "all":
        return None
    for suffix in ("-way", "way"):  # "2way", "2-way"
        if text.endswith(suffix):
            text = text[: -len(suffix)]
    try:
        ways = sorted({int(t) for t in text.split(",") if t.strip()})
    except ValueError:
        raise DesignError(
            f"marginal ways {text!r}: give 'all' or comma-separated integers like 1,2"
        ) from None
    if not ways or ways[0] < 0 or ways[-1] > d:
        raise DesignError(f"marginal ways {text!r}: each must be in 0..{d} for {d} attributes")
    return ways


def make_workload(spec: str, n: int | str | tuple[int, ...] | None) -> Workload:
    """Build a workload from its name.

    Names:
        ``all-range``, ``prefix``, ``identity``, ``total``: one-attribute workloads on
        ``n`` cells; with ``n = "N1xN2..."`` the same workload on every attribute
        (a Kronecker product); ``"prefix*identity"`` names each attribute's factor.
        ``pl94``: the ten 2020 production marginals of the PL94 histogram
        (:data:`PL94_MARGINALS` on :data:`PL94_DOMAIN`).
        ``marginals:D1xD2x...[:WAYS]`` or ``marginals[:WAYS]`` with ``n = "D1xD2..."``:
        the marginals of a ``d``-attribute histogram with ``WAYS`` kept attributes
        (``all``, the default: every one of the ``2^d`` marginals, from the grand total
        to the full table; ``2`` or ``2way``: all two-way marginals; ``1,2``: one- and
        two-way). Sizes may also be separated by commas (``marginals:2,3,4:2``).

    Raises:
        DesignError: for an unknown name, a missing or inconsistent ``n``.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise DesignError(f"workload is {spec!r}; it must be a non-empty name")
    spec = spec.strip().lower()
    domain = parse_domain(n)
    if spec == "pl94":
        if domain is not None and domain not in (PL94_DOMAIN, (math.prod(PL94_DOMAIN),)):
            raise DesignError(f"workload 'pl94' has domain {PL94_DOMAIN} (n = 2016) but n is {n!r}")
        keys = [sum(1 << i for i in kept) for kept in PL94_MARGINALS.values()]
        return marginals_workload("pl94", PL94_DOMAIN, keys)
    if spec == "marginals" or spec.startswith("marginals:"):
        parts = spec.split(":")[1:]
        if len(parts) > 2:
            raise DesignError(f"workload {spec!r}: use marginals:D1xD2x...[:WAYS]")
        spec_domain = None
        # the first part is the domain when it has an "x", when a ways part follows, or
        # when it is a comma list and n does not give the domain ("marginals:2,3,4")
        if parts and (
            "x" in parts[0]
            or len(parts) == 2
            or ("," in parts[0] and (domain is None or len(domain) == 1))
        ):
            spec_domain = parse_domain(parts.pop(0))
        if spec_domain is not None and domain is not None:
            if domain not in (spec_domain, (math.prod(spec_domain),)):
                raise DesignError(
                    f"workload {spec!r} has domain {spec_domain} (n = "
                    f"{math.prod(spec_domain)}) but n is {n!r}"
                )
        dom = spec_domain or domain
        if dom is None:
            raise DesignError(f"workload {spec!r}: give the attribute sizes, e.g. marginals:2x3x4")
        ways = _parse_ways(parts[0], len(dom)) if parts else None
        keys = marginal_keys_with_ways(len(dom), ways)
        if not keys:
            raise DesignError(f"workload {spec!r} selects no marginal")
        return marginals_workload(spec, dom, keys)
    names = spec.split("*")
    unknown = [x for x in names if x not in _FACTORS]
    if unknown:
        raise DesignError(
            f"unknown workload {unknown[0]!r}; workloads are {list(_FACTORS)} (joined by '*' "
            "for a Kronecker product) or marginals:D1xD2x...[:WAYS]"
        )
    if domain is None:
        raise DesignError(f"workload {spec!r} needs n (the number of cells)")
    if len(names) == 1:
        names = names * len(domain)
    if len(names) != len(domain):
        raise DesignError(
            f"workload {spec!r} has {len(names)} factors but n = {n!r} has {len(domain)} sizes"
        )
    factors = tuple(_FACTORS[x](size) for x, size in zip(names, domain, strict=True))
    return Workload(spec, domain, ((1.0, factors),))


@dataclass(frozen=True)
class StrategyRequest:
    """What ``censusdp design strategy`` evaluates (validated on construction).

    Attributes:
        workload: workload name (see :func:`make_workload`).
        n: cells, ``"N1xN2..."`` or a tuple; ``None`` when the workload name carries it.
        strategy: one of :data:`STRATEGIES`.
        branching: branching factor of the hierarchical strategy (>= 2).
        privacy: ``"zcdp"`` (L2 sensitivity) or ``"pure"`` (L1 sensitivity).
        seed: seed of the optimiser's random starts.
        restarts: random starts of the optimiser (>= 1).
        p: rows of ``Theta`` per attribute for p-identity (default
            :func:`~censusdp.design._optimize.default_p`).
        maxiter: L-BFGS-B iterations per solve.
        rho: zCDP budget of the whole strategy (``privacy="zcdp"``): the errors are also
            reported for Gaussian noise of variance ``1 / (2 rho)`` on the
            sensitivity-1 strategy.
        epsilon: pure-DP budget (``privacy="pure"``: Laplace noise of variance ``2 /
            epsilon^2``), or, under ``"zcdp"``, an ``(epsilon, delta)`` target turned
            into the largest ``rho`` meeting it (:func:`~censusdp.privacy.accounting.rho_from_epsilon`).
        delta: the ``delta`` of an ``epsilon`` target under zCDP.
    """

    workload: str
    n: int | str | tuple[int, ...] | None
    strategy: str
    branching: int = 2
    privacy: str = "zcdp"
    seed: int = 0
    restarts: int = 4
    p: int | None = None
    maxiter: int = 1000
    rho: Fraction | str | float | None = None
    epsilon: Fraction | str | float | None = None
    delta: Fraction | str | float = "1e-10"

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise DesignError(
                f"strategy is {self.strategy!r}; it must be one of {list(STRATEGIES)}"
            )
        if self.privacy not in PRIVACY_NORMS:
            raise DesignError(
                f"privacy is {self.privacy!r}; it must be one of {list(PRIVACY_NORMS)}"
            )
        for name, low in (("branching", 2), ("restarts", 1), ("maxiter", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise DesignError(f"{name} is {value!r}; it must be an integer >= {low}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise DesignError(f"seed is {self.seed!r}; it must be a non-negative integer")
        if self.p is not None and (
            isinstance(self.p, bool) or not isinstance(self.p, int) or self.p < 1
        ):
            raise DesignError(f"p is {self.p!r}; it must be a positive integer")
        _check_budget(self)

    @property
    def norm(self) -> int:
        """1 (L1) or 2 (L2)."""
        return PRIVACY_NORMS[self.privacy]

    def noise(self) -> dict[str, Any] | None:
        """The noise on the sensitivity-1 strategy for the stated budget (``None``: none).

        ``rho``-zCDP: the Gaussian mechanism, ``sigma^2 = 1 / (2 rho)`` (Bun & Steinke
        2016, Prop. 1.6); ``epsilon``-DP: the Laplace mechanism, variance ``2 / epsilon^2``.
        Sensitivities are column norms: one person added or removed (unbounded
        neighbours).
        """
        if self.rho is None and self.epsilon is None:
            return None
        out: dict[str, Any] = {"neighbours": "unbounded (one person added or removed)"}
        if self.privacy == "zcdp":
            rho = self.rho if self.rho is not None else self._rho_from_epsilon()
            variance = 1.0 / (2.0 * float(rho))
            out.update(mechanism="gaussian", rho=str(rho), variance_formula="1/(2 rho)")
            if self.epsilon is not None:
                out.update(epsilon=str(self.epsilon), delta=str(self.delta))
        else:
            variance = 2.0 / float(self.epsilon) ** 2  # type: ignore[arg-type]
            out.update(mechanism="laplace", epsilon=str(self.epsilon))
            out["variance_formula"] = "2/epsilon^2"
        out.update(variance=variance, sd=math.sqrt(variance))
        return out

    def _rho_from_epsilon(self) -> Fraction:
        try:
            return rho_from_epsilon(self.epsilon, self.delta)
        except ValueError as exc:
            raise DesignError(str(exc)) from None


def _check_budget(request: StrategyRequest) -> None:
    """Exact ``rho`` / ``epsilon`` / ``delta``; at most one budget, and one the model takes."""
    for name in ("rho", "epsilon", "delta"):
        value = getattr(request, name)
        if value is None:
            continue
        try:
            object.__setattr__(request, name, positive_fraction(value, name))
        except DesignError:
            raise
        except ValueError as exc:
            raise DesignError(str(exc)) from None
    if request.rho is not None and request.epsilon is not None:
        raise DesignError("give rho or epsilon, not both")
    if request.rho is not None and request.privacy == "pure":
        raise DesignError(
            f"rho is {request.rho}; privacy 'pure' takes epsilon (rho is a zCDP budget)"
        )
    if request.privacy == "zcdp" and request.epsilon is not None:
        request._rho_from_epsilon()  # refuse an unconvertible epsilon or delta now


@dataclass(frozen=True)
class StrategyReport:
    """The error of one strategy on one workload (see the module docstring for units).

    Attributes:
        request: what was evaluated.
        domain: attribute sizes.
        n: cells.
        m: workload queries.
        strategy_queries: rows of the strategy.
        sensitivity: the strategy's sensitivity before rescaling (largest column norm).
        squared_error: ``||W A^+||_F^2`` of the strategy as built.
        total_squared_error: ``sens(A)^2 ||W A^+||_F^2`` (unit-variance noise).
        rootmse: ``sqrt(total_squared_error / m)``.
        svd_bound: ``sum_i lambda_i(W) / sqrt(n m)``.
        optimizer: how an optimised strategy was found (``None`` otherwise), with
            ``lower_bound_rootmse``, the L2 dual certificate, where there is one.
        seconds: wall time.
    """

    request: StrategyRequest
    domain: tuple[int, ...]
    n: int
    m: int
    strategy_queries: int
    sensitivity: float
    squared_error: float
    total_squared_error: float
    rootmse: float
    svd_bound: float
    optimizer: dict[str, Any] | None = field(default=None)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The JSON object printed by ``censusdp design strategy --json`` (all finite)."""
        r = self.request
        norm = "L2" if r.norm == 2 else "L1"
        return {
            "workload": r.workload,
            "domain": list(self.domain),
            "n": self.n,
            "m": self.m,
            "strategy": r.strategy,
            "branching": r.branching if r.strategy == "hierarchical" else None,
            "privacy": r.privacy,
            "sensitivity_norm": norm,
            "strategy_queries": self.strategy_queries,
            "sensitivity": self.sensitivity,
            "noise_variance": 1.0,
            "squared_error_unscaled": self.squared_error,
            "total_squared_error": self.total_squared_error,
            "rootmse": self.rootmse,
            "svd_bound": self.svd_bound,
            "rootmse_over_svd_bound": self.rootmse / self.svd_bound if self.svd_bound else None,
            "svd_bound_kind": (
                "L2 SVD bound (Li & Miklau 2013, Thm. 3): a lower bound on rootmse over all "
                "strategies"
                if r.norm == 2
                else "L2 SVD bound (Li & Miklau 2013, Thm. 3) reported for pure DP: still a "
                "lower bound on the L1 rootmse of every strategy (L1 column norms are at "
                "least L2 column norms) but not tight in general"
            ),
            "formulas": {
                "rootmse": f"sqrt(sens_{norm}(A)^2 * ||W A^+||_F^2 / m), unit-variance noise",
                "svd_bound": "sqrt((sum of singular values of W)^2 / (n m))",
            },
            "seed": r.seed,
            "optimizer": self.optimizer,
            **self._at_budget(),
            "seconds": round(self.seconds, 4),
            "package_version": __version__,
        }

    def _at_budget(self) -> dict[str, Any]:
        """The errors for the request's ``rho`` or ``epsilon`` (empty without one)."""
        noise = self.request.noise()
        if noise is None:
            return {}
        sd = noise["sd"]
        lower = (self.optimizer or {}).get("lower_bound_rootmse")
        return {
            "noise": noise,
            "rmse": self.rootmse * sd,
            "svd_bound_rmse": self.svd_bound * sd,
            "lower_bound_rmse": lower * sd if lower else None,
            "total_squared_error_at_budget": self.total_squared_error * noise["variance"],
        }

    def row(self) -> dict[str, Any]:
        """A flat record for sweeps and figures."""
        return {
            "workload": self.request.workload,
            "n": self.n,
            "privacy": self.request.privacy,
            "strategy": self.request.strategy,
            "rootmse": self.rootmse,
            "svd_bound": self.svd_bound,
            "ratio": self.rootmse / self.svd_bound,
            "method": self.optimizer["method"] if self.optimizer else None,
            "seconds": self.seconds,
        }

    def format(self) -> str:
        """One human-readable paragraph."""
        d = self.to_dict()
        name = d["strategy"] + (f" (b={d['branching']})" if d["branching"] else "")
        lines = [
            f"workload {d['workload']} on {self.n} cells {self.domain}, {self.m} queries; "
            f"strategy {name}, {self.strategy_queries} queries; privacy {d['privacy']} "
            f"({d['sensitivity_norm']} sensitivity {self.sensitivity:.6g})",
            f"  rootmse   {self.rootmse:.6g}  (unit-variance noise, sensitivity 1)",
            f"  svd_bound {self.svd_bound:.6g}  (ratio {self.rootmse / self.svd_bound:.4f})",
        ]
        if "noise" in d:
            n = d["noise"]
            rho = float(Fraction(n["rho"])) if "rho" in n else 0.0
            budget = f"rho = {rho:.6g}" if n["mechanism"] == "gaussian" else ""
            if "epsilon" in n:
                budget = f"epsilon = {n['epsilon']}" + (
                    f", delta = {float(Fraction(n['delta'])):g} ({budget})" if budget else ""
                )
            lines.append(
                f"  at {budget}: {n['mechanism']} noise sd {n['sd']:.6g} per unit "
                f"sensitivity; root mean squared error {d['rmse']:.6g} per workload query "
                f"(lower bound {d['svd_bound_rmse']:.6g})"
            )
        if self.optimizer:
            o = self.optimizer
            lines.append(
                f"  optimiser {o['method']}: {o['restarts']} starts from seed {d['seed']}, "
                f"{o['evaluations']} evaluations"
            )
            if o.get("lower_bound_rootmse"):
                lines.append(
                    f"  L2 lower bound {o['lower_bound_rootmse']:.8g} (dual certificate: no "
                    "strategy has a smaller rootmse under zCDP)"
                )
        return "\n".join(lines)


def _standard_strategy(name: str, domain: tuple[int, ...], branching: int) -> KronStrategy:
    if name == "identity":
        mats = tuple(sparse.identity(n, format="csr") for n in domain)
    elif name == "hierarchical":
        mats = tuple(hierarchical_matrix(n, branching) for n in domain)
    elif name == "wavelet":
        mats = tuple(haar_matrix(n) for n in domain)
    else:  # pragma: no cover - guarded by StrategyRequest
        raise DesignError(f"unknown strategy {name!r}")
    return KronStrategy(mats, name=name)


def _optimized(
    workload: Workload, request: StrategyRequest, progress: Progress
) -> tuple[KronStrategy | MarginalsStrategy | EigenStrategy, dict[str, Any]]:
    rng = experiment_generator(request.seed)
    candidates = []
    if request.norm == 2:
        candidates.append(
            optimize_kron(
                workload, 2, rng, maxiter=request.maxiter, parametrization="l2", progress=progress
            )
        )
    # one attribute under zCDP: the L2 candidate is the optimum (its dual bound is within
    # 1e-9), so p-identity could not win and is not run
    if request.norm == 1 or len(workload.domain) > 1:
        candidates.append(
            optimize_kron(
                workload,
                request.norm,
                rng,
                restarts=request.restarts,
                p=request.p,
                maxiter=request.maxiter,
                progress=progress,
            )
        )
    if workload.is_marginals and request.norm == 2:
        candidates.append(marginals_l2_optimum(workload))
    if workload.is_marginals:
        candidates.append(
            optimize_marginals(
                workload,
                request.norm,
                rng,
                restarts=request.restarts,
                maxiter=request.maxiter,
                progress=progress,
            )
        )
    scored = []
    for c in candidates:
        err = sensitivity(c.strategy, request.norm) ** 2 * squared_error(workload, c.strategy)
        scored.append((err, c))
    best_err, best = min(scored, key=lambda pair: pair[0])
    info = {
        "method": best.method,
        "restarts": best.restarts,
        "evaluations": sum(c.evaluations for c in candidates),
        "p": [
            request.p if request.p is not None else default_p(n, request.norm)
            for n in workload.domain
        ]
        if best.method == "kron-pidentity"
        else None,
        "formulation": _FORMULATIONS[best.method],
        "maxiter": request.maxiter,
        "lower_bound_rootmse": next(
            (math.sqrt(c.lower_bound / workload.m) for c in candidates if c.lower_bound),
            None,
        ),
        "candidates": {
            c.method: {
                "rootmse": math.sqrt(err / workload.m),
                "restart_rootmse": [math.sqrt(v / workload.m) for v in c.restart_objectives],
            }
            for err, c in scored
        },
    }
    return best.strategy, info


def evaluate_strategy(request: StrategyRequest, progress: Progress = None) -> StrategyReport:
    """Build the workload and the strategy, and compute rootmse and the SVD bound.

    Raises:
        DesignError: for an invalid request or a strategy that does not support the
            workload.
    """
    start = time.perf_counter()
    workload = make_workload(request.workload, request.n)
    if progress is not None:
        progress(
            f"design: workload {workload.name} on {workload.n} cells, {workload.m} queries; "
            f"strategy {request.strategy}"
        )
    optimizer = None
    if request.strategy == "workload":
        sens = workload_sensitivity(workload, request.norm)
        sq = float(workload_rank(workload))
        rows = workload.m
    else:
        if request.strategy == "optimized":
            strat, optimizer = _optimized(workload, request, progress)
        else:
            strat = _standard_strategy(request.strategy, workload.domain, request.branching)
        sens = sensitivity(strat, request.norm)
        sq = squared_error(workload, strat)
        rows = strat.rows
    tse = sens**2 * sq
    bound = svd_singular_sum(workload) / math.sqrt(workload.n * workload.m)
    return StrategyReport(
        request=request,
        domain=workload.domain,
        n=workload.n,
        m=workload.m,
        strategy_queries=rows,
        sensitivity=sens,
        squared_error=sq,
        total_squared_error=tse,
        rootmse=math.sqrt(tse / workload.m),
        svd_bound=bound,
        optimizer=optimizer,
        seconds=time.perf_counter() - start,
    )


def compare_strategies(
    workload: str,
    n: int | str | tuple[int, ...] | None,
    *,
    privacy: str = "zcdp",
    strategies: tuple[str, ...] = STRATEGIES,
    branchings: tuple[int, ...] = (2,),
    seed: int = 0,
    restarts: int = 4,
    progress: Progress = None,
) -> list[StrategyReport]:
    """Evaluate several strategies on one workload (hierarchical once per branching)."""
    out = []
    for name in strategies:
        for b in branchings if name == "hierarchical" else (2,):
            req = StrategyRequest(
                workload, n, name, branching=b, privacy=privacy, seed=seed, restarts=restarts
            )
            out.append(evaluate_strategy(req, progress))
    return out


def strategy_sweep(
    workloads: tuple[str, ...],
    ns: tuple[int, ...],
    *,
    privacies: tuple[str, ...] = ("zcdp", "pure"),
    strategies: tuple[str, ...] = ("identity", "hierarchical", "wavelet", "optimized"),
    seed: int = 0,
    restarts: int = 4,
    progress: Progress = None,
) -> list[dict[str, Any]]:
    """rootmse and SVD bound of every strategy for every (workload, n, privacy): one row
    per evaluation (``rootmse``, ``svd_bound``, ``ratio``, optimiser method)."""
    rows = []
    for workload in workloads:
        for privacy in privacies:
            for n in ns:
                for name in strategies:
                    r = evaluate_strategy(
                        StrategyRequest(
                            workload, n, name, privacy=privacy, seed=seed, restarts=restarts
                        ),
                        progress=None,
                    )
                    rows.append(r.row())
                    if progress is not None:
                        progress(
                            f"design: {workload} n={n} {privacy} {name}: rootmse "
                            f"{r.rootmse:.4g} (bound {r.svd_bound:.4g}, {r.seconds:.1f}s)"
                        )
    return rows

"""One Dinur-Nissim reconstruction, and Appendix A.1's adaptive pairs scheme.

:func:`reconstruct` solves the bounded least-squares problem
``argmin ||Q x - b||^2, 0 <= x_i <= 1`` of JASON (JSR-19-2F) eq. (4-4) (or Dinur and
Nissim's linear program, sec. 4.2) for one query matrix and its answers, and rounds
``x`` to bits. :func:`adaptive_pairs_attack` is App. A.1's adaptive scheme on a
noiseless database (about ``3n/4`` queries).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from censusdp.attacks.dinur_nissim._bounded_ls import (
    FistaSettings,
    gram_fista,
    lp_solve,
    lsq_linear_solve,
    round_bits,
)
from censusdp.errors import CensusDPError

__all__ = ["SOLVERS", "PairsAttack", "Reconstruction", "adaptive_pairs_attack", "reconstruct"]

SOLVERS: tuple[str, ...] = ("fista", "lsq_linear", "lp")
"""The reconstruction solvers: Gram-matrix FISTA, ``scipy.optimize.lsq_linear``, HiGHS LP."""


@dataclass(frozen=True)
class Reconstruction:
    """Result of one reconstruction.

    Attributes:
        relaxed: the solution ``x`` in ``[0, 1]^n`` before rounding.
        bits: ``x`` rounded to 0/1.
        residual_norm: ``||Q x - b||_2`` of the relaxed solution.
        converged: whether the solver met its stopping rule.
    """

    relaxed: np.ndarray
    bits: np.ndarray
    residual_norm: float
    converged: bool


def reconstruct(
    queries: np.ndarray,
    answers: np.ndarray,
    *,
    solver: str = "fista",
    tol: float = 1e-7,
    lp_objective: Literal["linf", "l1"] = "linf",
) -> Reconstruction:
    """Reconstruct bits from subset-sum answers (JASON (JSR-19-2F) eq. (4-4), then rounding).

    Args:
        queries: the ``m x n`` query matrix (0/1 rows, or any real weights).
        answers: the ``m`` (noisy) answers.
        solver: ``fista`` (Gram-matrix FISTA), ``lsq_linear`` (scipy default) or ``lp``
            (Dinur-Nissim LP, HiGHS).
        tol: FISTA stopping tolerance.
        lp_objective: ``linf`` (DN) or ``l1`` for the LP.
    """
    Q = np.asarray(queries, dtype=np.float64)
    b = np.asarray(answers, dtype=np.float64)
    if Q.ndim != 2 or b.ndim != 1 or b.shape[0] != Q.shape[0]:
        raise CensusDPError(
            f"queries must be m x n and answers length m; got {Q.shape} and {b.shape}"
        )
    if solver == "fista":
        res = gram_fista(Q.T @ Q, Q.T @ b, settings=FistaSettings(tol=tol))
    elif solver == "lsq_linear":
        res = lsq_linear_solve(Q, b)
    elif solver == "lp":
        res = lp_solve(Q, b, objective=lp_objective)
    else:
        raise CensusDPError(f"solver must be one of {SOLVERS}; got {solver!r}")
    x = res.x[:, 0]
    return Reconstruction(
        x, round_bits(x), float(np.linalg.norm(Q @ x - b)), bool(res.converged[0])
    )


@dataclass(frozen=True)
class PairsAttack:
    """Result of :func:`adaptive_pairs_attack`."""

    bits: np.ndarray
    queries: int


def adaptive_pairs_attack(
    secret: np.ndarray, rng: np.random.Generator | None = None
) -> PairsAttack:
    """JASON (JSR-19-2F) App. A.1's adaptive scheme on a noiseless database.

    Query ``n/2`` disjoint pairs: a sum of 0 or 2 fixes both bits; for each ambiguous
    pair (sum 1, about ``n/4`` of them) query its first bit. About ``3n/4`` queries in
    all. An odd last bit is queried alone. The answers are computed from ``secret``
    (the oracle), so the attacker sees only sums.

    Args:
        secret: the 0/1 database.
        rng: if given, pairs are formed after a random permutation.
    """
    d = np.asarray(secret).astype(np.int64)
    n = d.size
    order = rng.permutation(n) if rng is not None else np.arange(n)
    bits = np.zeros(n, dtype=np.int8)
    queries = 0
    half = n // 2
    first, second = order[0 : 2 * half : 2], order[1 : 2 * half : 2]
    sums = d[first] + d[second]
    queries += half
    bits[first[sums == 2]] = 1
    bits[second[sums == 2]] = 1
    amb = sums == 1
    probe = d[first[amb]]
    queries += int(amb.sum())
    bits[first[amb]] = probe
    bits[second[amb]] = 1 - probe
    if n % 2:
        bits[order[-1]] = d[order[-1]]
        queries += 1
    return PairsAttack(bits, queries)

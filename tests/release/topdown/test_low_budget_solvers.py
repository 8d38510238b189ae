"""Least squares at a small budget: Clarabel's spurious infeasibility, and a root whose
every solver fails still gives an answer spread like the measurements, not collapsed."""

from __future__ import annotations

import numpy as np
import pytest

from censusdp.release.topdown import Subproblem
from censusdp.release.topdown.solvers import active_set, admm, chain, clarabel_qp, piqp_qp
from censusdp.release.topdown.solvers.base import Attempt, compress
from censusdp.release.topdown.solvers.least_squares import solve_l2


def _coarse_family(seed: int) -> Subproblem:
    """A coarse problem of a split block group at total epsilon 0.25: 6 chunk children
    sharing 1,500 persons over 40 cells, five marginals whose noise (sd ~3,000, the sum
    over a chunk's blocks) dwarfs the counts."""
    rng = np.random.default_rng(seed)
    k, c = 6, 40
    truth = rng.multinomial(1500, rng.dirichlet(np.ones(k * c))).reshape(k, c).astype(float)
    rows = (
        np.zeros(c, dtype=np.int64),
        rng.integers(0, 12, c),
        rng.integers(0, 7, c),
        np.arange(c),
        rng.integers(0, 3, c),
    )
    sizes = (1, 12, 7, c, 3)
    sd = 3000.0
    noisy = tuple(
        np.stack([np.bincount(r, weights=t, minlength=m) for t in truth])
        + rng.normal(0, sd, (k, m))
        for r, m in zip(rows, sizes, strict=True)
    )
    return Subproblem(
        parent=truth.sum(axis=0).astype(np.int64),
        query_rows=rows,
        query_sizes=sizes,
        noisy=noisy,
        weights=np.array([2 / 3, 2 / 3, 2 / 3, 1.0, 1 / 3]),
        groups=np.zeros(c, dtype=np.int64),
        group_lower=np.zeros((k, 8)),
        group_upper=np.hstack([np.full((k, 1), np.inf), np.zeros((k, 7))]),
        total_lower=np.zeros(k),
        total_upper=np.full(k, np.inf),
        noise_scale=sd,
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_clarabel_solves_low_budget_problems_with_large_noisy_answers(seed):
    """Unscaled, Clarabel declared such problems PrimalInfeasible after two iterations
    (its infeasibility test has absolute tolerances and |y| ~ 1e4); with the constraints
    scaled by their largest right-hand side it solves them, to the active set's optimum."""
    sub = _coarse_family(seed)
    attempt = clarabel_qp.solve_clarabel(sub, compress(sub))
    x, status = attempt.x, attempt.status
    assert status == "Solved" and x is not None
    ref = solve_l2(sub, method="activeset")
    res = solve_l2(sub, method="clarabel")
    assert res.attempts == (("clarabel", "Solved"),)
    assert abs(res.objective - ref.objective) <= 1e-6 * ref.objective


def _fail(name: str, status: str):
    def failed(*args, **kwargs):
        return Attempt(None, status, 0)

    failed.__name__ = name
    return failed


def _state_root(seed: int):
    """A low-epsilon state root in small: 3,000 persons in 4,000 cells (a cell-level
    query and a 40-row marginal of uneven truth), noise sd 40 on both."""
    rng = np.random.default_rng(seed)
    c, m, n, sd = 4000, 40, 3000, 40.0
    marg = np.repeat(np.arange(m), c // m)
    p = np.repeat(np.linspace(2.0, 0.2, m), c // m) * rng.gamma(0.3, size=c)
    truth = rng.multinomial(n, p / p.sum()).astype(float)[None, :]
    marginal = np.bincount(marg, weights=truth[0], minlength=m)[None, :]
    sub = Subproblem(
        parent=None,
        query_rows=(np.zeros(c, dtype=np.int64), np.arange(c), marg),
        query_sizes=(1, c, m),
        noisy=(
            np.array([[float(n)]]),
            truth + rng.normal(0, sd, truth.shape),
            marginal + rng.normal(0, sd, (1, m)),
        ),
        weights=np.array([1.0, 1.0, 1.0]),
        groups=np.zeros(c, dtype=np.int64),
        group_lower=np.zeros((1, 1)),
        group_upper=np.full((1, 1), np.inf),
        total_lower=np.array([float(n)]),
        total_upper=np.array([float(n)]),
        noise_scale=sd,
    )
    return sub, marginal[0], marg, m


@pytest.mark.parametrize("seed", [1, 2])
def test_a_forced_root_failure_still_gives_a_spread_answer(seed, monkeypatch):
    sub, marginal, marg, m = _state_root(seed)

    def tvd(x):
        a = np.bincount(marg, weights=x[0], minlength=m)
        return 0.5 * np.abs(a / a.sum() - marginal / marginal.sum()).sum()

    solved = solve_l2(sub)
    monkeypatch.setattr(active_set, "solve_active_set", _fail("solve_active_set", "max_iter"))
    monkeypatch.setattr(clarabel_qp, "solve_clarabel", _fail("solve_clarabel", "PrimalInfeasible"))
    monkeypatch.setattr(piqp_qp, "solve_piqp", _fail("solve_piqp", "PIQP_PRIMAL_INFEASIBLE"))
    monkeypatch.setattr(admm, "solve_admm", _fail("solve_admm", "max_iter"))
    res = solve_l2(sub)
    assert res.status == "feasible_fallback" and res.method == "nnls-flow"
    x = res.x
    assert x.sum() == pytest.approx(3000)  # the invariant total
    rows = np.bincount(marg, weights=x[0], minlength=m)
    # not collapsed: no handful of rows holds the population (the old fallback put
    # everyone into the first few), and the marginal is as close as least squares's
    assert np.sort(rows)[-6:].sum() < 0.4 * x.sum()
    assert (rows[marginal > 3 * 40.0] > 0).all()  # every row well above its noise kept
    assert tvd(x) < tvd(solved.x) + 0.05
    # near the noise floor (the expected TVD of the raw noisy marginal: half its noise's
    # expected L1 norm over n, 0.21), where a collapse gives 0.8 and more
    assert tvd(x) < 1.25 * 0.5 * m * np.sqrt(2 / np.pi) * 40.0 / 3000


def test_a_large_root_leaves_the_admm_out_of_the_chain(monkeypatch):
    """The ADMM's factorisation at a dhc-lite root (229,320 cells) did not finish 20
    iterations in 10 minutes; a root above ADMM_MAX_ROOT_CELLS goes from Clarabel to
    the NNLS point and flow. Smaller roots (pl94: 1,890 cells) keep it."""

    sub, *_ = _state_root(1)
    comp = compress(sub)
    assert chain.backend_order(sub, comp, "auto") == ("activeset", "piqp", "clarabel", "admm")
    monkeypatch.setattr(chain, "ADMM_MAX_ROOT_CELLS", sub.c - 1)
    assert chain.backend_order(sub, comp, "auto") == ("activeset", "piqp", "clarabel")
    assert chain.backend_order(sub, comp, "admm") == ("admm",)  # asked for by name: still run
    monkeypatch.setattr(active_set, "solve_active_set", _fail("solve_active_set", "max_iter"))
    monkeypatch.setattr(clarabel_qp, "solve_clarabel", _fail("solve_clarabel", "PrimalInfeasible"))
    monkeypatch.setattr(piqp_qp, "solve_piqp", _fail("solve_piqp", "PIQP_PRIMAL_INFEASIBLE"))
    monkeypatch.setattr(admm, "solve_admm", _fail("solve_admm", "never called"))
    res = solve_l2(sub)
    assert [m for m, _ in res.attempts] == ["activeset", "piqp", "clarabel", "nnls-flow"]

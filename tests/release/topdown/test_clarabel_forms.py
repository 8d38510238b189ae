"""Clarabel's two programs for the same least squares: without residual variables (the
dense per-child Hessian, families of at most ``DIRECT_MAX_CELLS`` kept cells) and with
them (larger families) reach the same optimum under the same constraints."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from _topdown_gen import of_shape, solver_shapes, solver_tolerance
from hypothesis import given, settings

from censusdp.release.topdown import _clarabel
from censusdp.release.topdown._common import compress

shapes = solver_shapes(k_min=1, c_max=_clarabel.DIRECT_MAX_CELLS, means=[3.0, 40.0, 400.0])


def _solve(sub, direct_max: int) -> np.ndarray:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(_clarabel, "DIRECT_MAX_CELLS", direct_max)
        x, status, _ = _clarabel.solve_clarabel(sub, compress(sub))
    assert status in ("Solved", "AlmostSolved"), status
    return x


@settings(max_examples=60, deadline=None)
@given(d=shapes)
def test_both_programs_reach_the_same_optimum(d: dict) -> None:
    sub = of_shape(d)
    rng = np.random.default_rng(d["seed"])
    if d["seed"] % 2:  # per-child weights (a spine release's per-geounit budgets)
        sub = dataclasses.replace(sub, unit_weights=rng.uniform(0.2, 5.0, (sub.n_queries, sub.k)))
    direct = _solve(sub, sub.c)
    residual = _solve(sub, sub.c - 1)
    tol = 1e-6 * max(1.0, sub.scale())
    for x in (direct, residual):
        assert sub.max_violation(x) <= tol
    a, b = sub.objective(direct), sub.objective(residual)
    assert abs(a - b) <= solver_tolerance(sub, min(a, b)), (a, b)
    # the optimum is unique where the Hessian is definite (a query sees every cell alone)
    if not d["singular"]:
        np.testing.assert_allclose(direct, residual, atol=1e-3 * max(1.0, sub.scale()))

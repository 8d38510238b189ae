"""The ADMM's linear solve by Woodbury's identity (``solvers.admm._Factor``).

Above ``DENSE_MAX`` kept cells (a whole wide pl94 family: Los Angeles County's tracts
keep about 1,400 cells) the ADMM solved ``K x = r`` for every child with SuperLU on the
sparse KKT system, 2.35 CPU s per iteration for 2,346 children; by Woodbury's identity
with the marginals' few hundred rows it takes 0.12 s. The three paths must give the same
linear solves, and the ADMM the same least-squares solution within its tolerance.
``DENSE_MAX`` is lowered here so that small families take the paths of large ones.
"""

from __future__ import annotations

import numpy as np
import pytest
from _topdown_gen import DHC_LITE_QUERIES, census_subproblem

from censusdp.release.topdown import solve_l2
from censusdp.release.topdown.solvers import admm
from censusdp.release.topdown.solvers.base import compress


def _factors(monkeypatch, sub, vals):
    comp = compress(sub)
    rows = [*comp.rows, sub.groups, np.zeros(sub.c, dtype=np.int64)]
    sizes = [*comp.sizes, sub.G, 1]
    out = {}
    for name, dense_max, wood_rows in (
        ("dense", 10**6, 10**6),
        ("woodbury", 8, 10**6),
        ("superlu", 8, 0),
    ):
        monkeypatch.setattr(admm, "DENSE_MAX", dense_max)
        monkeypatch.setattr(admm, "WOODBURY_MAX_ROWS", wood_rows)
        f = admm._Factor(sub.c, 0.1 + 1e-6, rows, sizes, [*vals(comp), 0.1, 100.0])
        assert (f._sinv is not None) == (name == "woodbury")
        out[name] = f
    return out


@pytest.mark.parametrize("schema", ["pl94", "dhc-lite"])
def test_three_linear_solves_agree(monkeypatch, schema) -> None:
    rng = np.random.default_rng(3)
    kw = {"schema_name": "dhc-lite", "queries": DHC_LITE_QUERIES} if schema == "dhc-lite" else {}
    sub, _ = census_subproblem(rng, n_children=5, n_people=400, **kw)
    fs = _factors(monkeypatch, sub, lambda comp: list(2.0 * comp.w / comp.w.sum()))
    r = rng.normal(size=(sub.c, 7))
    ref = fs["dense"].solve(r)
    for name in ("woodbury", "superlu"):
        np.testing.assert_allclose(fs[name].solve(r), ref, rtol=1e-9, atol=1e-10, err_msg=name)


def test_admm_solution_is_the_same_with_woodbury(monkeypatch) -> None:
    """A pl94 county family of 12 tracts: the ADMM through Woodbury's solve and through
    SuperLU's reach the same least-squares solution (objective to 1e-7, cells to the
    solver's tolerance), which is the dense path's too."""
    sub, _ = census_subproblem(np.random.default_rng(7), n_children=12, n_people=12 * 2000)
    dense = solve_l2(sub, method="admm")
    got = {}
    for name, wood_rows in (("woodbury", 10**6), ("superlu", 0)):
        monkeypatch.setattr(admm, "DENSE_MAX", 8)
        monkeypatch.setattr(admm, "WOODBURY_MAX_ROWS", wood_rows)
        got[name] = solve_l2(sub, method="admm")
        assert got[name].method == "admm"
    for name, sol in got.items():
        assert abs(sol.objective - dense.objective) <= 1e-7 * dense.objective, name
        np.testing.assert_allclose(sol.x, dense.x, atol=0.05, err_msg=name)
    np.testing.assert_allclose(got["woodbury"].x, got["superlu"].x, atol=0.05)

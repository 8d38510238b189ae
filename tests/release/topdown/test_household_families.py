"""The household run's families (households under housing units): the solver chain
sends them to Clarabel first, with the same least-squares point as the previous chain
(the active set, then the ADMM), and the rounded counts keep every constraint."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from censusdp.release.topdown import Subproblem, round_to_integers, solve_l2
from censusdp.release.topdown.solvers.base import compress
from censusdp.release.topdown.solvers.chain import Shape, backend_order

# the DDP's household queries below the State and their scales (Table 2 of Van Riper,
# Kugler & Ruggles 2020: two-sided geometric, variance ~ 2 b^2)
HOUSEHOLD_QUERIES = (
    ("detailed", 41.67),
    ("hhhisp*hhrace*hhsize*hhtype", 33.33),
    ("hhsex*hhhisp*hhrace*hhtype", 33.33),
    ("hhhisp*hhrace*hhmulti", 83.33),
    ("hhsex*hhtype*hhelderly", 83.33),
    ("hhsex*hhage*hhtype", 83.33),
)


def household_family(
    rng: np.random.Generator, n_blocks: int, n_households: int, extra_cells: int = 30
) -> tuple[Subproblem, np.ndarray, np.ndarray]:
    """A block group's blocks on the ``household2010`` schema, as the household run
    builds them: the kept cells are the parent's positive ones (the truth's, and
    ``extra_cells`` more that the parent's own estimate made positive), each block's
    households in ``[0, its housing units]`` (none for 40% of the blocks), every query
    measured with the DDP's block-level noise. Returns the family, the truth and the caps.
    """
    from censusdp.data.queries import make_query
    from censusdp.data.schema import get_schema

    schema = get_schema("household2010")
    live = np.flatnonzero(~schema.structural_zero_mask)
    common = rng.choice(live, size=60, replace=False)  # households share few cells
    has_units = rng.random(n_blocks) >= 0.4
    has_units[0] = True
    homes = np.flatnonzero(has_units)
    block = rng.choice(homes, size=n_households)
    cells = rng.choice(common, size=n_households)
    # the parent's estimate is positive on more cells than the truth (its noise)
    extra = rng.choice(live, size=extra_cells, replace=False)
    block = np.concatenate([block, rng.choice(homes, size=extra_cells)])
    cells = np.concatenate([cells, extra])
    kept = np.unique(cells)
    truth = np.zeros((n_blocks, kept.size), dtype=np.int64)
    np.add.at(truth, (block, np.searchsorted(kept, cells)), 1)
    caps = truth.sum(axis=1) + rng.integers(0, 3, size=n_blocks) * has_units
    rows, sizes, noisy, weights = [], [], [], []
    for name, scale in HOUSEHOLD_QUERIES:
        query = make_query(schema, name)
        answers = np.zeros((n_blocks, query.n_rows))
        np.add.at(answers.T, query.row_of_cell[kept], truth.T)
        var = 2.0 * scale**2
        rows.append(query.row_of_cell[kept])
        sizes.append(query.n_rows)
        noisy.append(answers + rng.normal(0.0, np.sqrt(var), size=answers.shape))
        weights.append(1.0 / var)
    sub = Subproblem(
        parent=truth.sum(axis=0),
        query_rows=tuple(rows),
        query_sizes=tuple(sizes),
        noisy=tuple(noisy),
        weights=np.array(weights),
        groups=np.zeros(kept.size, dtype=np.int64),
        group_lower=np.zeros((n_blocks, 1)),
        group_upper=np.full((n_blocks, 1), np.inf),
        total_lower=np.zeros(n_blocks),
        total_upper=caps.astype(np.float64),
        noise_scale=float(np.sqrt(2.0) * 33.33),
        label=f"household2010-{n_blocks}x{n_households}",
    )
    return sub, truth, caps


def _check_counts(sub: Subproblem, counts: np.ndarray, caps: np.ndarray) -> None:
    assert counts.dtype.kind == "i" and counts.min() >= 0
    assert np.array_equal(counts.sum(axis=0), sub.parent)
    assert (counts.sum(axis=1) <= caps).all()
    assert not counts[caps == 0].any()  # no household in a block without housing units


def test_household_families_go_to_clarabel_first() -> None:
    sub, _, _ = household_family(np.random.default_rng(1), n_blocks=120, n_households=150)
    comp = compress(sub)
    assert sub.c > 64 and Shape.of(sub, comp).capped_totals and comp.sees_every_cell()
    assert backend_order(sub, comp, "auto") == ("piqp", "clarabel", "admm", "activeset")
    # the same family without the housing-unit caps keeps the previous order
    free = dataclasses.replace(sub, total_upper=np.full(sub.k, np.inf))
    assert not Shape.of(free, compress(free)).capped_totals
    assert backend_order(free, compress(free), "auto")[0] == "activeset"
    # exact totals (a person run's invariant) are not caps
    exact = dataclasses.replace(free, total_lower=sub.parent.sum() / sub.k + 0 * free.total_lower)
    exact = dataclasses.replace(exact, total_upper=exact.total_lower.copy())
    assert not Shape.of(exact, compress(exact)).capped_totals
    # a method asked for by name still runs alone
    assert backend_order(sub, comp, "activeset") == ("activeset",)


@pytest.mark.parametrize(
    "seed", [1, pytest.param(2, marks=pytest.mark.slow), pytest.param(3, marks=pytest.mark.slow)]
)
def test_clarabel_first_gives_the_previous_chains_point(seed: int) -> None:
    """The least-squares point is unique (the detailed query makes the objective strictly
    convex), so Clarabel must reach the objective of the ADMM (where the previous chain
    ended when the active set gave up) and of the active set when it converges."""
    rng = np.random.default_rng(seed)
    sub, _, caps = household_family(rng, n_blocks=60, n_households=90)
    new = solve_l2(sub)
    assert new.method == "piqp" and new.attempts == (("piqp", "Solved"),)
    for method in ("admm", "activeset"):
        old = solve_l2(sub, method=method)
        if old.status != "optimal":
            continue
        assert new.objective <= old.objective * (1 + 1e-6) + 1e-6, method
        assert old.objective <= new.objective * (1 + 1e-4), method
        # the ADMM stops when its residuals are below a thousandth of the noise (0.047
        # persons here), which puts its cells about that far from the optimum (0.053 at
        # seed 3); it used to land closer only because its repair failed and it went on
        # to tolerances ten and a hundred times smaller (test_admm_convergence.py)
        limit = 2e-3 * sub.noise_scale if method == "admm" else 0.05
        assert np.abs(new.x - old.x).max() < limit, method
    assert sub.max_violation(new.x) <= 1e-8 * max(1.0, sub.scale())
    _check_counts(sub, np.asarray(round_to_integers(sub, new.x), dtype=np.int64), caps)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**31 - 1),
    n_blocks=st.integers(2, 80),
    n_households=st.integers(1, 200),
    extra=st.integers(0, 60),
)
def test_household_families_round_to_consistent_counts(
    seed: int, n_blocks: int, n_households: int, extra: int
) -> None:
    """On random household families: children sum to the parent, non-negative integers,
    each block's households within its housing units, none where it has none."""
    sub, _, caps = household_family(np.random.default_rng(seed), n_blocks, n_households, extra)
    res = solve_l2(sub)
    assert res.status == "optimal"
    assert sub.max_violation(res.x) <= 1e-8 * max(1.0, sub.scale())
    _check_counts(sub, np.asarray(round_to_integers(sub, res.x), dtype=np.int64), caps)

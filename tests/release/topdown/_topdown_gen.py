"""Random subproblems that are feasible by construction (test helpers)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from censusdp.release.topdown import Subproblem


def random_subproblem(
    rng: np.random.Generator,
    *,
    k: int = 4,
    c: int = 12,
    n_groups: int = 3,
    n_queries: int = 3,
    mean: float = 5.0,
    noise: float = 1.0,
    root: bool = False,
    bound_slack: int = 2,
    tight: bool = False,
    weight_scale: float = 1.0,
) -> tuple[Subproblem, np.ndarray]:
    """A subproblem built around an integer truth ``X`` (returned too).

    Bounds bracket the truth's group sums and totals (exactly when ``tight``), so the
    truth is feasible. Query 0 is the detailed query, query 1 (if any) the total.
    """
    truth = rng.poisson(mean, size=(k, c)).astype(np.int64)
    if not root:
        # every kept cell must be positive in the parent
        empty = truth.sum(axis=0) == 0
        truth[rng.integers(0, k, size=int(empty.sum())), np.flatnonzero(empty)] = 1
    groups = rng.integers(0, n_groups, size=c)
    groups[: min(c, n_groups)] = np.arange(min(c, n_groups))
    gs = np.zeros((k, n_groups), dtype=np.int64)
    np.add.at(gs.T, groups, truth.T)
    ts = truth.sum(axis=1)
    if tight:
        gl, gu = gs.astype(float), gs.astype(float)
        tl, tu = ts.astype(float), ts.astype(float)
    else:
        gl = np.maximum(gs - rng.integers(0, bound_slack + 1, size=gs.shape), 0).astype(float)
        gu = (gs + rng.integers(0, bound_slack + 1, size=gs.shape)).astype(float)
        gu[rng.random(gs.shape) < 0.3] = np.inf
        gl[rng.random(gs.shape) < 0.3] = 0.0
        tl = np.maximum(ts - rng.integers(0, 2 * bound_slack + 1, size=k), 0).astype(float)
        tu = (ts + rng.integers(0, 2 * bound_slack + 1, size=k)).astype(float)
        tu[rng.random(k) < 0.5] = np.inf
        tl[rng.random(k) < 0.5] = 0.0
    rows, sizes, noisy = [], [], []
    for q in range(n_queries):
        if q == 0:
            r = np.arange(c)
            size = c + int(rng.integers(0, 3))
        elif q == 1:
            r = np.zeros(c, dtype=np.int64)
            size = 1
        else:
            size = int(rng.integers(1, max(2, c // 2) + 1))
            r = rng.integers(0, size, size=c)
        ans = np.zeros((k, size))
        np.add.at(ans.T, r, truth.T)
        rows.append(r)
        sizes.append(size)
        noisy.append(ans + rng.normal(0.0, noise, size=ans.shape))
    weights = weight_scale * rng.uniform(0.5, 2.0, size=n_queries)
    sub = Subproblem(
        parent=None if root else truth.sum(axis=0),
        query_rows=tuple(rows),
        query_sizes=tuple(sizes),
        noisy=tuple(noisy),
        weights=weights,
        groups=groups,
        group_lower=gl,
        group_upper=gu,
        total_lower=tl,
        total_upper=tu,
    )
    return sub, truth


# -- census-like subproblems on the built-in schemas ------------------------------------

PL94_QUERIES = (
    "total",
    "cenrace",
    "hispanic",
    "votingage",
    "hhinstlevels",
    "hhgq",
    "hispanic*cenrace",
    "votingage*cenrace",
    "votingage*hispanic",
    "votingage*hispanic*cenrace",
    "detailed",
)
DHC_LITE_QUERIES = ("sex*age", "hispanic*cenrace", "votingage*hispanic*cenrace", "hhgq", "total")

_HHGQ_P = np.array([0.975, 0.005, 0.001, 0.006, 0.001, 0.008, 0.001, 0.003])


def _cenrace_p() -> np.ndarray:
    p = np.zeros(63)
    p[:6] = [0.60, 0.13, 0.01, 0.06, 0.002, 0.08]
    rest = 1.0 / np.arange(1, 58) ** 1.5
    p[6:] = rest / rest.sum() * (1.0 - p[:6].sum())
    return p


def census_people(
    rng: np.random.Generator, schema_name: str, n_people: int, n_children: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Synthetic people: (cell index, child index) arrays and facilities (k, 8) counts.

    About 44% of children are empty; group-quarters people live only in children that
    have a facility of their type.
    """
    from censusdp.data.schema import get_schema

    schema = get_schema(schema_name)
    sizes = rng.lognormal(0.0, 1.0, size=n_children)
    sizes[rng.random(n_children) < 0.44] = 0.0
    if sizes.sum() == 0:
        sizes[0] = 1.0
    child = rng.choice(n_children, size=n_people, p=sizes / sizes.sum())
    hhgq = rng.choice(8, size=n_people, p=_HHGQ_P)
    facilities = np.zeros((n_children, 8), dtype=np.int64)
    occupied = np.flatnonzero(sizes > 0)
    for g in range(1, 8):
        mine = hhgq == g
        if not mine.any():
            continue
        n_fac = max(1, int(rng.poisson(mine.sum() / 60.0)))
        hosts = rng.choice(occupied, size=n_fac)
        np.add.at(facilities[:, g], hosts, 1)
        child[mine] = hosts[rng.integers(0, n_fac, size=int(mine.sum()))]
    hispanic = (rng.random(n_people) < 0.18).astype(np.int64)
    cenrace = rng.choice(63, size=n_people, p=_cenrace_p())
    if schema_name == "pl94":
        adult = (rng.random(n_people) < 0.78) | (hhgq == 3)
        levels = (hhgq, adult.astype(np.int64), hispanic, cenrace)
    else:
        age = np.minimum(rng.exponential(38.0, size=n_people).astype(np.int64), 115)
        age = np.where(hhgq == 3, np.maximum(age, 65), age)
        sex = rng.integers(0, 2, size=n_people)
        levels = (hhgq, sex, age, hispanic, cenrace)
    cells = np.ravel_multi_index(levels, schema.shape).astype(np.int64)
    return cells, child, facilities


def census_subproblem(
    rng: np.random.Generator,
    *,
    schema_name: str = "pl94",
    queries: tuple[str, ...] = PL94_QUERIES,
    n_children: int = 30,
    n_people: int = 1500,
    rho: float = 0.103,
    root: bool = False,
    total_invariant: bool = False,
) -> tuple[Subproblem, np.ndarray]:
    """A parent with ``n_children`` children built from synthetic people, and the truth.

    Every query gets ``rho * share`` (the detailed query 30%, the rest equal), measured
    with Gaussian noise of variance ``1 / (2 rho_q)``. Bounds: a child with ``m``
    facilities of GQ type ``g`` needs ``>= m`` people of that type and has none without
    one. ``root`` keeps every non-structural-zero cell and drops the parent constraint;
    ``total_invariant`` makes each child's total exact.
    """
    from censusdp.data.queries import make_query
    from censusdp.data.schema import get_schema

    schema = get_schema(schema_name)
    cells, child, facilities = census_people(rng, schema_name, n_people, n_children)
    if root:
        kept = np.flatnonzero(~schema.structural_zero_mask)
    else:
        kept = np.unique(cells)
    col = np.searchsorted(kept, cells)
    truth = np.zeros((n_children, kept.size), dtype=np.int64)
    np.add.at(truth, (child, col), 1)
    shares = np.array([0.3 if q == "detailed" else 1.0 for q in queries])
    rest = [i for i, q in enumerate(queries) if q != "detailed"]
    if len(rest) < len(queries):
        shares[rest] = 0.7 / len(rest)
    else:
        shares /= shares.sum()
    rows, sizes, noisy, weights = [], [], [], []
    for name, share in zip(queries, shares, strict=True):
        query = make_query(schema, name)
        var = 1.0 / (2.0 * rho * share)
        answers = np.zeros((n_children, query.n_rows))
        np.add.at(answers, (child, query.row_of_cell[cells]), 1.0)
        rows.append(query.row_of_cell[kept])
        sizes.append(query.n_rows)
        noisy.append(answers + rng.normal(0.0, np.sqrt(var), size=answers.shape))
        weights.append(1.0 / var)
    groups = schema.cell_levels("hhgq", kept)
    gl = facilities.astype(np.float64)
    gl[:, 0] = 0.0
    gu = np.where(facilities > 0, np.inf, 0.0)
    gu[:, 0] = np.inf
    ts = truth.sum(axis=1).astype(np.float64)
    tl = ts if total_invariant else np.zeros(n_children)
    tu = ts if total_invariant else np.full(n_children, np.inf)
    sub = Subproblem(
        parent=None if root else truth.sum(axis=0),
        query_rows=tuple(rows),
        query_sizes=tuple(sizes),
        noisy=tuple(noisy),
        weights=np.array(weights),
        groups=groups,
        group_lower=gl,
        group_upper=gu,
        total_lower=tl,
        total_upper=tu,
        label=f"{schema_name}-{n_children}x{n_people}",
    )
    return sub, truth


def root_subproblem(
    rng: np.random.Generator,
    *,
    total: int = 331_449_281,
    rho: float = 0.065,
    queries: tuple[str, ...] = PL94_QUERIES,
) -> tuple[Subproblem, np.ndarray]:
    """The US root on the pl94 schema: one child, every non-structural-zero cell kept,
    the total exact (the sum of the state invariants), no parent. Returns it and the truth.
    """
    from censusdp.data.queries import make_query
    from censusdp.data.schema import get_schema

    schema = get_schema("pl94")
    probs = (
        _HHGQ_P[:, None, None, None]
        * np.array([0.22, 0.78])[None, :, None, None]
        * np.array([0.82, 0.18])[None, None, :, None]
        * _cenrace_p()[None, None, None, :]
    ).ravel()
    probs[schema.structural_zero_mask] = 0.0
    probs /= probs.sum()
    full = rng.multinomial(total, probs)
    kept = np.flatnonzero(~schema.structural_zero_mask)
    truth = full[kept][None, :].astype(np.int64)
    shares = np.array([0.3 if q == "detailed" else 0.7 / (len(queries) - 1) for q in queries])
    rows, sizes, noisy, weights = [], [], [], []
    for name, share in zip(queries, shares, strict=True):
        query = make_query(schema, name)
        var = 1.0 / (2.0 * rho * share)
        ans = query.answer(full).astype(np.float64)[None, :]
        rows.append(query.row_of_cell[kept])
        sizes.append(query.n_rows)
        noisy.append(ans + rng.normal(0.0, np.sqrt(var), size=ans.shape))
        weights.append(1.0 / var)
    sub = Subproblem(
        parent=None,
        query_rows=tuple(rows),
        query_sizes=tuple(sizes),
        noisy=tuple(noisy),
        weights=np.array(weights),
        groups=schema.cell_levels("hhgq", kept),
        group_lower=np.zeros((1, 8)),
        group_upper=np.full((1, 8), np.inf),
        total_lower=np.array([float(total)]),
        total_upper=np.array([float(total)]),
        label="US",
    )
    return sub, truth


def small_subproblem(parent, groups, gl, gu, tl, tu, k=2, noisy=None) -> Subproblem:
    """A subproblem of hand-written bounds, one detailed query (``parent=None``: the root)."""
    c = len(groups)
    return Subproblem(
        parent=None if parent is None else np.array(parent),
        query_rows=(np.arange(c),),
        query_sizes=(c,),
        noisy=(np.ones((k, c)) if noisy is None else np.asarray(noisy, dtype=float),),
        weights=np.array([1.0]),
        groups=np.array(groups),
        group_lower=np.array(gl, dtype=float),
        group_upper=np.array(gu, dtype=float),
        total_lower=np.array(tl, dtype=float),
        total_upper=np.array(tu, dtype=float),
        label="test",
    )


def l1_rounding_optimum(sub: Subproblem, x: np.ndarray, *, box: bool = False) -> float:
    """min sum |X - x| over integer X meeting every constraint (a direct MILP).

    With ``box``, X is also held within ``floor(x) <= X <= ceil(x)``.
    """
    k, c = sub.k, sub.c
    n = k * c
    cost = np.concatenate([np.zeros(n), np.ones(n)])
    eye = sp.identity(n)
    a_ub = [sp.hstack([eye, -eye]), sp.hstack([-eye, -eye])]
    b_ub = [x.ravel(), -x.ravel()]
    member = sp.csr_matrix((np.ones(c), (sub.groups, np.arange(c))), shape=(sub.G, c))
    gmat = sp.hstack([sp.kron(sp.identity(k), member), sp.csr_matrix((k * sub.G, n))]).tocsr()
    tmat = sp.hstack([sp.kron(sp.identity(k), np.ones((1, c))), sp.csr_matrix((k, n))]).tocsr()
    for mat, lo, hi in (
        (gmat, sub.group_lower, sub.group_upper),
        (tmat, sub.total_lower, sub.total_upper),
    ):
        lo, hi = lo.ravel(), hi.ravel()
        fin = np.isfinite(hi)
        a_ub += [mat[fin], -mat]
        b_ub += [hi[fin], -lo]
    a_eq = b_eq = None
    if sub.parent is not None:
        a_eq = sp.hstack([sp.kron(np.ones((1, k)), sp.identity(c)), sp.csr_matrix((c, n))])
        b_eq = sub.parent.astype(float)
    res = linprog(
        cost,
        A_ub=sp.vstack(a_ub),
        b_ub=np.concatenate(b_ub),
        A_eq=a_eq,
        b_eq=b_eq,
        bounds=(
            list(zip(np.floor(x).ravel(), np.ceil(x).ravel(), strict=True))
            if box
            else [(0, None)] * n
        )
        + [(0, None)] * n,
        integrality=np.concatenate([np.ones(n), np.zeros(n)]),
        method="highs",
    )
    assert res.status == 0
    return float(res.fun)


def solver_shapes(*, k_min: int, c_max: int, means: list[float]):
    """A hypothesis strategy of subproblem shapes for solver tests (see :func:`of_shape`).

    ``singular`` drops the detailed query: a singular Hessian, a face of optima.
    """
    from hypothesis import strategies as st

    return st.fixed_dictionaries(
        {
            "seed": st.integers(0, 2**32 - 1),
            "k": st.integers(k_min, 7),
            "c": st.integers(1, c_max),
            "n_groups": st.integers(1, 4),
            "n_queries": st.integers(1, 4),
            "root": st.booleans(),
            "tight": st.booleans(),
            "mean": st.sampled_from(means),
            "noise": st.sampled_from([0.5, 3.0, 20.0]),
            "singular": st.booleans(),
        }
    )


def of_shape(d: dict) -> Subproblem:
    """The random subproblem of a shape drawn from :func:`solver_shapes`."""
    from dataclasses import replace

    rng = np.random.default_rng(d["seed"])
    sub, _ = random_subproblem(
        rng,
        k=d["k"],
        c=d["c"],
        n_groups=d["n_groups"],
        n_queries=d["n_queries"] + int(d["singular"]),
        root=d["root"],
        tight=d["tight"],
        mean=d["mean"],
        noise=d["noise"],
    )
    if d["singular"]:
        sub = replace(
            sub,
            query_rows=sub.query_rows[1:],
            query_sizes=sub.query_sizes[1:],
            noisy=sub.noisy[1:],
            weights=sub.weights[1:],
        )
    return sub


def of_shape_weighted(d: dict) -> Subproblem:
    """:func:`of_shape`, its children weighted per query on odd seeds (a spine release's
    per-geounit budgets: ``unit_weights`` drawn from the seed)."""
    from dataclasses import replace

    sub = of_shape(d)
    if d["seed"] % 2:
        rng = np.random.default_rng(d["seed"])
        sub = replace(sub, unit_weights=rng.uniform(0.2, 5.0, (sub.n_queries, sub.k)))
    return sub


def solver_tolerance(sub: Subproblem, objective: float) -> float:
    """Objective tolerance of a solver that stops when no cell would move by more than
    1e-3 persons: within a few 1e-6 of the optimum per cell (and rounding noise)."""
    return 1e-6 * max(1.0, objective) + 1e-5 * sub.k * sub.c * float(sub.weights.sum())

"""The 2020 DHC's household and unit run, estimated as two TopDowns in one run.

Production's household run (``unit_US.ini``, ``DHCH_SCHEMA_TEN_3LEV``) solves one
problem over two histograms: the households (``dhch-2020``, 1,578,528 cells) and the
units (``dhc-units-2020``: ``tenvacgq``, 35 cells), tied by the unit constraints of
``programs/constraints/Constraints_DHCH.py`` and ``Constraints_DHCH_Ten_3Lev.py``.
Its query ordering puts ``tenvacgq`` first. censusdp's TopDown estimates one histogram
at a time, so the run is estimated in that order, as two TopDowns
(:func:`estimate_dhch_run`):

1. **the units**, ``tenvacgq``, from its noisy answers, with production's ``gq_vect``
   held at every geounit: the housing units (occupied or vacant) and the facilities of
   each of the 24 GQ types exact (:func:`unit_vector_bounds`: group bounds on the recode
   :data:`~censusdp.data.schema_dhc.HHGQ_UNIT_VECTOR` with lower = upper). Occupied
   against vacant is left to the noise: production held it (and the households' total)
   to its earlier H1 release (the ``h1`` constraint); censusdp has no H1 run to hold
   it to, so the unit estimate is the H1 the households are then held to.
2. **the households**, ``dhch-2020``, held at every geounit to the units just estimated:
   the households by ``hhtenshort_3lev`` equal the units owned with a mortgage, owned
   free and clear, and rented or occupied without rent (production's ``owned``; their
   sum is ``h1``'s households = occupied units; :func:`tenure_bounds`, group bounds on
   ``hhtenshort_3lev`` with lower = upper). The six structural-zero constraints
   (``living_alone``, ``size2``..``size4``, ``hh_elderly``, ``age_child``) are zeros of
   the schema, which TopDown never fills.

Every constraint is an equality of group bounds, so each family's subproblem is
feasible whenever its parent's is: the parent's groups are the sums of its children's.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.invariants import Bounds, Invariants
from censusdp.data.measurements import Measurements
from censusdp.data.schema_dhc import DHCH_2020, HHGQ_UNIT_VECTOR
from censusdp.data.units_dhc import FIRST_GQ_TENVACGQ
from censusdp.errors import InternalError
from censusdp.progress import say
from censusdp.release.options import Runtime
from censusdp.release.topdown.driver import TopDownOptions, TopDownResult, run_topdown

__all__ = [
    "DHCH_FIDELITY",
    "DHCH_SCHEMA",
    "TENURE_GROUPS",
    "UNIT_HISTOGRAM_RUN",
    "estimate_dhch_run",
    "gqhh_vector",
    "gqhh_vector_of",
    "tenure_bounds",
    "tenure_of_units",
    "unit_vector_bounds",
]

DHCH_SCHEMA = DHCH_2020.name
"""The schema of the DHC household run (``dhch-2020``)."""

DHCH_FIDELITY = (
    "dhc: units by tenvacgq first (gq_vect exact), then households held to their tenure; "
    "occupied against vacant from the noise (production's h1 held it to an earlier H1 run)"
)
"""The manifest's fidelity difference of a DHC household run."""

UNIT_HISTOGRAM_RUN = "unit_histogram"
"""The name the unit histogram's TopDown is checkpointed under."""

TENURE_GROUPS = "hhtenshort_3lev"
"""The household attribute held to the units' tenure."""


def gqhh_vector(tenvacgq: np.ndarray) -> np.ndarray:
    """``(rows x 25)``: per row of a ``(rows x 35)`` ``tenvacgq`` histogram, its housing
    units (occupied or vacant) then its facilities of each of the 24 GQ types
    (production's ``gqhh_vect``)."""
    u = np.asarray(sp.csr_matrix(tenvacgq).todense() if sp.issparse(tenvacgq) else tenvacgq)
    u = u.astype(np.int64)
    return np.column_stack([u[:, :FIRST_GQ_TENVACGQ].sum(axis=1), u[:, FIRST_GQ_TENVACGQ:]])


def gqhh_vector_of(inv: Invariants) -> np.ndarray:
    """``(blocks x 25)``: the invariant housing units and facilities by detailed GQ type
    of ``inv`` (a DHC household release's ``gq_types``)."""
    if inv.gq_types is None:
        raise InternalError("these invariants have no facilities by detailed GQ type")
    return np.column_stack([inv.housing_units, inv.gq_types]).astype(np.int64)


def tenure_of_units(tenvacgq: np.ndarray | sp.spmatrix) -> np.ndarray:
    """``(rows x 3)``: the occupied units of each row by ``hhtenshort_3lev``: owned with
    a mortgage, owned free and clear, rented or occupied without rent."""
    u = np.asarray(tenvacgq.todense() if sp.issparse(tenvacgq) else tenvacgq, dtype=np.int64)
    return np.column_stack([u[:, 0], u[:, 1], u[:, 2] + u[:, 3]])


def _exact(groups: np.ndarray) -> Bounds:
    g = np.asarray(groups, dtype=np.float64)
    total = g.sum(axis=1)
    return Bounds(g.copy(), g.copy(), total.copy(), total.copy())


def unit_vector_bounds(gqhh: np.ndarray, hierarchy: Hierarchy) -> list[Bounds]:
    """The unit histogram's bounds (production's ``gq_vect``): at every geounit each
    group of :data:`~censusdp.data.schema_dhc.HHGQ_UNIT_VECTOR` (housing units, each GQ
    type's facilities) exact, its blocks' sums of ``gqhh`` (``(blocks x 25)``, the
    published invariant), and so the total; use with ``group_variable=HHGQ_UNIT_VECTOR``."""
    agg = hierarchy.aggregate(np.asarray(gqhh, dtype=np.int64))
    return [_exact(np.asarray(a)) for a in agg]


def tenure_bounds(unit_levels: list[sp.spmatrix | np.ndarray]) -> list[Bounds]:
    """The household histogram's bounds from the estimated units (production's
    ``owned``, and ``h1``'s households = occupied units): at every geounit of every
    level (``unit_levels``, the unit TopDown's ``(units x 35)`` histograms, top first)
    the households of each ``hhtenshort_3lev`` level exactly its units of that tenure;
    use with ``group_variable=TENURE_GROUPS``."""
    return [_exact(tenure_of_units(h)) for h in unit_levels]


def estimate_dhch_run(
    households: Measurements,
    units: Measurements,
    hierarchy: Hierarchy,
    gqhh: np.ndarray,
    options: TopDownOptions,
    *,
    rt: Runtime | None = None,
    checkpoint: Any = None,
    seconds: dict[str, tuple[float, float]] | None = None,
) -> tuple[TopDownResult, TopDownResult]:
    """The DHC household run estimated: the units (``tenvacgq``) first, then the
    households held to them (the module's description); returns ``(units, households)``.

    Args:
        households: the measurements of the ``dhch-2020`` household histogram.
        units: the measurements of the ``dhc-units-2020`` unit histogram (``tenvacgq``).
        hierarchy: the geounits both were measured on.
        gqhh: ``(blocks x 25)`` invariant housing units and facilities by GQ type
            (:func:`gqhh_vector` of the input's units).
        options: how each TopDown estimates (its ``group_variable`` is set here).
        rt: where the tasks run and where progress goes (in this process, silent: ``None``).
        checkpoint: a run's checkpoint (``levels(run)`` gives each TopDown's store of
            finished levels: ``unit_histogram`` and ``units``), or ``None``.
        seconds: receives each TopDown's wall and CPU seconds of this process
            (``unit_histogram``, ``units``).
    """

    def store(run: str) -> Any:
        return checkpoint.levels(run) if checkpoint is not None else None

    seconds = {} if seconds is None else seconds
    c = time.process_time()
    executor, progress = (None, None) if rt is None else (rt.executor, rt.progress)
    t = time.perf_counter()
    say(progress, "estimating the units, tenvacgq (their own TopDown, gq_vect exact):")
    unit_est = run_topdown(
        units,
        hierarchy,
        unit_vector_bounds(gqhh, hierarchy),
        replace(options, group_variable=HHGQ_UNIT_VECTOR, root_cap=None, level_caps={}),
        executor=executor,
        progress=progress,
        checkpoint=store(UNIT_HISTOGRAM_RUN),
    )
    seconds[UNIT_HISTOGRAM_RUN] = (time.perf_counter() - t, time.process_time() - c)
    t, c = time.perf_counter(), time.process_time()
    say(progress, "estimating the households (held to the units' tenure at every geounit):")
    hh_est = run_topdown(
        households,
        hierarchy,
        tenure_bounds(unit_est.histograms),
        replace(options, group_variable=TENURE_GROUPS, root_cap=None, level_caps={}),
        executor=executor,
        progress=progress,
        checkpoint=store("units"),
    )
    seconds["units"] = (time.perf_counter() - t, time.process_time() - c)
    return unit_est, hh_est

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
   each of the 24 GQ types exact (:class:`HeldUnits`: group bounds on the recode
   :data:`~censusdp.data.schema_dhc.HHGQ_UNIT_VECTOR` with lower = upper). With an
   earlier P.L. 94 release's H1 (``censusdp run --h1-from``, :mod:`censusdp.release.h1_source`),
   production's ``h1`` too: the occupied and the vacant units exact at every geounit,
   the P.L. release's (group bounds on
   :data:`~censusdp.data.schema_dhc.H1_UNIT_VECTOR`), so the households' total, held
   next to the units' tenure, is the P.L. release's occupied units. Without one,
   occupied against vacant is left to the noise and the unit estimate is the H1 the
   households are held to.
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
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.invariants import Bounds, Invariants
from censusdp.data.measurements import Measurements
from censusdp.data.schema_dhc import DHCH_2020, H1_UNIT_VECTOR, HHGQ_UNIT_VECTOR
from censusdp.data.units_dhc import FIRST_GQ_TENVACGQ
from censusdp.errors import InternalError
from censusdp.progress import say
from censusdp.release.options import Runtime
from censusdp.release.topdown.driver import TopDownOptions, TopDownResult, run_topdown

__all__ = [
    "DHCH_FIDELITY",
    "DHCH_FIDELITY_H1",
    "DHCH_SCHEMA",
    "HeldUnits",
    "TENURE_GROUPS",
    "UNIT_HISTOGRAM_RUN",
    "estimate_dhch_run",
    "gqhh_vector",
    "gqhh_vector_of",
    "tenure_bounds",
    "tenure_of_units",
]

DHCH_SCHEMA = DHCH_2020.name
"""The schema of the DHC household run (``dhch-2020``)."""

DHCH_FIDELITY = (
    "dhc: units by tenvacgq first (gq_vect exact), then households held to their tenure; "
    "occupied against vacant from the noise (production's h1 held it to an earlier H1 run)"
)
"""The manifest's fidelity difference of a DHC household run without an H1 source."""

DHCH_FIDELITY_H1 = (
    "dhc: units by tenvacgq first (gq_vect exact, occupied and vacant held to the P.L. 94 "
    "release's H1, production's h1), then households held to their tenure"
)
"""The manifest's fidelity difference of a DHC household run held to a P.L. 94 release."""

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


def _exact(groups: np.ndarray, *, total: bool = True) -> Bounds:
    """Each group exact; the total their sum (``total``) or left to the groups (free
    bounds: an equality that would only repeat theirs)."""
    g = np.asarray(groups, dtype=np.float64)
    if not total:
        n = g.shape[0]
        return Bounds(g.copy(), g.copy(), np.zeros(n), np.full(n, np.inf))
    t = g.sum(axis=1)
    return Bounds(g.copy(), g.copy(), t.copy(), t.copy())


@dataclass(frozen=True, eq=False)
class HeldUnits:
    """What the unit TopDown holds exact at every geounit, per block.

    Attributes:
        gqhh: ``(blocks x 25)`` the housing units, then the facilities of each GQ type
            (:func:`gqhh_vector`; production's ``gqhh_vect``, held by ``gq_vect``).
        occupied: ``(blocks,)`` the occupied housing units of an earlier P.L. 94
            release (production's ``h1``; the vacant ones are the rest of the housing
            units), or ``None``: occupied against vacant left to the noise.

    Raises:
        InternalError: on construction, for occupied units outside 0..housing units.
    """

    gqhh: np.ndarray
    occupied: np.ndarray | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "gqhh", np.asarray(self.gqhh, dtype=np.int64))
        if self.occupied is not None:
            occ = np.asarray(self.occupied, dtype=np.int64)
            if (
                occ.shape != self.gqhh[:, 0].shape
                or (occ < 0).any()
                or (occ > self.gqhh[:, 0]).any()
            ):
                raise InternalError("held occupied units must be 0..housing units per block")
            object.__setattr__(self, "occupied", occ)

    @property
    def group_variable(self) -> str:
        """The unit histogram's recode whose groups :meth:`bounds` holds."""
        return HHGQ_UNIT_VECTOR if self.occupied is None else H1_UNIT_VECTOR

    def vector(self) -> np.ndarray:
        """Per block the groups of :attr:`group_variable`: ``gqhh``, or with ``h1`` the
        vacant units, the occupied units, then the facilities (``(blocks x 26)``)."""
        if self.occupied is None:
            return self.gqhh
        vacant = self.gqhh[:, 0] - self.occupied
        return np.column_stack([vacant, self.occupied, self.gqhh[:, 1:]])

    def h1(self) -> np.ndarray | None:
        """``(blocks x 2)``: the vacant and occupied units held (``None`` without ``h1``),
        as :func:`censusdp.data.units_dhc.unit_constraint_violations` reads them."""
        return None if self.occupied is None else self.vector()[:, :2]

    def bounds(self, hierarchy: Hierarchy) -> list[Bounds]:
        """The unit histogram's bounds: at every geounit each group of
        :attr:`group_variable` exact, its blocks' sums, and so the total."""
        return [_exact(np.asarray(a)) for a in hierarchy.aggregate(self.vector())]


def tenure_bounds(unit_levels: list[sp.spmatrix | np.ndarray]) -> list[Bounds]:
    """The household histogram's bounds from the estimated units (production's
    ``owned``, and ``h1``'s households = occupied units): at every geounit of every
    level (``unit_levels``, the unit TopDown's ``(units x 35)`` histograms, top first)
    the households of each ``hhtenshort_3lev`` level exactly its units of that tenure;
    use with ``group_variable=TENURE_GROUPS``.

    The households' total is not bounded again: the three tenures hold every household,
    so the exact groups fix it, and the repeated equality left the root's first pass of
    production's ordering (six marginals without ``detailed``, 1.1 million live cells)
    to the NNLS point after the active set and Clarabel missed it (64.8 CPU s on the
    hand-made blocks of ``tests/release/test_dhc_units.py``); without it Clarabel
    solves that pass there (43.0 CPU s; one pass costs the same, 3.4 and 3.5 s). A
    root point off the exact groups by floating-point error only is rescaled onto them
    (:func:`~censusdp.release.topdown.solvers.common.hold_exact_groups`; docs/dhc-2020.md)."""
    return [_exact(tenure_of_units(h), total=False) for h in unit_levels]


def estimate_dhch_run(
    households: Measurements,
    units: Measurements,
    hierarchy: Hierarchy,
    held: HeldUnits,
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
        held: what the units hold exact per block: the invariant housing units and
            facilities by GQ type, and the occupied units of an earlier P.L. 94
            release when the run is held to one.
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
    exact = "gq_vect exact" if held.occupied is None else "gq_vect and the P.L. 94 H1 exact"
    say(progress, f"estimating the units, tenvacgq (their own TopDown, {exact}):")
    unit_est = run_topdown(
        units,
        hierarchy,
        held.bounds(hierarchy),
        replace(options, group_variable=held.group_variable, root_cap=None, level_caps={}),
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

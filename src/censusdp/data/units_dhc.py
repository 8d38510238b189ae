"""The 2020 DHC's unit columns, tenure, vacancy status and GQ type, and their recodes.

Production's household and unit run reads three columns of each unit of the CEF
(``CEF20_UNIT``; ``programs/reader/cef_2020/cef_2020_dhch_reader.py``, whose unit
recoder ``DHCH_Unit_recoder`` takes ``ten vacs qgqtyp`` as ``unit_US.ini`` names them):

* ``ten``, the edited tenure (:data:`TEN_LEVELS`): 0 not an occupied housing unit,
  1 owned with a mortgage or loan, 2 owned free and clear, 3 rented, 4 occupied without
  payment of rent;
* ``vacs``, the edited vacancy status (:data:`VACS_LEVELS`): 0 not vacant, 1 for rent,
  2 rented, not occupied, 3 for sale only, 4 sold, not occupied, 5 seasonal,
  recreational or occasional use, 6 for migrant workers, 7 other vacant;
* ``qgqtyp``, the edited GQ type: production's three-character code (``"000"`` for a
  housing unit), here its integer value (0 for a housing unit, 101 ... 997;
  :data:`QGQTYP_CODES`, the codes ``programs/schema/attributes/hhgq.py`` reads).

:func:`tenvacgq_of` is production's ``TenureVacancyGQAttr.cef2das``: a unit's level of
the unit histogram ``dhc-units-2020`` (0..3 tenure, 4..10 vacancy status, 11..34 GQ
type); :func:`hhtenshort_3lev_of` is ``DHCH_Household_recoder_Ten_3Lev.tenure_recode``:
a household's ``hhtenshort_3lev`` (0 mortgage, 1 free and clear, 2 not owned).
Production's 702, 704, 706, 903 and 904 are read as GQ 997, as production reads them.
:func:`unit_constraint_violations` checks the household run's unit constraints on a
household and a unit histogram.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from censusdp.data.schema_dhc import DHCH_2020, GQ_CODES

__all__ = [
    "FIRST_GQ_TENVACGQ",
    "FIRST_VACANT_TENVACGQ",
    "QGQTYP_CODES",
    "TEN_LEVELS",
    "TENURE_COLUMNS",
    "VACS_LEVELS",
    "dhch_marginal",
    "gq_level_of",
    "h1_of_occupied",
    "h1_of_units",
    "hhtenshort_3lev_of",
    "tenvacgq_of",
    "unit_constraint_violations",
]

TENURE_COLUMNS: tuple[str, ...] = ("ten", "vacs", "qgqtyp")
"""The unit columns a DHC household run reads, in production's order."""

TEN_LEVELS: tuple[str, ...] = (
    "Not an occupied housing unit",
    "Owned with a mortgage or a loan",
    "Owned free and clear",
    "Rented",
    "Occupied without payment of rent",
)
"""``ten`` code ``k`` (the CEF's TEN)."""

VACS_LEVELS: tuple[str, ...] = (
    "Not vacant",
    "For rent",
    "Rented, not occupied",
    "For sale only",
    "Sold, not occupied",
    "For seasonal, recreational, or occasional use",
    "For migrant workers",
    "Other vacant",
)
"""``vacs`` code ``k`` (the CEF's VACS)."""

_COMBINED_INTO_997 = (702, 704, 706, 903, 904)

QGQTYP_CODES: tuple[int, ...] = tuple(sorted((*GQ_CODES, *_COMBINED_INTO_997)))
"""Every valid ``qgqtyp`` of a GQ facility (production's ``HHGQAttr.reader_recode``)."""

FIRST_VACANT_TENVACGQ = 4
"""The first ``tenvacgq`` level of a vacant unit."""

FIRST_GQ_TENVACGQ = 11
"""The first ``tenvacgq`` level of a GQ facility (GQ 101)."""

_GQ_INDEX = np.full(1000, -1, dtype=np.int64)
for _k, _code in enumerate(GQ_CODES):
    _GQ_INDEX[_code] = _k
_GQ_INDEX[list(_COMBINED_INTO_997)] = GQ_CODES.index(997)


def gq_level_of(qgqtyp: np.ndarray) -> np.ndarray:
    """Index (0..23) of each ``qgqtyp`` among the 24 detailed GQ types
    (:data:`censusdp.data.schema_dhc.GQ_CODES`); -1 for 0 or a code production does not
    read."""
    q = np.asarray(qgqtyp, dtype=np.int64)
    out = np.full(q.shape, -1, dtype=np.int64)
    ok = (q >= 0) & (q < _GQ_INDEX.size)
    out[ok] = _GQ_INDEX[q[ok]]
    return out


def tenvacgq_of(ten: np.ndarray, vacs: np.ndarray, qgqtyp: np.ndarray) -> np.ndarray:
    """Each unit's ``tenvacgq`` level (production's ``TenureVacancyGQAttr.cef2das``).

    A housing unit (``qgqtyp`` 0) that is not vacant is ``ten - 1`` (0..3), a vacant one
    ``vacs + 3`` (4..10); a facility is ``11 + `` its GQ type's index. A unit the codes
    do not place (an occupied housing unit with ``ten`` 0, an unknown GQ type) is -1:
    the input's rules (``censusdp.io.cef_households``) refuse those before.
    """
    ten = np.asarray(ten, dtype=np.int64)
    vacs = np.asarray(vacs, dtype=np.int64)
    gq = gq_level_of(qgqtyp)
    housing = np.asarray(qgqtyp, dtype=np.int64) == 0
    out = np.where(vacs > 0, vacs + FIRST_VACANT_TENVACGQ - 1, ten - 1)
    out = np.where(housing, out, np.where(gq >= 0, FIRST_GQ_TENVACGQ + gq, -1))
    return np.where(out < -1, -1, out)


def hhtenshort_3lev_of(ten: np.ndarray) -> np.ndarray:
    """Each household's ``hhtenshort_3lev`` from its ``ten`` (1..4): 0 owned with a
    mortgage or loan, 1 owned free and clear, 2 not owned (rented, or occupied without
    payment of rent); -1 for ``ten`` 0."""
    ten = np.asarray(ten, dtype=np.int64)
    return np.where(ten <= 0, -1, np.minimum(ten - 1, 2))


# -- the unit constraints of the household run -------------------------------------------


def _rows_of(matrix: sp.csr_matrix) -> np.ndarray:
    return np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))


def dhch_marginal(households: sp.csr_matrix, attribute: str) -> np.ndarray:
    """Per row of a ``(rows x 1,578,528)`` ``dhch-2020`` histogram, its counts by the
    levels of ``attribute`` (``(rows x levels)``)."""
    axis = DHCH_2020.attribute_names.index(attribute)
    m = sp.csr_matrix(households)
    level = np.unravel_index(m.indices, DHCH_2020.shape)[axis]
    out = np.zeros((m.shape[0], DHCH_2020.shape[axis]), dtype=np.int64)
    np.add.at(out, (_rows_of(m), level), m.data.astype(np.int64))
    return out


def h1_of_units(units: np.ndarray) -> np.ndarray:
    """``(rows x 2)``: the vacant and the occupied housing units of each row of a
    ``(rows x 35)`` ``tenvacgq`` histogram (production's ``h1`` levels, in its order)."""
    u = np.asarray(units, dtype=np.int64)
    return np.column_stack(
        [u[:, FIRST_VACANT_TENVACGQ:FIRST_GQ_TENVACGQ].sum(axis=1),
         u[:, :FIRST_VACANT_TENVACGQ].sum(axis=1)]
    )  # fmt: skip


def h1_of_occupied(housing_units: np.ndarray, occupied: np.ndarray) -> np.ndarray:
    """``(rows x 2)``: the vacant and the occupied housing units of rows whose housing
    units and occupied units are given (an earlier H1 release's, production's ``h1``)."""
    occ = np.asarray(occupied, dtype=np.int64)
    return np.column_stack([np.asarray(housing_units, dtype=np.int64) - occ, occ])


def unit_constraint_violations(
    households: sp.csr_matrix,
    units: np.ndarray,
    h1: np.ndarray,
    gqhh: np.ndarray,
) -> dict[str, np.ndarray]:
    """The rows (geounits) that break each constraint of the DHC household run
    (``unit_US.ini``: ``theconstraints = h1, gq_vect, living_alone, size2, size3, size4,
    hh_elderly, age_child, owned``; ``programs/constraints/Constraints_DHCH.py``,
    ``Constraints_DHCH_Ten_3Lev.py``).

    Args:
        households: ``(rows x 1,578,528)`` ``dhch-2020`` histogram.
        units: ``(rows x 35)`` ``tenvacgq`` histogram (``dhc-units-2020``).
        h1: ``(rows x 2)``: the vacant and occupied housing units the run is held to
            (production's ``h1`` invariant, from the earlier H1 run).
        gqhh: ``(rows x 25)``: the housing units, then the facilities of each of the 24
            GQ types (production's ``gqhh_vect`` invariant).

    Returns:
        name -> boolean mask of the rows that break it: ``h1_occupied`` (households
        total = occupied units), ``h1_vacant`` (the units' vacant levels = vacant
        units), ``gq_vect`` (the units' housing units and GQ types = ``gqhh``), ``owned``
        (the households by ``hhtenshort_3lev`` = the units' owned with a mortgage,
        free and clear, not owned) and ``structural_zeros`` (a household in a cell
        that ``living_alone``, ``size2``..``size4``, ``hh_elderly`` or ``age_child``
        rules out).
    """
    m = sp.csr_matrix(households)
    units = np.asarray(units, dtype=np.int64)
    h1, gqhh = np.asarray(h1, dtype=np.int64), np.asarray(gqhh, dtype=np.int64)
    total = np.asarray(m.sum(axis=1), dtype=np.int64).ravel()
    vacant = units[:, FIRST_VACANT_TENVACGQ:FIRST_GQ_TENVACGQ].sum(axis=1)
    vector = np.column_stack(
        [units[:, :FIRST_GQ_TENVACGQ].sum(axis=1), units[:, FIRST_GQ_TENVACGQ:]]
    )
    tenure_units = np.column_stack([units[:, 0], units[:, 1], units[:, 2] + units[:, 3]])
    zero = np.zeros(m.shape[0], dtype=bool)
    in_zero = DHCH_2020.structural_zero_mask[m.indices] & (m.data != 0)
    zero[np.unique(_rows_of(m)[in_zero])] = True
    return {
        "h1_occupied": total != h1[:, 1],
        "h1_vacant": vacant != h1[:, 0],
        "gq_vect": (vector != gqhh).any(axis=1),
        "owned": (dhch_marginal(m, "hhtenshort_3lev") != tenure_units).any(axis=1),
        "structural_zeros": zero,
    }

"""The tenure of generated units: owned with a mortgage, owned free and clear, rented,
occupied without rent; a vacant unit's vacancy status; a facility's GQ type.

The 2020 DHC's household schema reads each household's tenure in three levels
(``hhtenshort_3lev``) and its unit histogram each unit's ``tenvacgq``.
:func:`tenure_column` draws the tenure: a household owns its home with probability
:data:`OWNED_BY_AGE` of its householder's age group, and an owner has a mortgage or loan
with probability :data:`MORTGAGE_BY_AGE`. Units that are not occupied housing units get
``-1``. :func:`tenvacgq_column` gives every unit its level of the household run's unit
histogram (``tenvacgq``): tenure in four levels (a renter occupies without rent with
probability :data:`NO_RENT_SHARE`), vacancy status (:data:`VACANCY_SHARES`), or detailed
GQ type. :func:`unit_tenure_columns` writes them as production's CEF unit columns
``ten``, ``vacs`` and ``qgqtyp`` (:mod:`censusdp.data.units_dhc`), which ``generate``
writes into ``units.parquet`` from each county part's own stream. The rates are
calibrated on the 2010 Census's tables (``tools/PROVENANCE.md``, docs/generator.md).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from censusdp.data.households import HHAGE_LOWER, HOUSEHOLDER
from censusdp.data.units_dhc import FIRST_GQ_TENVACGQ, FIRST_VACANT_TENVACGQ, gq_level_of
from censusdp.errors import SchemaError

__all__ = [
    "MORTGAGE_BY_AGE",
    "NO_RENT_SHARE",
    "OWNED_BY_AGE",
    "TENURE_STREAM",
    "VACANCY_SHARES",
    "tenure_column",
    "tenvacgq_column",
    "unit_tenure_columns",
]

TENURE_STREAM = 2020_0035
"""Added to the seed's entropy for the tenure draw."""

OWNED_BY_AGE = (0.16, 0.42, 0.62, 0.71, 0.76, 0.79, 0.81, 0.79, 0.70)
"""P(owned) by householder age group (15-24, 25-34, 35-44, 45-54, 55-59, 60-64, 65-74,
75-84, 85+): approximately the 2010 Census's homeownership rates by age of householder
(Summary File 1 table H17, "Tenure by age of householder"), rising with age; with the
generator's householder ages they give the national share of occupied units owned
(2010 SF1 table H4: 75,986,074 of 116,716,292, 65.1%; generated Vermont 65.5%)."""

MORTGAGE_BY_AGE = (0.90, 0.90, 0.86, 0.79, 0.70, 0.62, 0.45, 0.27, 0.18)
"""P(a mortgage or loan | owned) by the same age groups: nearly all young owners and a
minority of the oldest; 2010 SF1 table H4 has 52,979,430 owned with a mortgage or loan
and 23,006,644 free and clear (69.7% of owners; generated Vermont 67.6%)."""


def tenure_column(
    persons: Mapping[str, np.ndarray],
    units: Mapping[str, np.ndarray],
    *,
    seed: int,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Per unit: 0 owned with a mortgage or loan, 1 owned free and clear, 2 rented; -1 for
    a vacant unit or a group-quarters facility.

    Args:
        persons: the persons' ``unit_id``, ``hhgq``, ``rel`` and ``age``.
        units: the units' ``unit_id``, ``gqtype`` and ``occupied``.
        seed: the seed of the draw; households are drawn in ``unit_id`` order.
        rng: draw from this generator instead of ``seed``'s stream (the generator passes
            each county part's own).

    Raises:
        SchemaError: for an occupied housing unit without a householder.
    """
    unit_ids = np.asarray(units["unit_id"], dtype=np.int64)
    household = np.asarray(units["occupied"], dtype=bool) & (np.asarray(units["gqtype"]) == 0)
    head = (np.asarray(persons["hhgq"]) == 0) & (np.asarray(persons["rel"]) == HOUSEHOLDER)
    sorter = np.argsort(unit_ids, kind="stable")
    pid = np.asarray(persons["unit_id"], dtype=np.int64)[head]
    rows = sorter[np.minimum(np.searchsorted(unit_ids, pid, sorter=sorter), unit_ids.size - 1)]
    head_age = np.full(unit_ids.size, -1, dtype=np.int64)
    head_age[rows] = np.asarray(persons["age"], dtype=np.int64)[head]
    if (household & (head_age < 0)).any():
        bad = unit_ids[household & (head_age < 0)][0]
        raise SchemaError(f"unit_id {bad} is an occupied housing unit without a householder")
    order = sorter[household[sorter]]  # households in unit_id order
    group = np.searchsorted(np.asarray(HHAGE_LOWER), head_age[order], side="right") - 1
    if rng is None:
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), TENURE_STREAM]))
    owned = rng.random(order.size) < np.asarray(OWNED_BY_AGE)[group]
    mortgage = rng.random(order.size) < np.asarray(MORTGAGE_BY_AGE)[group]
    out = np.full(unit_ids.size, -1, dtype=np.int64)
    out[order] = np.where(owned, np.where(mortgage, 0, 1), 2)
    return out


VACANCY_SHARES = (0.276, 0.014, 0.127, 0.028, 0.310, 0.002, 0.243)
"""Shares of vacant units by status (for rent; rented, not occupied; for sale only; sold,
not occupied; seasonal, recreational or occasional use; for migrant workers; other):
the 2010 Census's national counts (SF1 table H5, "Vacancy status": 4,137,567, 206,825,
1,896,796, 421,032, 4,649,298, 24,161 and 3,652,759 of 14,988,438 vacant units), to
three decimals."""

NO_RENT_SHARE = 0.035
"""P(occupied without payment of rent | not owned): a modelling assumption, not a
published count. The 2010 questionnaire asks it, but the published tenure table (SF1
H4) counts it among renters; the American Community Survey's "no cash rent" renters
(table B25063) are a few percent of renter households."""


def tenvacgq_column(
    units: Mapping[str, np.ndarray],
    tenure: np.ndarray,
    gq_code: np.ndarray,
    *,
    seed: int,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Each unit's ``tenvacgq`` level (the ``dhc-units-2020`` schema): 0..3 an occupied
    housing unit by tenure (owned with a mortgage, owned free and clear, rented, occupied
    without rent), 4..10 a vacant unit by status (:data:`VACANCY_SHARES`), 11..34 a GQ
    facility by detailed type.

    Args:
        units: the units' ``unit_id``, ``gqtype`` and ``occupied``.
        tenure: :func:`tenure_column`'s column (0, 1, 2; -1 elsewhere).
        gq_code: each unit's three-digit GQ type (``relgq_columns(...)["gq_code"]``).
        seed: the seed of the draws (rent and vacancy status), in ``unit_id`` order.
        rng: draw from this generator instead of ``seed``'s stream.
    """
    gqtype = np.asarray(units["gqtype"], dtype=np.int64)
    occupied = np.asarray(units["occupied"], dtype=bool)
    tenure = np.asarray(tenure, dtype=np.int64)
    order = np.argsort(np.asarray(units["unit_id"], dtype=np.int64), kind="stable")
    if rng is None:
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), TENURE_STREAM, 1]))
    no_rent = np.zeros(gqtype.size, dtype=bool)
    no_rent[order] = rng.random(order.size) < NO_RENT_SHARE
    status = np.zeros(gqtype.size, dtype=np.int64)
    cumulative = np.cumsum(VACANCY_SHARES) / sum(VACANCY_SHARES)
    status[order] = np.minimum(np.searchsorted(cumulative, rng.random(order.size), side="right"), 6)
    out = np.where(tenure == 2, np.where(no_rent, 3, 2), tenure)
    vacant = (gqtype == 0) & ~occupied
    out[vacant] = 4 + status[vacant]
    facility = gqtype > 0
    out[facility] = FIRST_GQ_TENVACGQ + gq_level_of(np.asarray(gq_code)[facility])
    return out


def unit_tenure_columns(
    persons: Mapping[str, np.ndarray],
    units: Mapping[str, np.ndarray],
    gq_code: np.ndarray,
    *,
    seed: int,
    rng: np.random.Generator | None = None,
) -> dict[str, np.ndarray]:
    """Each unit's production CEF columns ``ten``, ``vacs`` and ``qgqtyp``
    (:mod:`censusdp.data.units_dhc`): tenure (:func:`tenure_column`, then rented or
    occupied without rent), vacancy status and GQ type (:func:`tenvacgq_column`).

    Args:
        persons: the persons' ``unit_id``, ``hhgq``, ``rel`` and ``age``.
        units: the units' ``unit_id``, ``gqtype`` and ``occupied``.
        gq_code: each unit's three-digit GQ type (0 for a housing unit).
        seed: the seed of the draws, when ``rng`` is ``None``.
        rng: draw tenure, rent and vacancy status from this generator, in that order.
    """
    tenure = tenure_column(persons, units, seed=seed, rng=rng)
    level = tenvacgq_column(units, tenure, gq_code, seed=seed, rng=rng)
    housing = np.asarray(units["gqtype"]) == 0
    occupied = housing & (level < FIRST_VACANT_TENVACGQ)
    vacant = housing & ~occupied
    return {
        "ten": np.where(occupied, level + 1, 0).astype(np.int64),
        "vacs": np.where(vacant, level - FIRST_VACANT_TENVACGQ + 1, 0).astype(np.int64),
        "qgqtyp": np.where(housing, 0, np.asarray(gq_code)).astype(np.int64),
    }

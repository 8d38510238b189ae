"""The 2010 DDP's household constraints (``DHCH_DemonstrationProduct.ini``'s
``theConstraints.Block``, defined in ``Constraints_Household2010.py``) as the structural
zeros of ``household2010``: each constraint rules out cells a released household is never
in, those the derivation makes impossible and the three ``*_le25_eld3`` the DDP ruled
out although a household can be there (docs/households.md, "The DDP's household
constraints")."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.households import HOUSEHOLD_ATTRIBUTES, derive_households
from censusdp.data.schema import HOUSEHOLD2010, Schema
from censusdp.io.budget_files import load_preset
from censusdp.privacy.randomness import RandomSource
from censusdp.release.household_consistency import household_bounds
from censusdp.release.measure import measure
from censusdp.release.topdown.driver import TopDownOptions, run_topdown

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from synth import block_codes  # noqa: E402

#: The DDP's household constraints, in the order its configuration lists them.
DDP_CONSTRAINTS = ("total", "no_vacant", "living_alone", "size2", "size3", "size4",
                   "size2plus_notalone", "not_multigen", "hh_elderly", "age_child")  # fmt: skip
#: Not structural zeros: ``total`` is a bound (households at most housing units,
#: ``household_bounds``), ``age_child`` is empty in the DDP's code (its body ``pass``).
NOT_ZEROS = ("total", "age_child")
#: The zeros the derivation does not imply: a householder of 15-24 in a couple with
#: someone of 75 or more (the spouse or partner: implausible, not impossible).
IMPLAUSIBLE = ("size2_le25_eld3", "size3_le25_eld3", "size4_le25_eld3")


def _cell(**attrs: int) -> int:
    """The household2010 cell of ``attrs`` (every attribute named)."""
    assert set(attrs) == set(HOUSEHOLD_ATTRIBUTES)
    return int(HOUSEHOLD2010.cells_of({k: np.array([v]) for k, v in attrs.items()})[0])


def _hh(size, hhtype, hhage=2, hhelderly=0, hhmulti=0, hhsex=0) -> int:
    return _cell(hhsex=hhsex, hhage=hhage, hhhisp=0, hhrace=0, hhsize=size, hhtype=hhtype,
                 hhelderly=hhelderly, hhmulti=hhmulti)  # fmt: skip


#: For each zero, a cell it forbids and no other zero does (so dropping it frees the cell).
ONLY_FORBIDDEN_BY = {
    "no_vacant": _hh(0, 3),
    "living_alone_gt1": _hh(1, 3),
    "living_alone_eld0": _hh(1, 18, hhage=2, hhelderly=2),  # 35-44 alone, someone 65+
    "living_alone_eld1": _hh(1, 18, hhage=5, hhelderly=3),  # 60-64 alone, someone 75+
    "living_alone_eld2": _hh(1, 18, hhage=6, hhelderly=3),  # 65-74 alone, someone 75+
    "size2_gt2": _hh(2, 0),  # a couple with a child is three
    "size2_multi": _hh(2, 22, hhmulti=1),
    "size2_eld0": _hh(2, 19, hhage=1, hhelderly=1),  # parent of 25-34 and a child under 6
    "size2_eld1": _hh(2, 20, hhage=5, hhelderly=2),
    "size2_eld2": _hh(2, 20, hhage=6, hhelderly=3),
    "size2_le25_eld3": _hh(2, 3, hhage=0, hhelderly=3),
    "size3_le25_eld3": _hh(3, 0, hhage=0, hhelderly=3),
    "size3_gt3": _hh(3, 2),  # a couple with children under 6 and 6-17 is four
    "size3_multi": _hh(3, 0, hhmulti=1),
    "size3_eld0": _hh(3, 21, hhage=2, hhelderly=1),
    "size3_eld1": _hh(3, 21, hhage=5, hhelderly=2),
    "size3_eld2": _hh(3, 21, hhage=6, hhelderly=3),
    "size4_multi": _hh(4, 2, hhmulti=1),
    "size4_le25_eld3": _hh(4, 2, hhage=0, hhelderly=3),
    "size2plus_notalone": _hh(5, 18),
    "not_multigen": _hh(5, 23, hhmulti=1),
    "hh_elderly_eld3": _hh(5, 22, hhage=7, hhelderly=2),
    "hh_elderly_2": _hh(5, 22, hhage=6, hhelderly=1),
    "hh_elderly_3": _hh(5, 22, hhage=5, hhelderly=0),
}
#: Zeros the DDP states although others imply them (its own redundancy): a one-person
#: household is alone (``living_alone_gt1``) and then never multi-generational
#: (``not_multigen``); the last age group's own zero is ``hh_elderly_eld3``'s.
REDUNDANT = ("living_alone_multi", "living_alone_eld3", "size2_eld3", "size3_eld3")


def _without(*names: str) -> Schema:
    zeros = tuple(z for z in HOUSEHOLD2010.structural_zeros if z.name not in names)
    return dataclasses.replace(HOUSEHOLD2010, name="household2010-less", structural_zeros=zeros)


def test_every_ddp_constraint_is_zeros_a_bound_or_empty() -> None:
    names = [z.name for z in HOUSEHOLD2010.structural_zeros]
    assert len(names) == len(set(names))
    assert sorted(names) == sorted([*ONLY_FORBIDDEN_BY, *REDUNDANT])
    for constraint in DDP_CONSTRAINTS:
        zeros = [n for n in names if n == constraint or n.startswith(constraint + "_")]
        assert bool(zeros) == (constraint not in NOT_ZEROS), constraint
    assert int(HOUSEHOLD2010.structural_zero_mask.sum()) == 239_092


@pytest.mark.parametrize("name", sorted(ONLY_FORBIDDEN_BY))
def test_each_zero_forbids_a_cell_no_other_does(name: str) -> None:
    cell = ONLY_FORBIDDEN_BY[name]
    assert HOUSEHOLD2010.structural_zero_mask[cell]
    assert not _without(name).structural_zero_mask[cell]


def _random_households(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """``n`` valid households of one to five persons: a householder of 15 or more, at most
    one husband/wife and one unmarried partner, any other relationship and age."""
    size = rng.integers(1, 6, n)
    unit = np.repeat(np.arange(n), size)
    first = np.r_[0, np.cumsum(size)[:-1]]
    k = unit.size
    rel = rng.choice([2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14], k)
    pos = np.arange(k) - first[unit]
    couple = rng.choice([-1, 1, 13], n)  # a second person who is a spouse, a partner or not
    rel = np.where((pos == 1) & (couple[unit] > 0), couple[unit], rel)
    rel[first] = 0
    age = rng.integers(0, 100, k)
    age[first] = rng.integers(15, 100, n)
    young = rng.random(n) < 0.3  # many householders of 15-24, some with an old partner
    age[first[young]] = rng.integers(15, 25, int(young.sum()))
    return {
        "unit": unit,
        "hhgq": np.zeros(k, dtype=np.int64),
        "rel": rel,
        "sex": rng.integers(1, 3, k),
        "age": age,
        "hispanic": rng.integers(0, 2, k),
        "cenrace": rng.integers(1, 64, k),
    }


def test_derived_households_fall_only_in_the_implausible_zeros() -> None:
    """Every zero but the three ``*_le25_eld3`` follows from the derivation: 200,000
    random households fall in none of them, and in each of those three."""
    p = _random_households(np.random.default_rng(33), 200_000)
    unit = p.pop("unit")
    hh = derive_households(unit, int(unit.max()) + 1, p)
    cells = HOUSEHOLD2010.cells_of(hh.attributes)
    implied = _without(*IMPLAUSIBLE).structural_zero_mask
    assert not implied[cells].any()
    for name in IMPLAUSIBLE:
        zero = next(z for z in HOUSEHOLD2010.structural_zeros if z.name == name)
        alone = dataclasses.replace(HOUSEHOLD2010, name=name, structural_zeros=(zero,))
        assert alone.structural_zero_mask[cells].any(), name


def _release(schema: Schema, hist: sp.csr_matrix, h: Hierarchy, hu: np.ndarray) -> sp.csr_matrix:
    budget = load_preset("ddp-2010-households").scaled(epsilon=2000)
    names = {g.name for g in h.geolevels.levels}
    plan = [
        (m.geolevel, m.query, m.mechanism) for m in budget.measurements() if m.geolevel in names
    ]
    ms = measure(h.aggregate(hist), h, schema, plan, RandomSource.seeded(5))
    est = run_topdown(ms, h, household_bounds(hu, h), TopDownOptions(group_variable=None))
    return est.histograms[-1]


def test_a_household_the_ddp_ruled_out_is_never_released() -> None:
    """The truth has households a ``*_le25_eld3`` zero rules out (a householder of 20
    married to someone of 80): at a nearly noiseless budget the release has none of them,
    and would keep them without the constraint; and a block with more households than
    housing units (the ``total`` constraint's bound) releases at most its housing units."""
    h = Hierarchy.from_blocks(np.asarray(block_codes(1, 1, 1, 2)))
    forbidden = [ONLY_FORBIDDEN_BY[n] for n in IMPLAUSIBLE]
    cells = np.array([*forbidden, _hh(1, 18, hhage=1), _hh(3, 0, hhage=3)])
    rows = np.repeat([0, 1], cells.size)
    hist = sp.csr_matrix(
        (np.full(rows.size, 4), (rows, np.tile(cells, 2))), shape=(2, HOUSEHOLD2010.size)
    )
    hu = np.array([6, 30])  # block 0: 20 households, 6 housing units
    released = _release(HOUSEHOLD2010, hist, h, hu)
    assert released[:, forbidden].sum() == 0
    assert not HOUSEHOLD2010.structural_zero_mask[released.indices].any()
    # ``total``: households at most the housing units, block by block
    assert np.asarray(hist.sum(axis=1)).ravel()[0] > hu[0]
    assert (np.asarray(released.sum(axis=1)).ravel() <= hu).all()
    without = _release(_without(*IMPLAUSIBLE), hist, h, hu)
    assert without[:, forbidden].sum() > 0

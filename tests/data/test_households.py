"""Household attributes derived from persons (the DDP's Household2010 levels), on hand-made
households whose answers are known."""

from __future__ import annotations

import numpy as np
import pytest

from censusdp.data.households import (
    HHTYPE_LEVELS,
    HOUSEHOLD_ATTRIBUTES,
    REL_LEVELS,
    derive_households,
    household_rules,
    rel_of_gq,
)
from censusdp.errors import InternalError

# One household per entry: (rel, sex, age) of each member, householder first, and the
# attributes it must get. Types are the DDP's Household2010 HHTYPE levels.
CASES = [
    # alone, 80-year-old woman
    ([(0, 2, 80)], dict(hhsex=1, hhage=7, hhsize=1, hhtype=18, hhelderly=3, hhmulti=0)),
    # married opposite-sex, children 3 and 10
    ([(0, 1, 40), (1, 2, 38), (2, 1, 3), (3, 2, 10)],
     dict(hhsex=0, hhage=2, hhsize=4, hhtype=2, hhelderly=0, hhmulti=0)),
    # married opposite-sex, own child 20 (not under 18): no own children
    ([(0, 1, 50), (1, 2, 49), (2, 2, 20)], dict(hhtype=3, hhage=3)),
    # married same-sex, stepchild 4 only
    ([(0, 2, 30), (1, 2, 31), (4, 1, 4)], dict(hhtype=4, hhsex=1, hhage=1)),
    # married same-sex, no children, one partner 61
    ([(0, 1, 58), (1, 1, 61)], dict(hhtype=7, hhage=4, hhelderly=1)),
    # cohabiting opposite-sex, child 6..17 only
    ([(0, 2, 33), (13, 1, 35), (2, 1, 12)], dict(hhtype=9)),
    # cohabiting opposite-sex, a sibling (relative), no own children
    ([(0, 1, 25), (13, 2, 24), (5, 1, 22)], dict(hhtype=11, hhage=1)),
    # cohabiting opposite-sex, a roommate only
    ([(0, 1, 25), (13, 2, 24), (12, 1, 26)], dict(hhtype=12)),
    # cohabiting same-sex, both child ranges
    ([(0, 1, 36), (13, 1, 37), (2, 1, 2), (2, 2, 7)], dict(hhtype=15)),
    # cohabiting same-sex, a parent (relative)
    ([(0, 2, 45), (13, 2, 44), (6, 2, 70)], dict(hhtype=16, hhelderly=2)),
    # cohabiting same-sex, nobody else
    ([(0, 2, 45), (13, 2, 44)], dict(hhtype=17)),
    # no partner, child under 6
    ([(0, 2, 22), (2, 1, 1)], dict(hhtype=19, hhage=0)),
    # no partner, children 6..17 only
    ([(0, 1, 41), (3, 1, 9), (2, 2, 16)], dict(hhtype=20)),
    # no partner, both ranges
    ([(0, 2, 29), (2, 1, 5), (2, 2, 8)], dict(hhtype=21)),
    # no partner, grandchild only (a skipped generation: not multi-generational)
    ([(0, 2, 66), (7, 1, 10)], dict(hhtype=22, hhmulti=0, hhelderly=2)),
    # no partner, roomers only
    ([(0, 1, 19), (11, 1, 20), (14, 2, 21)], dict(hhtype=23, hhage=0)),
    # three generations: householder, child 40, grandchildren (not own children); 8 persons -> 7+
    ([(0, 2, 65), (2, 2, 40), (9, 1, 42), (7, 1, 15), (7, 2, 12), (7, 1, 9), (10, 1, 30),
      (12, 1, 77)],
     dict(hhtype=22, hhmulti=1, hhsize=7, hhelderly=3)),
    # three generations: householder, parent-in-law, adult child
    ([(0, 1, 50), (1, 2, 48), (8, 2, 85), (2, 1, 19)],
     dict(hhtype=3, hhmulti=1, hhelderly=3)),
    # two generations: householder and parent
    ([(0, 1, 50), (6, 2, 85)], dict(hhtype=22, hhmulti=0)),
    # householder 85 (the last age bin), two or more races, Hispanic
    ([(0, 1, 85)], dict(hhage=8, hhrace=6, hhhisp=1)),
]  # fmt: skip


def _columns(cases):
    rel, sex, age, unit = [], [], [], []
    for u, (members, _) in enumerate(cases):
        for r, s, a in members:
            rel.append(r), sex.append(s), age.append(a), unit.append(u)
    n = len(rel)
    cenrace = np.ones(n, dtype=np.int64)
    hispanic = np.zeros(n, dtype=np.int64)
    last_head = n - 1  # the last case's householder
    cenrace[last_head], hispanic[last_head] = 7, 1
    persons = {
        "hhgq": np.zeros(n, dtype=np.int64),
        "rel": np.asarray(rel),
        "sex": np.asarray(sex),
        "age": np.asarray(age),
        "hispanic": hispanic,
        "cenrace": cenrace,
    }
    return np.asarray(unit), persons


def test_each_household_gets_its_known_attributes() -> None:
    unit, persons = _columns(CASES)
    # shuffle the persons: the derivation must not depend on their order
    order = np.random.default_rng(3).permutation(unit.size)
    hh = derive_households(unit[order], len(CASES), {k: v[order] for k, v in persons.items()})
    assert hh.n_households == len(CASES)
    assert hh.unit.tolist() == list(range(len(CASES)))
    assert persons["rel"][order][hh.householder].tolist() == [0] * len(CASES)
    assert hh.persons.tolist() == [len(m) for m, _ in CASES]
    for i, (_, want) in enumerate(CASES):
        for name, value in want.items():
            got = int(hh.attributes[name][i])
            assert got == value, (
                f"case {i}: {name} is {got} ({HHTYPE_LEVELS[got] if name == 'hhtype' else ''}), not {value}"
            )
    for name, levels in HOUSEHOLD_ATTRIBUTES.items():
        assert hh.attributes[name].min() >= 0 and hh.attributes[name].max() < len(levels)


def test_levels_are_the_ddp_household_schema() -> None:
    """The DDP code's Schema_Household2010: shape (2, 9, 2, 7, 8, 24, 4, 2), 387,072 cells
    (Van Riper et al. (2020) Table 2 prints 96,768, a quarter of it: docs/households.md);
    rel 0..14 as the DDP's rel attribute."""
    shape = tuple(len(v) for v in HOUSEHOLD_ATTRIBUTES.values())
    assert shape == (2, 9, 2, 7, 8, 24, 4, 2)
    assert int(np.prod(shape)) == 387_072
    assert len(REL_LEVELS) == 17 and REL_LEVELS[13] == "Unmarried partner"
    assert rel_of_gq(np.array([0, 1, 4, 5, 7])).tolist() == [-1, 15, 15, 16, 16]


def test_group_quarters_persons_make_no_household() -> None:
    unit = np.array([0, 0, 1, 1])
    persons = {
        "hhgq": np.array([0, 0, 5, 5]),
        "rel": np.array([0, 2, 16, 16]),
        "sex": np.array([1, 2, 1, 2]),
        "age": np.array([30, 2, 19, 20]),
        "hispanic": np.zeros(4, dtype=np.int64),
        "cenrace": np.ones(4, dtype=np.int64),
    }
    hh = derive_households(unit, 2, persons)
    assert hh.unit.tolist() == [0] and hh.persons.tolist() == [2]
    assert hh.attributes["hhtype"].tolist() == [19]


def test_a_household_without_householder_is_a_bug_not_a_guess() -> None:
    persons = {
        "hhgq": np.zeros(2, dtype=np.int64),
        "rel": np.array([1, 2]),
        "sex": np.array([1, 2]),
        "age": np.array([30, 2]),
        "hispanic": np.zeros(2, dtype=np.int64),
        "cenrace": np.ones(2, dtype=np.int64),
    }
    with pytest.raises(InternalError, match="no householder"):
        derive_households(np.array([0, 0]), 1, persons)


def test_household_rules_name_the_rows_that_break_them() -> None:
    unit = np.array([0, 0, 0, 1, 1, 2, 3, 3])
    hhgq = np.array([0, 0, 0, 0, 0, 3, 0, 0])
    rel = np.array([0, 0, 1, 1, 15, 16, 0, 13])
    age = np.array([40, 41, 39, 30, 30, 80, 14, 16])
    household_unit = np.array([True, True, False, True])
    rules = {r: (c, m) for c, m, r in household_rules(unit, hhgq, rel, age, household_unit)}
    rows = {r: np.flatnonzero(m).tolist() for r, (_, m) in rules.items()}
    by_start = {r.split(" (")[0].split(" but")[0]: v for r, v in rows.items()}
    assert by_start["is a group-quarters code"] == [4]
    assert by_start["is not the code of the person's group quarters"] == [5]
    assert by_start["is a second householder"] == [1]
    assert by_start["is a second husband/wife"] == []
    assert by_start["is the age of a householder"] == [6]
    assert by_start["is an occupied housing unit with no householder"] == [1]

"""``validate``'s ``h1_source`` check of a DHC release held to a P.L. 94 release's H1
(``run --h1-from``): the manifest's ``h1_source`` and ``invariants.parquet``'s
``h1_occupied`` both or neither, the occupied units within each block's housing units,
and the manifest's occupied and vacant totals those of ``h1_occupied``."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.invariants import Invariants
from censusdp.release.validate._households import check_h1_source
from censusdp.release.validate.report import ValidationReport
from synth import block_codes

HIERARCHY = Hierarchy.from_blocks(np.array(block_codes(1, 1, 1, 3)))
HOUSING = np.array([4, 0, 2])


PERSONS = sp.csr_matrix(([2, 3], ([0, 2], [0, 7])), shape=(3, 2016))
"""Held ``pl94`` persons: 2 in the first block, 3 in the last."""


def _inv(occupied: np.ndarray | None, persons: sp.csr_matrix | None = None) -> Invariants:
    n = HOUSING.size
    return Invariants(
        HIERARCHY.blocks, np.zeros(n, np.int64), HOUSING, np.zeros((n, 8), np.int64),
        h1_occupied=occupied, pl94_persons=persons,
    )  # fmt: skip


def _check(
    occupied: np.ndarray | None, record: object, persons: sp.csr_matrix | None = None
) -> dict | None:
    rep = ValidationReport()
    check_h1_source(rep, HIERARCHY, _inv(occupied, persons), record)
    return rep.checks.get("h1_source")


RECORD = {"release": "/pl1", "manifest_sha256": "ab" * 32, "occupied": 5, "vacant": 1}


def test_a_release_without_an_h1_source_has_no_such_check() -> None:
    assert _check(None, None) is None


def test_a_consistent_h1_source_passes() -> None:
    got = _check(np.array([3, 0, 2]), RECORD)
    assert got is not None and got["ok"], got
    assert "/pl1" in got["detail"]


@pytest.mark.parametrize(
    ("occupied", "record", "words"),
    [
        (np.array([3, 0, 2]), None, "records no h1_source"),
        (None, RECORD, "has no h1_occupied"),
        (np.array([3, 0, 2]), {**RECORD, "occupied": 6}, "h1_source.occupied is 6"),
        (np.array([3, 0, 2]), {**RECORD, "vacant": 2}, "h1_source.vacant is 2"),
        (np.array([4, 1, 0]), RECORD, "outside 0..housing_units"),
    ],
)
def test_each_disagreement_fails(occupied, record, words: str) -> None:
    got = _check(occupied, record)
    assert got is not None and not got["ok"] and words in got["detail"], got


PERSONS_ONLY = {"release": "/pl1", "manifest_sha256": "ab" * 32, "persons": 5}
"""A ``dhcp-2020`` person run alone held to a P.L. 94 release: its persons, no H1."""


def test_a_person_run_alone_holds_its_persons_and_no_households() -> None:
    got = _check(None, PERSONS_ONLY, PERSONS)
    assert got is not None and got["ok"] and "no households held" in got["detail"], got


@pytest.mark.parametrize(
    ("persons", "record", "words"),
    [
        (None, PERSONS_ONLY, "h1_source.persons is 5, the published invariants give no"),
        (PERSONS, {**PERSONS_ONLY, "persons": 4}, "h1_source.persons is 4"),
        (PERSONS, None, "records no h1_source"),
    ],
)
def test_a_person_run_alone_disagreeing_fails(persons, record, words: str) -> None:
    got = _check(None, record, persons)
    assert got is not None and not got["ok"] and words in got["detail"], got

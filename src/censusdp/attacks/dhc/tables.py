"""DHC-style block and tract tables that the reconstruction attack reads.

The 2010 attack (JASON (JSR-19-2F) sec. 4.1; Van Riper et al. (2020) sec. 1.2 and its note 3) used tables P1,
P6, P7, P9, P11, P12, P12A-I and P14 by block and PCT12A-N by tract. The PL 94-171
tables of :mod:`censusdp.tables` (P1-P4) have no sex or age, so this module defines
the tables the attack needs and tabulates them from any microdata that carries
``sex`` and ``age``: a release's MDF (a ``dhc-lite`` DP run or a swapped release) or
the confidential file itself (the "unprotected" release).

Which tables, and why (the choices are documented in ``docs/attacks.md``):

* ``P1`` total population (block).
* ``P9`` Hispanic or Latino by the 63 races (block; 2 x 63 = 126 cells). ``P6``
  (races tallied) and ``P7`` (Hispanic by 7 race groups) are linear functions of
  ``P9``, so they add no constraint and are not materialised.
* ``P11`` the same for the population 18 years and over (block).
* ``P12`` sex by **single-year** age 0..115 (block). The 2010 block ``P12`` used 23
  age bands and published single years only in ``P14`` (under 20) and in the tract
  ``PCT12``; with ``age_detail="single"`` (the default) the block table has single
  years, as the DHC-style attack in the brief asks for. With ``age_detail="sf1"`` it
  has the 23 bands of 2010 SF1, and single years come from ``P14`` only.
* ``P12A-I`` sex by the 23 ``P12`` age bands, iterated by race group (block): A-F
  the six races alone, G two or more races, H Hispanic or Latino, I White alone not
  Hispanic.
* ``P14`` sex by single-year age for the population under 20 (block).
* ``PCT12A-O`` sex by single-year age iterated by race group (tract; J-O are B-G
  restricted to not Hispanic). The per-block solver uses them only to choose among
  equally consistent block solutions (see :mod:`censusdp.attacks.dhc.reconstruct`).

Every table is stored as a sparse (units x lines) CSR matrix; a record's *key* is
``((sex * N_AGES + age) * 2 + hispanic) * 63 + race`` with ``sex`` 0/1, ``age`` 0..115,
``hispanic`` 0/1 and ``race`` the CENRACE level 0..62, and tables are the products of
a sparse (units x keys) histogram with 0/1 operators.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
import scipy.sparse as sp

from censusdp.errors import ConfigError, InputError

__all__ = [
    "AGE_BANDS",
    "AGE_DETAILS",
    "BLOCK_ITERATIONS",
    "ITERATIONS",
    "N_AGES",
    "N_ETH",
    "N_KEYS",
    "DhcTables",
    "band_of_age",
    "dhc_tables",
    "eth_of_iteration",
    "key_histogram",
    "keys_of",
    "split_keys",
]

N_AGES = 116
N_RACES = 63
N_ETH = 2 * N_RACES
"""Race-ethnicity cells: ``eth = hispanic * 63 + race``."""
N_KEYS = 2 * N_AGES * N_ETH
"""Person keys (sex, single-year age, Hispanic origin, race): 29,232."""

AGE_DETAILS = ("single", "sf1")

# 2010 SF1 P12 age bands (lower bounds); the last band is "85 years and over".
_BAND_LOWER = (
    0,
    5,
    10,
    15,
    18,
    20,
    21,
    22,
    25,
    30,
    35,
    40,
    45,
    50,
    55,
    60,
    62,
    65,
    67,
    70,
    75,
    80,
    85,
)
AGE_BANDS: tuple[tuple[int, int], ...] = tuple(
    (lo, (_BAND_LOWER[i + 1] - 1) if i + 1 < len(_BAND_LOWER) else N_AGES - 1)
    for i, lo in enumerate(_BAND_LOWER)
)
"""The 23 age bands of 2010 SF1 table P12, as inclusive ``(lo, hi)`` single years."""

N_BANDS = len(AGE_BANDS)
P14_AGES = 20
"""P14 covers single years 0..19."""


def band_of_age(age: np.ndarray) -> np.ndarray:
    """The P12 age band (0..22) of each single-year age."""
    return np.searchsorted(np.asarray(_BAND_LOWER), np.asarray(age), side="right") - 1


def _iteration_masks() -> dict[str, np.ndarray]:
    eth = np.arange(N_ETH)
    hisp, race = eth // N_RACES, eth % N_RACES
    nh = hisp == 0
    masks = {
        "A": race == 0,
        "B": race == 1,
        "C": race == 2,
        "D": race == 3,
        "E": race == 4,
        "F": race == 5,
        "G": race >= 6,
        "H": hisp == 1,
        "I": (race == 0) & nh,
        "J": (race == 1) & nh,
        "K": (race == 2) & nh,
        "L": (race == 3) & nh,
        "M": (race == 4) & nh,
        "N": (race == 5) & nh,
        "O": (race >= 6) & nh,
    }
    return masks


ITERATIONS: dict[str, np.ndarray] = _iteration_masks()
"""Race-group iterations A-O as boolean masks over the 126 race-ethnicity cells."""
BLOCK_ITERATIONS: tuple[str, ...] = tuple("ABCDEFGHI")
"""Iterations published by block in 2010 (P12A-I)."""
TRACT_ITERATIONS: tuple[str, ...] = tuple("ABCDEFGHIJKLMNO")


@cache
def eth_of_iteration() -> np.ndarray:
    """For each race-ethnicity cell, its finest tract iteration (index into A-O).

    Hispanic -> H; not Hispanic White alone -> I; not Hispanic other single races ->
    J-N; not Hispanic two or more races -> O. These partition the 126 cells.
    """
    eth = np.arange(N_ETH)
    hisp, race = eth // N_RACES, eth % N_RACES
    out = np.where(hisp == 1, 7, np.where(race == 0, 8, np.where(race <= 5, 8 + race, 14)))
    return out.astype(np.int64)


def keys_of(
    sex: np.ndarray, age: np.ndarray, hispanic: np.ndarray, cenrace: np.ndarray
) -> np.ndarray:
    """Person keys from microdata codes (``sex`` 1/2, ``age`` 0..115, ``cenrace`` 1..63)."""
    s = np.asarray(sex, dtype=np.int64) - 1
    a = np.asarray(age, dtype=np.int64)
    h = np.asarray(hispanic, dtype=np.int64)
    r = np.asarray(cenrace, dtype=np.int64) - 1
    bad = (s < 0) | (s > 1) | (a < 0) | (a >= N_AGES) | (h < 0) | (h > 1) | (r < 0) | (r >= N_RACES)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"person row {i} has sex={s[i] + 1}, age={a[i]}, hispanic={h[i]}, cenrace={r[i] + 1}; "
            "sex must be 1..2, age 0..115, hispanic 0..1, cenrace 1..63"
        )
    return ((s * N_AGES + a) * 2 + h) * N_RACES + r


def split_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(sex 0/1, age, eth)`` of each key (``eth = hispanic * 63 + race``)."""
    keys = np.asarray(keys, dtype=np.int64)
    sa, eth = np.divmod(keys, N_ETH)
    sex, age = np.divmod(sa, N_AGES)
    return sex, age, eth


def key_histogram(unit: np.ndarray, keys: np.ndarray, n_units: int) -> sp.csr_matrix:
    """Sparse (units x keys) int64 counts."""
    return sp.csr_matrix(
        (np.ones(keys.size, dtype=np.int64), (np.asarray(unit, dtype=np.int64), keys)),
        shape=(n_units, N_KEYS),
    )


def _operator(line_of_key: np.ndarray, n_lines: int) -> sp.csr_matrix:
    """(keys x lines) 0/1 operator; ``line_of_key < 0`` means the key is outside the table."""
    keep = line_of_key >= 0
    return sp.csr_matrix(
        (np.ones(int(keep.sum()), dtype=np.int64), (np.flatnonzero(keep), line_of_key[keep])),
        shape=(N_KEYS, n_lines),
    )


def _iterations_operator(
    iterations: Sequence[str],
    keys: np.ndarray,
    eth: np.ndarray,
    sex: np.ndarray,
    age_line: np.ndarray,
    n_age_lines: int,
) -> sp.csr_matrix:
    """(keys x lines) operator of an iterated sex x age table, lines (iteration, sex, age)."""
    rows, cols = [], []
    for i, name in enumerate(iterations):
        member = ITERATIONS[name][eth]
        rows.append(keys[member])
        cols.append((i * 2 + sex[member]) * n_age_lines + age_line[member])
    r, c = np.concatenate(rows), np.concatenate(cols)
    return sp.csr_matrix(
        (np.ones(r.size, dtype=np.int64), (r, c)),
        shape=(N_KEYS, len(iterations) * 2 * n_age_lines),
    )


@cache
def _operators(age_detail: str) -> dict[str, sp.csr_matrix]:
    keys = np.arange(N_KEYS)
    sex, age, eth = split_keys(keys)
    band = band_of_age(age)
    ops: dict[str, sp.csr_matrix] = {}
    ops["P1"] = _operator(np.zeros(N_KEYS, dtype=np.int64), 1)
    ops["P9"] = _operator(eth, N_ETH)
    ops["P11"] = _operator(np.where(age >= 18, eth, -1), N_ETH)
    if age_detail == "single":
        ops["P12"] = _operator(sex * N_AGES + age, 2 * N_AGES)
    else:
        ops["P12"] = _operator(sex * N_BANDS + band, 2 * N_BANDS)
    ops["P14"] = _operator(np.where(age < P14_AGES, sex * P14_AGES + age, -1), 2 * P14_AGES)
    # P12A-I / PCT12A-O: (iteration, sex, age); keys belong to several iterations (A and I ...).
    ops["P12A-I"] = _iterations_operator(BLOCK_ITERATIONS, keys, eth, sex, band, N_BANDS)
    ops["PCT12A-O"] = _iterations_operator(TRACT_ITERATIONS, keys, eth, sex, age, N_AGES)
    return ops


BLOCK_TABLES = ("P1", "P9", "P11", "P12", "P12A-I", "P14")
TRACT_TABLES = ("PCT12A-O",)


@dataclass(frozen=True, eq=False)
class DhcTables:
    """The published block and tract tables one attack reads.

    Attributes:
        blocks: sorted 16-character block geocodes (rows of the block tables).
        tracts: sorted 11-character tract geocodes (rows of the tract tables).
        block_tract: index into ``tracts`` of each block.
        age_detail: ``"single"`` (block P12 by single-year age) or ``"sf1"`` (bands).
        block: table name -> sparse (blocks x lines) int64 counts.
        tract: table name -> sparse (tracts x lines) int64 counts.
    """

    blocks: np.ndarray
    tracts: np.ndarray
    block_tract: np.ndarray
    age_detail: str
    block: Mapping[str, sp.csr_matrix]
    tract: Mapping[str, sp.csr_matrix]

    @property
    def population(self) -> np.ndarray:
        """Total population of each block (table P1)."""
        return np.asarray(self.block["P1"].toarray()).ravel()

    def n_published(self) -> int:
        """Number of non-zero published cells (block and tract)."""
        return int(
            sum(m.nnz for m in self.block.values()) + sum(m.nnz for m in self.tract.values())
        )


def dhc_tables(persons: Mapping[str, np.ndarray], *, age_detail: str = "single") -> DhcTables:
    """Tabulate the attack's block and tract tables from person microdata.

    Args:
        persons: columns ``geocode`` (16-character block), ``sex`` (1/2), ``age``
            (0..115), ``hispanic`` (0/1), ``cenrace`` (1..63): an MDF with sex and age,
            or the CEF itself.
        age_detail: ``"single"`` (default) or ``"sf1"`` (see the module docstring).

    Raises:
        InputError: if a column is missing or a value is out of range.
        ConfigError: for an unknown ``age_detail``.
    """
    if age_detail not in AGE_DETAILS:
        raise ConfigError(f"age_detail must be one of {AGE_DETAILS}, got {age_detail!r}")
    missing = [c for c in ("geocode", "sex", "age", "hispanic", "cenrace") if c not in persons]
    if missing:
        raise InputError(
            f"the reconstruction attack needs person columns {missing} (a release with the "
            "dhc-lite schema or a swapped release has them; a pl94 release does not)"
        )
    geocode = np.asarray(persons["geocode"]).astype("U16")
    keys = keys_of(persons["sex"], persons["age"], persons["hispanic"], persons["cenrace"])
    blocks, unit = np.unique(geocode, return_inverse=True)
    tracts, block_tract = np.unique(blocks.astype("U11"), return_inverse=True)
    hist = key_histogram(unit, keys, blocks.size)
    ops = _operators(age_detail)
    block = {name: sp.csr_matrix(hist @ ops[name]) for name in BLOCK_TABLES}
    agg = sp.csr_matrix(
        (np.ones(blocks.size, dtype=np.int64), (block_tract, np.arange(blocks.size))),
        shape=(tracts.size, blocks.size),
    )
    thist = sp.csr_matrix(agg @ hist)
    tract = {name: sp.csr_matrix(thist @ ops[name]) for name in TRACT_TABLES}
    for m in (*block.values(), *tract.values()):
        m.eliminate_zeros()
    return DhcTables(
        blocks=blocks,
        tracts=tracts,
        block_tract=block_tract.astype(np.int64),
        age_detail=age_detail,
        block=block,
        tract=tract,
    )

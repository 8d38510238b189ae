"""Geography: geolevels, the geounit hierarchy, and aggregation of block histograms.

A geocode is a prefix of the 16-character block geocode: state (2) + county (3) +
tract (6) + block group (1) + block (4). A :class:`GeoLevels` lists the levels from the
top (``US``, code length 0) to the bottom (``Block``, 16); a unit's parent is the unit
of the level above whose code is a prefix of it.

A spine that is not the geocode hierarchy (:mod:`censusdp.data.spine`: the AIAN split
and optimized block groups of the 2020 production system) is written in the same form:
every block gets a longer code, the path of its units followed by its 16-character
geocode, and the levels' lengths are the lengths of those path prefixes; the bottom
level is then longer than 16 and a block's geocode is the last 16 characters of its code.

A :class:`Hierarchy` is built once from the block geocodes present in the data. Units
of every level are kept sorted by geocode, so the children of a parent are a
contiguous range (``child_ptr[level][i] : child_ptr[level][i + 1]`` in the level
below), and aggregation is one sparse matrix product per level - no Python loop per
person, cell or unit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from censusdp.errors import GeographyError

__all__ = [
    "BLOCK_GEOCODE_LENGTH",
    "DEFAULT_CHUNK_VALUES",
    "DEFAULT_GEOLEVELS",
    "GeoLevel",
    "GeoLevels",
    "Hierarchy",
    "family_chunks",
    "validate_geocodes",
]

BLOCK_GEOCODE_LENGTH = 16


@dataclass(frozen=True)
class GeoLevel:
    """A level of the geographic hierarchy and the length of its geocodes."""

    name: str
    length: int


@dataclass(frozen=True)
class GeoLevels:
    """The geolevels from top to bottom.

    Raises:
        GeographyError: unless names are unique, lengths strictly increase and the
            bottom level has the block length 16 (or more, for a spine whose block codes
            are a unit path followed by the geocode).

    The top level is the root: length 0 (the nation), or longer when the run is rooted
    at one geounit, as production's Puerto Rico run is rooted at its State (length 2;
    :meth:`Hierarchy.from_blocks` then requires every block to share that prefix).
    """

    levels: tuple[GeoLevel, ...]

    def __post_init__(self) -> None:
        if len(self.levels) < 2:
            raise GeographyError("a hierarchy needs at least two geolevels")
        names = [lv.name for lv in self.levels]
        if len(set(names)) != len(names):
            raise GeographyError(f"geolevel names must be unique, got {names}")
        if self.levels[0].length < 0:
            raise GeographyError(
                f"the top geolevel {self.levels[0].name!r} must have code length >= 0, "
                f"got {self.levels[0].length}"
            )
        if self.levels[-1].length < BLOCK_GEOCODE_LENGTH:
            raise GeographyError(
                f"the bottom geolevel {self.levels[-1].name!r} must have code length "
                f"{BLOCK_GEOCODE_LENGTH} (or more, for a spine), got {self.levels[-1].length}"
            )
        for above, below in zip(self.levels, self.levels[1:], strict=False):
            if below.length <= above.length:
                raise GeographyError(
                    f"geolevel {below.name!r} (length {below.length}) must have longer codes "
                    f"than {above.name!r} (length {above.length})"
                )

    @classmethod
    def from_pairs(cls, pairs: list[tuple[str, int]] | tuple[tuple[str, int], ...]) -> GeoLevels:
        """Build from ``(name, length)`` pairs, top first."""
        return cls(tuple(GeoLevel(str(n), int(k)) for n, k in pairs))

    @property
    def names(self) -> tuple[str, ...]:
        """Level names, top first."""
        return tuple(lv.name for lv in self.levels)

    def __len__(self) -> int:
        return len(self.levels)

    def __getitem__(self, i: int) -> GeoLevel:
        return self.levels[i]

    @property
    def state_level(self) -> int:
        """The level whose total population is invariant: ``State`` (the top level of a
        run rooted at a state), else the level below the root."""
        return self.names.index("State") if "State" in self.names else min(1, len(self) - 1)

    def index(self, name: str) -> int:
        """Position of the level called ``name``."""
        for i, lv in enumerate(self.levels):
            if lv.name == name:
                return i
        raise GeographyError(f"unknown geolevel {name!r}; levels are {list(self.names)}")


DEFAULT_GEOLEVELS = GeoLevels.from_pairs(
    [("US", 0), ("State", 2), ("County", 5), ("Tract", 11), ("BlockGroup", 12), ("Block", 16)]
)


def validate_geocodes(geocodes: np.ndarray, length: int = BLOCK_GEOCODE_LENGTH) -> np.ndarray:
    """Boolean mask of the geocodes that are ``length`` (16) ASCII digits."""
    codes = np.asarray(geocodes, dtype=object)
    s = codes.astype("U")
    ok = np.char.str_len(s) == length
    if length and ok.any():
        # '0'..'9' only: str.isdigit also takes other scripts' digits ('\u0663')
        points = s[ok].astype(f"U{length}").view(np.uint32).reshape(-1, length)
        ok[ok] = ((points >= ord("0")) & (points <= ord("9"))).all(axis=1)
    return ok


@dataclass(frozen=True, eq=False)
class Hierarchy:
    """All geounits of every level, built from the block geocodes present.

    Attributes:
        geolevels: the levels.
        geocodes: per level, the sorted unique geocodes (``numpy`` unicode arrays).
        parent: per level, the index of each unit's parent in the level above
            (level 0 has ``-1``).
        child_ptr: per level except the bottom, offsets such that the children of unit
            ``i`` are units ``child_ptr[i]:child_ptr[i + 1]`` of the next level.
    """

    geolevels: GeoLevels
    geocodes: tuple[np.ndarray, ...]
    parent: tuple[np.ndarray, ...]
    child_ptr: tuple[np.ndarray, ...]
    _block_of_code: dict[str, int] = field(default_factory=dict, repr=False)

    @classmethod
    def from_blocks(
        cls, block_geocodes: np.ndarray, geolevels: GeoLevels = DEFAULT_GEOLEVELS
    ) -> Hierarchy:
        """Build the hierarchy of every level from (possibly repeated) block geocodes.

        The block codes have the bottom level's length: 16 for the geocode hierarchy,
        more for a spine's block codes (:meth:`censusdp.data.spine.Spine.hierarchy`).
        """
        width = geolevels.levels[-1].length
        blocks = np.unique(np.asarray(block_geocodes).astype(f"U{width}"))
        bad = ~validate_geocodes(blocks, width)
        if bad.any():
            raise GeographyError(f"block geocode {str(blocks[bad][0])!r} is not {width} digits")
        codes: list[np.ndarray] = []
        parents: list[np.ndarray] = []
        ptrs: list[np.ndarray] = []
        # Bottom-up: each level's codes are the unique prefixes of the blocks.
        # Block codes are sorted, so prefixes come out sorted and grouped.
        for lv in geolevels.levels:
            if lv.length == width:
                codes.append(blocks)
            else:
                prefixes = blocks.astype(f"U{max(lv.length, 1)}") if lv.length else None
                if prefixes is None:
                    codes.append(np.array([""], dtype="U1"))
                else:
                    codes.append(np.unique(prefixes))
        if codes[0].size > 1:
            top = geolevels.levels[0]
            raise GeographyError(
                f"the top geolevel {top.name!r} (code length {top.length}) is the root and "
                f"must hold one geounit; the blocks are in {codes[0].size} "
                f"({', '.join(repr(str(c)) for c in codes[0][:3])}, ...): one per run"
            )
        for li in range(len(geolevels.levels)):
            if li == 0:
                parents.append(np.full(codes[0].size, -1, dtype=np.int64))
                continue
            above = geolevels.levels[li - 1]
            if above.length == 0:
                par = np.zeros(codes[li].size, dtype=np.int64)
            else:
                pref = codes[li].astype(f"U{above.length}")
                par = np.searchsorted(codes[li - 1], pref).astype(np.int64)
            parents.append(par)
            counts = np.bincount(par, minlength=codes[li - 1].size)
            ptrs.append(np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))
        return cls(geolevels, tuple(codes), tuple(parents), tuple(ptrs))

    # -- navigation --------------------------------------------------------------------

    @property
    def n_levels(self) -> int:
        """Number of geolevels."""
        return len(self.geolevels)

    def n_units(self, level: int) -> int:
        """Number of geounits at ``level``."""
        return int(self.geocodes[level].size)

    @property
    def blocks(self) -> np.ndarray:
        """Sorted block geocodes (a spine's block codes: unit path + geocode)."""
        return self.geocodes[-1]

    def children(self, level: int, unit: int) -> slice:
        """Slice of the children (in ``level + 1``) of unit ``unit`` of ``level``."""
        ptr = self.child_ptr[level]
        return slice(int(ptr[unit]), int(ptr[unit + 1]))

    def block_index(self, block_geocodes: np.ndarray) -> np.ndarray:
        """Index of each block geocode (code) in :attr:`blocks`; ``-1`` if absent."""
        codes = np.asarray(block_geocodes).astype(f"U{self.geolevels.levels[-1].length}")
        idx = np.searchsorted(self.blocks, codes)
        idx = np.minimum(idx, self.blocks.size - 1)
        found = self.blocks[idx] == codes
        return np.where(found, idx, -1).astype(np.int64)

    def ancestor_index(self, level: int) -> np.ndarray:
        """For every block, the index of its unit at ``level``."""
        idx = np.arange(self.blocks.size, dtype=np.int64)
        for li in range(self.n_levels - 1, level, -1):
            idx = self.parent[li][idx]
        return idx

    def membership(self, level: int) -> sp.csr_matrix:
        """The (units at ``level`` x blocks) 0/1 aggregation matrix."""
        anc = self.ancestor_index(level)
        nb = self.blocks.size
        return sp.csr_matrix(
            (np.ones(nb, dtype=np.int64), (anc, np.arange(nb))),
            shape=(self.n_units(level), nb),
        )

    # -- aggregation -------------------------------------------------------------------

    def aggregate(self, block_values: sp.spmatrix | np.ndarray) -> list[sp.csr_matrix | np.ndarray]:
        """Aggregate block rows (blocks x anything) to every level, top first.

        Sparse input stays sparse; dense input stays dense. Each level is computed
        from the level below it, one sparse product per level.
        """
        out: list[sp.csr_matrix | np.ndarray] = [None] * self.n_levels  # type: ignore[list-item]
        cur = sp.csr_matrix(block_values) if sp.issparse(block_values) else np.asarray(block_values)
        out[-1] = cur
        for li in range(self.n_levels - 1, 0, -1):
            par = self.parent[li]
            m = sp.csr_matrix(
                (np.ones(par.size, dtype=np.int64), (par, np.arange(par.size))),
                shape=(self.n_units(li - 1), par.size),
            )
            cur = sp.csr_matrix(m @ cur) if sp.issparse(cur) else np.asarray(m @ cur)
            out[li - 1] = cur
        return out


DEFAULT_CHUNK_VALUES = 1 << 22
"""Target number of noisy values per chunk (about 32 MB of int64): bounds the memory of
one measurement task and of one estimation read."""


def family_chunks(
    hierarchy: Hierarchy,
    level: int,
    values_per_unit: int,
    target: int = DEFAULT_CHUNK_VALUES,
    *,
    split_families: bool = False,
) -> list[tuple[int, int]]:
    """Cut the units of ``level`` into ``[start, stop)`` runs of whole families.

    A family is the children of one parent; each run holds consecutive families with
    about ``target`` values in total (a single family larger than that is one run), so
    a chunk read by estimation always holds complete parent-with-children problems.

    With ``split_families`` (measurement), a family with more than ``target`` values is
    cut at unit boundaries into runs of at most ``max(1, target // values_per_unit)``
    units instead, so no run holds more than ``target`` values unless one unit alone
    does; the runs after a cut family's last piece are whole families again.
    """
    n = hierarchy.n_units(level)
    per = max(1, target // max(values_per_unit, 1))
    if level == 0:
        if not split_families:
            return [(0, n)] if n else []
        return [(a, min(a + per, n)) for a in range(0, n, per)]
    ptr = hierarchy.child_ptr[level - 1]
    out: list[tuple[int, int]] = []
    start = 0
    while start < n:
        # the furthest family boundary within ``per`` units (at least one family)
        p = int(np.searchsorted(ptr, start, side="right"))
        limit = int(np.searchsorted(ptr, start + per, side="right")) - 1
        stop = int(ptr[max(limit, p)])
        if split_families and stop - start > per:
            stop = start + per  # the family at ``start`` alone is too large: cut it
        out.append((start, stop))
        start = stop
    return out

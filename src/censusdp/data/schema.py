"""Schemas: attributes with named levels, their product as a cell index, and recodes.

A :class:`Schema` is the Cartesian product of its :class:`Attribute` objects; cell
indices are row-major (C order) over the attributes in the order they are listed,
so ``cell = ravel_multi_index(levels, shape)``. Each attribute also says how it is
read from a microdata column (``age -> votingage`` is a lookup table kept here, not
scattered through the code) and how it is written to the MDF.

A :class:`Recode` is a derived attribute: a many-to-one map from the levels of one
attribute (``hhgq -> hhinstlevels``; ``age -> votingage`` in ``dhc-lite``). Queries
(see :mod:`censusdp.data.queries`) are built from attribute and recode names.

Built-in schemas:

* ``pl94``: HHGQ (8) x VOTINGAGE (2) x HISPANIC (2) x CENRACE (63) = 2,016 cells.
* ``dhc-lite``: HHGQ (8) x SEX (2) x AGE (116) x HISPANIC (2) x CENRACE (63)
  = 233,856 cells.
* ``dhcp-hhgq``: the 2010 DDP's person schema (``DHCP_HHGQ``): ``dhc-lite`` x CITIZEN (2)
  = 467,712 cells, with the DDP's age recodes (``agegroups4``, ``agegroups16``,
  ``agegroups64``) and its structural zeros of age by group-quarters type.
* ``units``: housing units by OCCUPANCY (vacant, occupied), for the housing-unit run.
* ``household2010``: the 2010 DDP's households: HHSEX (2) x HHAGE (9) x HHHISP (2) x
  HHRACE (7) x HHSIZE (8) x HHTYPE (24) x HHELDERLY (4) x HHMULTI (2) = 387,072 cells.

CENRACE's 63 categories are the non-empty subsets of the six OMB race groups, in the
Census order: the 6 single races, then the 15 two-race combinations, the 20 three-race,
15 four-race, 6 five-race, and the one six-race combination; within each size in
lexicographic order of the race groups (White, Black, AIAN, Asian, NHPI, Some Other
Race). MDF code ``k`` (1..63) is level ``k - 1``.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from censusdp.data.households import HOUSEHOLD_ATTRIBUTES
from censusdp.errors import SchemaError

__all__ = [
    "CENRACE_LEVELS",
    "CENRACE_RACES",
    "HHGQ_LEVELS",
    "DHCP_HHGQ",
    "HOUSEHOLD2010",
    "HOUSEHOLD2010_CONSTRAINT_ZEROS",
    "OMB_RACES",
    "Attribute",
    "Recode",
    "Schema",
    "StructuralZero",
    "get_schema",
    "register_schema",
    "schema_names",
    "unit_schema_of",
]

OMB_RACES: tuple[str, ...] = (
    "White",
    "Black or African American",
    "American Indian and Alaska Native",
    "Asian",
    "Native Hawaiian and Other Pacific Islander",
    "Some Other Race",
)
"""The six OMB race groups, in Census order (index 0..5)."""

CENRACE_RACES: tuple[frozenset[int], ...] = tuple(
    frozenset(combo) for size in range(1, 7) for combo in itertools.combinations(range(6), size)
)
"""For each CENRACE level (0..62), the set of OMB race indices it combines."""


def _cenrace_name(races: frozenset[int]) -> str:
    names = [OMB_RACES[r] for r in sorted(races)]
    return f"{names[0]} alone" if len(names) == 1 else "; ".join(names)


CENRACE_LEVELS: tuple[str, ...] = tuple(_cenrace_name(r) for r in CENRACE_RACES)

HHGQ_LEVELS: tuple[str, ...] = (
    "Household",
    "Correctional facilities for adults",
    "Juvenile facilities",
    "Nursing facilities/Skilled-nursing facilities",
    "Other institutional facilities",
    "College/University student housing",
    "Military quarters",
    "Other noninstitutional facilities",
)
"""HHGQ levels; level ``g`` is code ``g`` in ``persons.hhgq`` and ``units.gqtype``."""

MAX_AGE = 115


@dataclass(frozen=True)
class Attribute:
    """One dimension of a schema.

    Args:
        name: lower-case attribute name used in query names (``"cenrace"``).
        levels: a label for each level; level ``i`` has index ``i``.
        column: the microdata column it is read from (``"age"`` for ``votingage``).
        lookup: ``lookup[v - lookup_min]`` is the level of column value ``v``; ``-1``
            marks an invalid value.
        lookup_min: the column value that ``lookup[0]`` describes.
        mdf_column: the MDF column this attribute is written to.
        mdf_codes: the MDF code written for each level.
    """

    name: str
    levels: tuple[str, ...]
    column: str
    lookup: tuple[int, ...]
    lookup_min: int
    mdf_column: str
    mdf_codes: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.levels:
            raise SchemaError(f"attribute {self.name!r} has no levels")
        if len(self.mdf_codes) != len(self.levels):
            raise SchemaError(
                f"attribute {self.name!r} has {len(self.levels)} levels but "
                f"{len(self.mdf_codes)} MDF codes"
            )
        bad = [v for v in self.lookup if not -1 <= v < len(self.levels)]
        if bad:
            raise SchemaError(f"attribute {self.name!r} lookup maps to invalid level {bad[0]}")

    @property
    def size(self) -> int:
        """Number of levels."""
        return len(self.levels)

    @property
    def valid_values(self) -> tuple[int, int]:
        """Inclusive range ``(lo, hi)`` of column values this attribute accepts."""
        return self.lookup_min, self.lookup_min + len(self.lookup) - 1

    def levels_of(self, values: np.ndarray) -> np.ndarray:
        """Map microdata column values to level indices; invalid values give ``-1``."""
        values = np.asarray(values, dtype=np.int64)
        table = np.asarray(self.lookup, dtype=np.int64)
        offset = values - self.lookup_min
        inside = (offset >= 0) & (offset < table.size)
        out = np.full(values.shape, -1, dtype=np.int64)
        out[inside] = table[offset[inside]]
        return out

    def mdf_values(self, levels: np.ndarray) -> np.ndarray:
        """Map level indices to the codes written in the MDF."""
        return np.asarray(self.mdf_codes, dtype=np.int64)[np.asarray(levels, dtype=np.int64)]


def _identity(name: str, levels: tuple[str, ...], first_code: int = 0) -> Attribute:
    n = len(levels)
    return Attribute(
        name=name,
        levels=levels,
        column=name,
        lookup=tuple(range(n)),
        lookup_min=first_code,
        mdf_column=name,
        mdf_codes=tuple(range(first_code, first_code + n)),
    )


HHGQ = _identity("hhgq", HHGQ_LEVELS)
SEX = Attribute(
    name="sex",
    levels=("Male", "Female"),
    column="sex",
    lookup=(0, 1),
    lookup_min=1,
    mdf_column="sex",
    mdf_codes=(1, 2),
)
AGE = _identity("age", tuple(str(a) for a in range(MAX_AGE + 1)))
HISPANIC = _identity("hispanic", ("Not Hispanic or Latino", "Hispanic or Latino"))
CENRACE = _identity("cenrace", CENRACE_LEVELS, first_code=1)
VOTINGAGE = Attribute(
    name="votingage",
    levels=("Under 18 years", "18 years and over"),
    column="age",
    lookup=tuple(0 if a < 18 else 1 for a in range(MAX_AGE + 1)),
    lookup_min=0,
    mdf_column="votingage",
    mdf_codes=(0, 1),
)

CITIZEN = Attribute(
    name="citizen",
    levels=("Non-citizen", "Citizen"),
    column="citizen",
    lookup=(0, 1),
    lookup_min=0,
    mdf_column="citizen",
    mdf_codes=(0, 1),
)
"""Citizenship, read from the input's ``citizen`` column (0 not a citizen, 1 citizen: the
DDP's ``citizen`` attribute); the MDF writes it as production's ``CITIZEN`` (1 citizen,
2 not)."""


@dataclass(frozen=True)
class Recode:
    """A derived attribute: ``mapping[level of source]`` is the recoded level."""

    name: str
    source: str
    levels: tuple[str, ...]
    mapping: tuple[int, ...]

    def __post_init__(self) -> None:
        bad = [m for m in self.mapping if not 0 <= m < len(self.levels)]
        if bad:
            raise SchemaError(f"recode {self.name!r} maps to invalid level {bad[0]}")

    @property
    def size(self) -> int:
        """Number of recoded levels."""
        return len(self.levels)


HHINSTLEVELS = Recode(
    name="hhinstlevels",
    source="hhgq",
    levels=("Household", "Institutional", "Noninstitutional"),
    mapping=(0, 1, 1, 1, 1, 2, 2, 2),
)
GQINST = Recode(
    name="gqlevels",
    source="hhgq",
    levels=("Household", "Group quarters"),
    mapping=(0, 1, 1, 1, 1, 1, 1, 1),
)
AGE_TO_VOTINGAGE = Recode(
    name="votingage",
    source="age",
    levels=VOTINGAGE.levels,
    mapping=VOTINGAGE.lookup,
)
CENRACE_TO_NUMRACES = Recode(
    name="numraces",
    source="cenrace",
    levels=tuple(f"{k} race{'s' if k > 1 else ''}" for k in range(1, 7)),
    mapping=tuple(len(r) - 1 for r in CENRACE_RACES),
)


def _age_groups(width: int) -> Recode:
    """The DDP's ``ageGroups<width>``: single years of age in bins of ``width`` years from
    0 (the last bin ends at 115), the hierarchical age workload of its person run."""
    starts = range(0, MAX_AGE + 1, width)
    levels = tuple(
        f"Under {width} years" if a == 0 else f"{a} to {min(a + width, MAX_AGE + 1) - 1} years"
        for a in starts
    )
    return Recode(
        name=f"agegroups{width}",
        source="age",
        levels=levels,
        mapping=tuple(a // width for a in range(MAX_AGE + 1)),
    )


AGE_GROUPS = tuple(_age_groups(w) for w in (4, 16, 64))
"""``agegroups4`` (29 bins), ``agegroups16`` (8), ``agegroups64`` (2): the DDP's
``ageGroups4``, ``ageGroups16`` and ``ageGroups64`` of ``Schema_DHCP_HHGQ``."""


@dataclass(frozen=True)
class StructuralZero:
    """A conjunction of level sets that no person can have (e.g. minors in nursing homes).

    Args:
        name: a short identifier recorded in manifests.
        levels: for each attribute or recode name, the levels that match.
    """

    name: str
    levels: tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True)
class Schema:
    """The product of attributes, with recodes and structural zeros."""

    name: str
    attributes: tuple[Attribute, ...]
    recodes: tuple[Recode, ...] = ()
    structural_zeros: tuple[StructuralZero, ...] = ()
    _index: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = [a.name for a in self.attributes] + [r.name for r in self.recodes]
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise SchemaError(f"schema {self.name!r} has duplicate names {sorted(dupes)}")
        for i, a in enumerate(self.attributes):
            self._index[a.name] = i
        for r in self.recodes:
            if r.source not in self._index:
                raise SchemaError(
                    f"recode {r.name!r} of schema {self.name!r} has unknown source {r.source!r}"
                )
            if len(r.mapping) != self.attributes[self._index[r.source]].size:
                raise SchemaError(
                    f"recode {r.name!r} maps {len(r.mapping)} levels but {r.source!r} has "
                    f"{self.attributes[self._index[r.source]].size}"
                )
        for z in self.structural_zeros:
            for var, _ in z.levels:
                self.variable(var)

    # -- shape -------------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        """Number of levels of each attribute."""
        return tuple(a.size for a in self.attributes)

    @property
    def size(self) -> int:
        """Number of cells."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def attribute_names(self) -> tuple[str, ...]:
        """Names of the attributes, in cell-index order."""
        return tuple(a.name for a in self.attributes)

    def attribute(self, name: str) -> Attribute:
        """The attribute called ``name``."""
        try:
            return self.attributes[self._index[name]]
        except KeyError:
            raise SchemaError(
                f"schema {self.name!r} has no attribute {name!r}; "
                f"it has {list(self.attribute_names)}"
            ) from None

    def variable(self, name: str) -> Attribute | Recode:
        """An attribute or a recode, by name."""
        if name in self._index:
            return self.attributes[self._index[name]]
        for r in self.recodes:
            if r.name == name:
                return r
        known = list(self.attribute_names) + [r.name for r in self.recodes]
        raise SchemaError(
            f"schema {self.name!r} has no attribute or recode {name!r}; known: {known}"
        )

    def variable_levels(self, name: str) -> tuple[str, ...]:
        """Level labels of an attribute or recode."""
        return self.variable(name).levels

    def cell_levels(self, name: str, cells: np.ndarray | None = None) -> np.ndarray:
        """Level of attribute or recode ``name`` for each cell (all cells by default)."""
        var = self.variable(name)
        i = self._index[var.source if isinstance(var, Recode) else name]
        if cells is None:  # every cell: the levels of attribute i, repeated in C order
            shape = self.shape
            inner = int(np.prod(shape[i + 1 :], dtype=np.int64))
            outer = int(np.prod(shape[:i], dtype=np.int64))
            lv = np.tile(np.repeat(np.arange(shape[i], dtype=np.int64), inner), outer)
        else:
            lv = np.asarray(np.unravel_index(cells, self.shape)[i], dtype=np.int64)
        if isinstance(var, Recode):
            return np.asarray(var.mapping, dtype=np.int64)[lv]
        return lv

    # -- microdata <-> cells -----------------------------------------------------------

    @property
    def input_columns(self) -> tuple[str, ...]:
        """Microdata columns needed to place a person in a cell."""
        return tuple(dict.fromkeys(a.column for a in self.attributes))

    def cells_of(self, columns: dict[str, np.ndarray]) -> np.ndarray:
        """Cell index of each microdata record.

        Raises:
            SchemaError: if a column is missing or holds a value outside its range
                (callers validate input first; this is the last line of defence).
        """
        levels = []
        for a in self.attributes:
            if a.column not in columns:
                raise SchemaError(f"schema {self.name!r} needs column {a.column!r}")
            lv = a.levels_of(columns[a.column])
            if lv.size and lv.min() < 0:
                bad = np.asarray(columns[a.column])[lv < 0][0]
                lo, hi = a.valid_values
                raise SchemaError(
                    f"column {a.column!r} value {bad} is outside {lo}..{hi} ({a.name})"
                )
            levels.append(lv)
        if not levels or levels[0].size == 0:
            return np.zeros(0, dtype=np.int64)
        return np.ravel_multi_index(tuple(levels), self.shape).astype(np.int64)

    def mdf_columns(self, cells: np.ndarray) -> dict[str, np.ndarray]:
        """The MDF columns (``hhgq``, ``votingage``, ...) for each cell index."""
        cells = np.asarray(cells, dtype=np.int64)
        levels = np.unravel_index(cells, self.shape)
        out: dict[str, np.ndarray] = {}
        for a, lv in zip(self.attributes, levels, strict=True):
            out[a.mdf_column] = a.mdf_values(lv)
        if "votingage" not in out and any(r.name == "votingage" for r in self.recodes):
            out["votingage"] = self.cell_levels("votingage", cells)
        if "hhgq" not in out and any(r.name == "hhgq" for r in self.recodes):
            out["hhgq"] = self.cell_levels("hhgq", cells)  # dhcp-2020: relgq's major type
        return out

    # -- structural zeros --------------------------------------------------------------

    @cached_property
    def structural_zero_mask(self) -> np.ndarray:
        """Boolean mask over cells: True where a cell is a structural zero.

        A zero's condition on an attribute or recode is a condition on one attribute's
        levels, so each zero is the outer product of one boolean vector per attribute
        (a million-cell schema takes milliseconds per zero)."""
        mask = np.zeros(self.shape, dtype=bool)
        for z in self.structural_zeros:
            ok = [np.ones(a.size, dtype=bool) for a in self.attributes]
            for var, lv in z.levels:
                v = self.variable(var)
                if isinstance(v, Recode):
                    src = np.asarray(v.mapping, dtype=np.int64)
                    ok[self._index[v.source]] &= np.isin(src, np.asarray(lv, dtype=np.int64))
                else:
                    levels = np.arange(v.size, dtype=np.int64)
                    ok[self._index[var]] &= np.isin(levels, np.asarray(lv, dtype=np.int64))
            axes = [
                v.reshape([-1 if j == i else 1 for j in range(len(ok))]) for i, v in enumerate(ok)
            ]
            mask |= functools.reduce(np.logical_and, axes)
        return mask.ravel()


NURSING_MINORS = StructuralZero(
    name="no_minors_in_nursing_facilities",
    levels=(("hhgq", (3,)), ("votingage", (0,))),
)

PL94 = Schema(
    name="pl94",
    attributes=(HHGQ, VOTINGAGE, HISPANIC, CENRACE),
    recodes=(HHINSTLEVELS, GQINST, CENRACE_TO_NUMRACES),
    structural_zeros=(NURSING_MINORS,),
)

DHC_LITE = Schema(
    name="dhc-lite",
    attributes=(HHGQ, SEX, AGE, HISPANIC, CENRACE),
    recodes=(HHINSTLEVELS, GQINST, AGE_TO_VOTINGAGE, CENRACE_TO_NUMRACES),
    structural_zeros=(NURSING_MINORS,),
)


def _ages(*ranges: tuple[int, int]) -> tuple[int, ...]:
    return tuple(a for lo, hi in ranges for a in range(lo, hi + 1))


DDP_GQ_AGE_ZEROS = (
    StructuralZero("hhgq1_lessthan15", (("hhgq", (1,)), ("age", _ages((0, 14))))),
    StructuralZero("hhgq2_greaterthan25", (("hhgq", (2,)), ("age", _ages((26, MAX_AGE))))),
    StructuralZero("hhgq3_lessthan20", (("hhgq", (3,)), ("age", _ages((0, 19))))),
    StructuralZero("hhgq5_lt16gt65", (("hhgq", (5,)), ("age", _ages((0, 15), (66, MAX_AGE))))),
    StructuralZero("hhgq6_lt17gt65", (("hhgq", (6,)), ("age", _ages((0, 16), (66, MAX_AGE))))),
)
"""The DDP person run's block constraints on age by group-quarters type
(``Constraints_DHCP_HHGQ.py``): no one under 15 in an adult correctional facility, over 25
in a juvenile facility, under 20 in a nursing facility, under 16 or over 65 in college
housing, under 17 or over 65 in military quarters (other facility types: no bound)."""

DHCP_HHGQ = Schema(
    name="dhcp-hhgq",
    attributes=(HHGQ, SEX, AGE, HISPANIC, CENRACE, CITIZEN),
    recodes=(HHINSTLEVELS, GQINST, AGE_TO_VOTINGAGE, CENRACE_TO_NUMRACES, *AGE_GROUPS),
    structural_zeros=DDP_GQ_AGE_ZEROS,
)
"""The 2010 DDP's person schema (``Schema_DHCP_HHGQ``): HHGQ (8) x SEX (2) x AGE (116) x
HISPANIC (2) x CENRACE (63) x CITIZEN (2) = 467,712 cells."""

OCCUPANCY = Attribute(
    name="occupancy",
    levels=("Vacant", "Occupied"),
    column="occupied",
    lookup=(0, 1),
    lookup_min=0,
    mdf_column="occupied",
    mdf_codes=(0, 1),
)

UNITS = Schema(name="units", attributes=(OCCUPANCY,))
"""Housing units by occupancy: the schema of the separate housing-unit run (table H1)."""


#: The household types of each DDP constraint (``Schema_Household2010``'s recodes).
_SIZE2_TYPES = (3, 7, 12, 17, 19, 20, 22, 23)  # the types two persons can make
_NEVER_MULTI = (12, 17, 18, 23)  # no child or relative of the householder
_SIZE3_TOO_SMALL = (2, 6, 10, 15, 18)  # ``non3type``: a couple with two children, alone
_SIZE3_NOT_MULTI = (0, 1, 3, 4, 5, 7, 8, 9, 11, 12, 13, 14, 16, 17, 21, 23)  # ``type3_notmulti``
_SIZE4_NOT_MULTI = (2, 6, 10, 12, 15, 17, 23)  # ``type4_notmulti``
_COUPLE_BY_SIZE = {  # ``type2_couple``, ``type3_couple_with_child``, ``type4_couple_with_...``
    2: (3, 7, 12, 17),
    3: (0, 1, 4, 5, 8, 9, 13, 14),
    4: (2, 6, 10, 15),
}
#: Each householder age group's oldest-member level when no one is older than the
#: householder (``hhelderly``: under 60, 60-64, 65-74, 75+).
_ELDERLY_OF_AGE = ((0, (0, 1, 2, 3, 4)), (1, (5,)), (2, (6,)), (3, (7, 8)))


def _elderly_set_by_age(name: str, where: tuple) -> tuple[StructuralZero, ...]:
    """Where no member is older than the householder (``where``: one person, or the
    householder with own children under 18 only), ``hhelderly`` is the householder's age
    group: the DDP's ``<name>_eld0`` .. ``_eld3``."""
    return tuple(
        StructuralZero(
            f"{name}_eld{level}",
            (*where, ("hhage", ages), ("hhelderly", tuple(e for e in range(4) if e != level))),
        )
        for level, ages in _ELDERLY_OF_AGE
    )


def _household_zeros() -> tuple[StructuralZero, ...]:
    """The cells the DDP's household constraints rule out
    (``Constraints_Household2010.py``, each constraint of
    ``DHCH_DemonstrationProduct.ini`` an equality to zero of the detailed histogram's
    cells it names). Every one but the ``*_le25_eld3`` zeros follows from
    :mod:`censusdp.data.households`' derivation; those three rule out a householder of
    15-24 in a couple of two, three or four persons with someone of 75 or more, which
    only the spouse or partner can be: implausible, not impossible, and ruled out by the
    DDP all the same (docs/households.md, "The DDP's household constraints")."""
    not_alone = tuple(t for t in range(24) if t != 18)
    size = {k: (("hhsize", (k,)),) for k in range(5)}
    multi = (("hhmulti", (1,)),)
    le25_eld3 = (("hhage", (0,)), ("hhelderly", (3,)))
    return (
        StructuralZero("no_vacant", size[0]),
        # living_alone
        StructuralZero("living_alone_gt1", (*size[1], ("hhtype", not_alone))),
        StructuralZero("living_alone_multi", (*size[1], *multi)),
        *_elderly_set_by_age("living_alone", size[1]),
        # size2
        StructuralZero(
            "size2_gt2", (*size[2], ("hhtype", tuple(set(range(24)) - set(_SIZE2_TYPES))))
        ),
        StructuralZero("size2_multi", (*size[2], *multi)),
        *_elderly_set_by_age("size2", (*size[2], ("hhtype", (19, 20)))),
        StructuralZero("size2_le25_eld3", (*size[2], ("hhtype", _COUPLE_BY_SIZE[2]), *le25_eld3)),
        # size3
        StructuralZero("size3_le25_eld3", (*size[3], ("hhtype", _COUPLE_BY_SIZE[3]), *le25_eld3)),
        StructuralZero("size3_gt3", (*size[3], ("hhtype", _SIZE3_TOO_SMALL))),
        StructuralZero("size3_multi", (*size[3], ("hhtype", _SIZE3_NOT_MULTI), *multi)),
        *_elderly_set_by_age("size3", (*size[3], ("hhtype", (21,)))),
        # size4 (its size4_gt4, four persons alone, is size2plus_notalone's)
        StructuralZero("size4_multi", (*size[4], ("hhtype", _SIZE4_NOT_MULTI), *multi)),
        StructuralZero("size4_le25_eld3", (*size[4], ("hhtype", _COUPLE_BY_SIZE[4]), *le25_eld3)),
        # size2plus_notalone, not_multigen, hh_elderly
        StructuralZero("size2plus_notalone", (("hhsize", tuple(range(2, 8))), ("hhtype", (18,)))),
        StructuralZero("not_multigen", (*multi, ("hhtype", _NEVER_MULTI))),
        StructuralZero("hh_elderly_eld3", (("hhage", (7, 8)), ("hhelderly", (0, 1, 2)))),
        StructuralZero("hh_elderly_2", (("hhage", (6,)), ("hhelderly", (0, 1)))),
        StructuralZero("hh_elderly_3", (("hhage", (5,)), ("hhelderly", (0,)))),
    )


HOUSEHOLD2010_CONSTRAINT_ZEROS = ("size2_le25_eld3", "size3_le25_eld3", "size4_le25_eld3")
"""The zeros of ``household2010`` its derivation does not imply: a householder of 15-24
in a couple with someone of 75 or more. The DDP ruled them out of the estimate; an input
(or a swapped file, which publishes its households) may have such households."""


HOUSEHOLD2010 = Schema(
    name="household2010",
    attributes=tuple(_identity(name, levels) for name, levels in HOUSEHOLD_ATTRIBUTES.items()),
    structural_zeros=_household_zeros(),
)
"""The 2010 DDP's household schema (``Schema_Household2010``): HHSEX (2) x HHAGE (9) x
HHHISP (2) x HHRACE (7) x HHSIZE (8) x HHTYPE (24) x HHELDERLY (4) x HHMULTI (2) =
387,072 cells, one household each (docs/households.md; the levels are
:data:`censusdp.data.households.HOUSEHOLD_ATTRIBUTES`). A household's attributes are
derived from its persons (:func:`censusdp.data.households.derive_households`)."""

_BUILTIN = {s.name: s for s in (PL94, DHC_LITE, DHCP_HHGQ, UNITS, HOUSEHOLD2010)}


_UNIT_SCHEMAS: dict[str, Schema] = {}


def register_schema(schema: Schema, *, unit_schema: Schema | None = None) -> None:
    """Make ``schema`` a built-in schema (the modules that define further schemas, such as
    :mod:`censusdp.data.schema_dhc`, register theirs when :mod:`censusdp.data` loads).

    Args:
        schema: the schema; its name must be new.
        unit_schema: the unit histogram measured in the same run as ``schema``, as
            production's DHC household run measures ``tenvacgq`` beside its household
            histogram (see :func:`unit_schema_of`).
    """
    if schema.name in _BUILTIN:
        raise SchemaError(f"schema {schema.name!r} is registered twice")
    _BUILTIN[schema.name] = schema
    if unit_schema is not None:
        _UNIT_SCHEMAS[schema.name] = unit_schema


def unit_schema_of(name: str) -> Schema | None:
    """The unit histogram measured beside schema ``name`` in one run, if it has one."""
    return _UNIT_SCHEMAS.get(name)


def schema_names() -> tuple[str, ...]:
    """Names of the built-in schemas."""
    return tuple(_BUILTIN)


def get_schema(name: str) -> Schema:
    """A built-in schema by name (``"pl94"`` or ``"dhc-lite"``)."""
    try:
        return _BUILTIN[name]
    except KeyError:
        raise SchemaError(
            f"unknown schema {name!r}; built-in schemas are {list(_BUILTIN)}"
        ) from None

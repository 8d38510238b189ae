"""Census identifiers of geounits: GEOID, SUMLEV and NAME, so published tables join.

A censusdp geocode is a prefix of the 16-character block geocode: state (2) + county
(3) + tract (6) + block group (1) + block (4). The Census Bureau's identifiers differ
in one place only:

* **GEOID** (as TIGER/Line files and the Census API write it: ``GEOID20`` on 2020
  geography, ``GEOID10`` on 2010's, such as the tracts of ``censusdp generate``; the
  vintage is the input's) of a state,
  county, tract or block group is the geocode itself (2, 5, 11, 12 characters). A
  block's GEOID is 15 characters, state + county + tract + the 4-digit block number,
  because the block group is the first digit of the block number and is not repeated:
  our geocode without its block-group digit (character 12). A geocode whose block
  number does not start with its block-group digit has no GEOID (null): no Census
  block is numbered so, and dropping the digit could make two blocks share a GEOID.
  The nation's GEOID is ``"US"`` (as in the TIGER/Line nation file).
* **SUMLEV**, the summary level: ``010`` nation, ``040`` state, ``050`` county,
  ``140`` census tract, ``150`` block group, ``750`` block (2020 Census P.L. 94-171
  Redistricting Data Summary File, technical documentation, "Summary Level
  Sequence Chart"). Geolevels of other code lengths have no SUMLEV (null).
* **NAME**, as data.census.gov writes it: ``"Vermont"``, ``"Addison County,
  Vermont"``, ``"Census Tract 9601, Addison County, Vermont"``, ``"Block Group 1,
  Census Tract 9601, ..."``, ``"Block 1001, Block Group 1, Census Tract 9601, ..."``.
  A tract's name is its code as a number with two implied decimals, the decimals
  dropped when zero (``960100`` -> ``9601``, ``000302`` -> ``3.02``).

**Places, county subdivisions and AIAN areas** (:func:`entity_geographies`) are not
nested in the hierarchy: each is a set of blocks named by the block attributes of the
input (``aian_area``: 4-digit AIANNHCE; ``place``: 5-digit code, a minor civil division
in the strong-MCD states of :data:`STRONG_MCD_STATES` outside AIAN areas, a place
elsewhere, as production's ``place`` entity). Their summary levels are the Census's:
``060`` county subdivision (GEOID state + county + code, 10 characters), ``160`` place
(state + code, 7), ``250`` AIAN area, whole (the AIANNHCE, 4) and ``280`` AIAN area,
state part (state + AIANNHCE, 6). Having no names list for them, NAME is the kind and
code (``"County Subdivision 00375, Addison County, Vermont"``, ``"Place 10675,
Vermont"``, ``"AIAN Area 5560"``, ``"AIAN Area 5560 (part), Vermont"``).

State and county names come from ``geonames.csv`` beside this module, derived by
``tools/derive_geonames.py`` from public-domain county lists (provenance in
``tools/PROVENANCE.md``). A code missing from it is named by its FIPS code
(``"County 999, Vermont"``).
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

import numpy as np

from censusdp.errors import InternalError, SchemaError

__all__ = [
    "ENTITY_LEVELS",
    "IDENTIFIER_COLUMNS",
    "STRONG_MCD_STATES",
    "EntityGeography",
    "IDENTIFIER_LABELS",
    "SUMLEVELS",
    "SUMLEVEL_NAMES",
    "county_name",
    "entity_geographies",
    "geo_identifiers",
    "geoids",
    "place_names",
    "state_name",
    "summary_level",
    "sumlevel",
    "tract_name",
]

SUMLEVELS: dict[int, str] = {0: "010", 2: "040", 5: "050", 11: "140", 12: "150", 16: "750"}
"""Census summary level by geocode length."""

SUMLEVEL_NAMES: dict[str, str] = {
    "010": "nation",
    "040": "state",
    "050": "county",
    "060": "county subdivision",
    "140": "tract",
    "150": "block group",
    "160": "place",
    "250": "aian area",
    "280": "aian area state part",
    "750": "block",
}
"""The plain name of each summary level (what :func:`summary_level` accepts besides the
code)."""

ENTITY_LEVELS: dict[str, str] = {
    "CountySubdivision": "060",
    "Place": "160",
    "AIANArea": "250",
    "AIANAreaState": "280",
}
"""The published geographies off the hierarchy (:func:`entity_geographies`) and their
summary levels (P.L. 94-171 technical documentation, "Summary Level Sequence Chart")."""

STRONG_MCD_STATES: tuple[str, ...] = (
    "09", "23", "25", "26", "27", "33", "34", "36", "42", "44", "50", "55",
)  # fmt: skip
"""States (FIPS) whose minor civil divisions are the place-level entity outside AIAN
areas (production's ``strong_mcd_states``): there the input's ``place`` is an MCD."""

_SUMLEVEL_ALIASES: dict[str, str] = {
    **{name: code for code, name in SUMLEVEL_NAMES.items()},
    "us": "010",
    "census tract": "140",
    "blockgroup": "150",
    "block_group": "150",
    "countysubdivision": "060",
    "aianarea": "250",
    "aianareastate": "280",
}

IDENTIFIER_COLUMNS: tuple[str, ...] = ("GEOID", "SUMLEV", "NAME")
"""The identifier columns every published table carries after ``geolevel``, ``geocode``."""

IDENTIFIER_LABELS: dict[str, str] = {
    "geolevel": "censusdp geolevel name (US, State, County, Tract, BlockGroup, Block)",
    "geocode": "censusdp geocode: prefix of state(2)+county(3)+tract(6)+block group(1)+block(4)",
    "GEOID": "Census GEOID, in the vintage of the input's geography (2010 tracts for "
    "censusdp generate) (state 2, county 5, tract 11, block group 12, block 15 characters; "
    "nation 'US')",
    "SUMLEV": "Census summary level (010 nation, 040 state, 050 county, 140 tract, "
    "150 block group, 750 block)",
    "NAME": "Geographic area name as on data.census.gov",
}
"""Codebook labels of the identifier columns."""

_STANDARD = (2, 5, 11, 12, 16)


@cache
def _names() -> dict[str, str]:
    text = resources.files("censusdp.tables").joinpath("geonames.csv").read_text("utf-8")
    return {r["fips"]: r["name"] for r in csv.DictReader(text.splitlines())}


def state_name(fips: str) -> str:
    """Name of a state by its 2-digit FIPS code (``"50"`` -> ``"Vermont"``)."""
    return _names().get(fips, f"State {fips}")


def county_name(fips: str) -> str:
    """Name of a county by its 5-digit FIPS code (``"50001"`` -> ``"Addison County"``)."""
    return _names().get(fips, f"County {fips[2:]}")


def tract_name(code: str) -> str:
    """The name of a 6-digit tract code: ``"960100"`` -> ``"9601"``, ``"000302"`` -> ``"3.02"``.

    Census tract codes carry two implied decimals; names drop leading zeros and a zero
    suffix (2020 Census geographic terms and concepts, "Census Tract").
    """
    base, suffix = int(code[:4]), code[4:6]
    return str(base) if suffix == "00" else f"{base}.{suffix}"


def sumlevel(length: int) -> str | None:
    """The Census summary level of geocodes of ``length`` characters (``None`` if none)."""
    return SUMLEVELS.get(int(length))


def summary_level(level: str | int) -> str:
    """The 3-digit summary level code of ``level``: a code with or without its leading
    zeros (``"050"``, ``"50"``, ``50``) or a level's name, in any case (``"county"``,
    ``"County"``, ``"block group"``, ``"BlockGroup"``, ``"tract"``, ``"US"``).

    Raises:
        SchemaError: naming the value and listing the valid levels, for anything else.
    """
    text = str(level).strip()
    if text.isdigit() and text.zfill(3) in SUMLEVEL_NAMES:
        return text.zfill(3)
    code = _SUMLEVEL_ALIASES.get(text.lower())
    if code is None:
        valid = ", ".join(f"{c} ({n})" for c, n in SUMLEVEL_NAMES.items())
        raise SchemaError(f"unknown summary level {level!r}; the levels are {valid}")
    return code


@cache
def _prefix_name(prefix: str) -> str:
    """NAME of a standard-length prefix (2, 5, 11 or 12 characters)."""
    n = len(prefix)
    if n == 2:
        return state_name(prefix)
    if n == 5:
        return f"{county_name(prefix)}, {state_name(prefix[:2])}"
    if n == 11:
        return f"Census Tract {tract_name(prefix[5:])}, {_prefix_name(prefix[:5])}"
    if n == 12:
        return f"Block Group {prefix[11]}, {_prefix_name(prefix[:11])}"
    raise InternalError(f"no standard name for a {n}-character geocode")


def _map_unique(codes: np.ndarray, fn) -> np.ndarray:
    uniq, inverse = np.unique(codes, return_inverse=True)
    return np.asarray([fn(str(u)) for u in uniq], dtype=object)[inverse.reshape(-1)]


def place_names(
    geocodes: Sequence[str] | np.ndarray, length: int, geolevel: str = ""
) -> np.ndarray:
    """NAME of each geocode of one geolevel (object array of ``str``).

    Args:
        geocodes: geocodes of one level, all ``length`` characters.
        length: the level's code length.
        geolevel: the level's name, used for levels of non-standard length
            (``"<geolevel> <code suffix>, <name of the enclosing standard unit>"``).
    """
    codes = np.asarray(geocodes).astype(f"U{max(int(length), 1)}")
    if length == 0:
        return np.full(codes.size, "United States", dtype=object)
    if length in (2, 5, 11, 12):
        return _map_unique(codes, _prefix_name)
    if length == 16:
        bg = _map_unique(codes.astype("U12"), _prefix_name)
        return np.asarray(
            [f"Block {c[12:]}, {g}" for c, g in zip(codes.tolist(), bg.tolist(), strict=True)],
            dtype=object,
        )
    parent = max((k for k in _STANDARD if k < length), default=0)
    label = geolevel or f"Geounit of length {length}"

    def name(code: str) -> str:
        head = f"{label} {code[parent:]}"
        return f"{head}, {_prefix_name(code[:parent])}" if parent else head

    return _map_unique(codes, name)


def geoids(geocodes: Sequence[str] | np.ndarray, length: int) -> np.ndarray:
    """GEOID of each geocode of one geolevel (object array; ``None`` where undefined).

    A block (16 characters) drops its block-group digit: ``state + county + tract +
    block`` (15 characters), defined only when the block number starts with the
    block-group digit; the nation is ``"US"``; every other level keeps its geocode.
    """
    codes = np.asarray(geocodes).astype(f"U{max(int(length), 1)}")
    if length == 0:
        return np.full(codes.size, "US", dtype=object)
    if length != 16:
        return codes.astype(object)
    raw = np.frombuffer(codes.tobytes(), dtype=np.uint32).reshape(codes.size, 16)
    ok = raw[:, 11] == raw[:, 12]
    out = np.full(codes.size, None, dtype=object)
    keep = np.delete(raw[ok], 11, axis=1)
    if keep.size:
        out[ok] = np.ascontiguousarray(keep).view("U15").reshape(-1).astype(object)
    return out


def geo_identifiers(
    geocodes: Sequence[str] | np.ndarray, length: int, geolevel: str = ""
) -> dict[str, np.ndarray]:
    """``GEOID``, ``SUMLEV`` and ``NAME`` of the geocodes of one geolevel.

    Returns:
        Object arrays keyed by :data:`IDENTIFIER_COLUMNS` (``None`` where undefined).
    """
    codes = np.asarray(geocodes)
    return {
        "GEOID": geoids(codes, length),
        "SUMLEV": np.full(codes.size, sumlevel(length), dtype=object),
        "NAME": place_names(codes, length, geolevel),
    }


@dataclass(frozen=True, eq=False)
class EntityGeography:
    """One published geography off the hierarchy: sets of blocks.

    Attributes:
        geolevel: a key of :data:`ENTITY_LEVELS`.
        unit: per block (the order given), the index of its geounit; ``-1``: none.
        ids: ``GEOID``, ``SUMLEV``, ``NAME`` of each geounit (object arrays; GEOID order).
    """

    geolevel: str
    unit: np.ndarray
    ids: dict[str, np.ndarray]


def _entity(geolevel: str, key: np.ndarray, name: Callable[[str], str]) -> EntityGeography:
    """Geounits of ``geolevel`` keyed by GEOID (``""``: the block is in none)."""
    uniq, inverse = np.unique(key, return_inverse=True)
    inverse = inverse.reshape(-1)
    keep = uniq != ""
    index = np.cumsum(keep) - 1
    unit = np.where(keep[inverse], index[inverse], -1).astype(np.int64)
    geoid = uniq[keep].astype(object)
    return EntityGeography(
        geolevel,
        unit,
        {
            "GEOID": geoid,
            "SUMLEV": np.full(geoid.size, ENTITY_LEVELS[geolevel], dtype=object),
            "NAME": np.asarray([name(str(g)) for g in geoid.tolist()], dtype=object),
        },
    )


def entity_geographies(
    blocks: np.ndarray, aian_area: np.ndarray | None = None, place: np.ndarray | None = None
) -> list[EntityGeography]:
    """County subdivisions, places and AIAN areas (whole and state parts) of some blocks.

    Args:
        blocks: 16-digit block geocodes.
        aian_area: each block's 4-digit AIANNHCE, ``""`` outside every area; ``None``:
            none at all.
        place: each block's 5-digit place-or-MCD code, ``""`` for none; ``None``: none.

    Returns:
        The geographies that have at least one geounit, in :data:`ENTITY_LEVELS` order.
    """
    codes = np.asarray(blocks).astype("U16")
    n = codes.size
    aian = np.full(n, "", "U4") if aian_area is None else np.asarray(aian_area).astype("U4")
    state, county = codes.astype("U2"), codes.astype("U5")
    out = []
    if place is not None:
        code = np.asarray(place).astype("U5")
        mcd = np.isin(state, STRONG_MCD_STATES) & (aian == "")
        has = code != ""
        cousub = np.where(has & mcd, np.char.add(county, code), "")
        plc = np.where(has & ~mcd, np.char.add(state, code), "")
        out.append(
            _entity(
                "CountySubdivision",
                cousub,
                lambda g: f"County Subdivision {g[5:]}, {_prefix_name(g[:5])}",
            )
        )
        out.append(_entity("Place", plc, lambda g: f"Place {g[2:]}, {state_name(g[:2])}"))
    if aian_area is not None:
        out.append(_entity("AIANArea", aian, lambda g: f"AIAN Area {g}"))
        part = np.where(aian != "", np.char.add(state, aian), "")
        out.append(
            _entity(
                "AIANAreaState", part, lambda g: f"AIAN Area {g[2:]} (part), {state_name(g[:2])}"
            )
        )
    return [g for g in out if g.ids["GEOID"].size]

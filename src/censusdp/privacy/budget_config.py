"""Budget configurations: a parsed TOML document, or TOML text, made into a :class:`Budget`.

The presets and a user's config files share one format (``privacy/presets/*.toml`` are
examples) and one validation. Every mistake is one :class:`BudgetConfigError` line naming
the origin (the file or the preset), the key and the value. Opening a file is not done
here: :mod:`censusdp.io.budget_files` reads the text and hands it to
:func:`budget_from_toml`.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from fractions import Fraction
from pathlib import PurePath
from typing import Any

from censusdp.errors import BudgetError, CensusDPError
from censusdp.privacy.budget import (
    DEFAULT_GEOLEVELS,
    MECHANISMS,
    NEIGHBOURS,
    Budget,
    BudgetConfigError,
    legacy_neighbours,
)
from censusdp.privacy.parameters import as_fraction

__all__ = ["budget_from_mapping", "budget_from_toml"]

_TOP_KEYS = {
    "name",
    "description",
    "schema",
    "mechanism",
    "rho",
    "epsilon",
    "delta",
    "sensitivity",
    "neighbours",
    "notes",
    "geolevels",
    "spine",
}
_LEVEL_KEYS = {"name", "length", "share", "queries"}


def _fail(origin: str, key: str, value: object, rule: str) -> BudgetConfigError:
    return BudgetConfigError(f"{origin}: key {key!r} = {value!r}: {rule}")


def _config_neighbours(data: Mapping[str, Any], origin: str) -> str:
    if "neighbours" in data and "sensitivity" in data:
        raise _fail(
            origin, "sensitivity", data["sensitivity"], "give neighbours or sensitivity, not both"
        )
    if "sensitivity" in data:
        value = data["sensitivity"]
        if isinstance(value, bool) or value not in (1, 2):
            raise _fail(origin, "sensitivity", value, "must be 1 (unbounded) or 2 (bounded)")
        return legacy_neighbours(value)
    value = data.get("neighbours", "bounded")
    if value not in NEIGHBOURS:
        raise _fail(origin, "neighbours", value, f"must be one of {list(NEIGHBOURS)}")
    return str(value)


def _frac(origin: str, key: str, value: object, positive: bool = True) -> Fraction:
    try:
        x = as_fraction(value, key)
    except BudgetError as exc:
        raise _fail(origin, key, value, str(exc)) from None
    if positive and x <= 0:
        raise _fail(origin, key, value, "must be positive")
    return x


def _parse_level(
    origin: str, i: int, level: object
) -> tuple[str, int, Fraction, dict[str, Fraction]]:
    """One ``[[geolevels]]`` table: name, geocode length, share and query shares."""
    where = f"geolevels[{i}]"
    if not isinstance(level, Mapping):
        raise _fail(origin, where, level, "must be a table")
    bad = sorted(set(level) - _LEVEL_KEYS)
    if bad:
        raise _fail(
            origin,
            f"{where}.{bad[0]}",
            level[bad[0]],
            f"unknown key; allowed: {sorted(_LEVEL_KEYS)}",
        )
    for key in ("name", "share", "queries"):
        if key not in level:
            raise BudgetConfigError(f"{origin}: {where} is missing key {key!r}")
    lname = level["name"]
    if not isinstance(lname, str) or not lname:
        raise _fail(origin, f"{where}.name", lname, "must be a non-empty string")
    length = level.get("length", dict(DEFAULT_GEOLEVELS).get(lname))
    if isinstance(length, bool) or not isinstance(length, int):
        raise _fail(origin, f"{where}.length", length, "must be an integer geocode length 0..16")
    share = _frac(origin, f"{where}.share", level["share"], positive=False)
    queries = level["queries"]
    if not isinstance(queries, Mapping):
        raise _fail(origin, f"{where}.queries", queries, "must be a table query = share")
    qshares = {
        str(q): _frac(origin, f"{where}.queries.{q}", v, positive=False) for q, v in queries.items()
    }
    return lname, length, share, qshares


def _global_amount(data: Mapping[str, Any], origin: str) -> tuple[str, Fraction]:
    """The mechanism and its global budget (``rho`` for zCDP, ``epsilon`` for pure DP)."""
    mechanism = data["mechanism"]
    if mechanism not in MECHANISMS:
        raise _fail(origin, "mechanism", mechanism, f"must be one of {sorted(MECHANISMS)}")
    unit = "rho" if MECHANISMS[mechanism] == "zCDP" else "epsilon"
    other = "epsilon" if unit == "rho" else "rho"
    if unit not in data:
        raise BudgetConfigError(f"{origin}: mechanism {mechanism!r} needs a global {unit!r} key")
    if other in data:
        raise _fail(
            origin, other, data[other], f"mechanism {mechanism!r} takes its budget as {unit!r}"
        )
    return mechanism, _frac(origin, unit, data[unit])


def budget_from_mapping(data: Mapping[str, Any], origin: str = "<config>") -> Budget:
    """Build a :class:`Budget` from parsed TOML (the preset/config format).

    Args:
        data: the parsed document.
        origin: file name or preset name used in error messages.

    Raises:
        BudgetConfigError: naming ``origin``, the key and the value.
    """
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise _fail(
            origin, unknown[0], data[unknown[0]], f"unknown key; allowed: {sorted(_TOP_KEYS)}"
        )
    for key in ("schema", "mechanism", "geolevels"):
        if key not in data:
            raise BudgetConfigError(f"{origin}: missing required key {key!r}")
    mechanism, total = _global_amount(data, origin)
    delta = _frac(origin, "delta", data.get("delta", "1e-10"))
    neighbours = _config_neighbours(data, origin)
    levels_raw = data["geolevels"]
    if not isinstance(levels_raw, list) or not levels_raw:
        raise _fail(origin, "geolevels", levels_raw, "must be a non-empty array of tables")
    geolevels: list[tuple[str, int]] = []
    gshares: dict[str, Fraction] = {}
    qshares: dict[str, dict[str, Fraction]] = {}
    for i, level in enumerate(levels_raw):
        lname, length, share, queries = _parse_level(origin, i, level)
        if lname in gshares:
            raise _fail(origin, f"geolevels[{i}].name", lname, "geolevel listed twice")
        geolevels.append((lname, length))
        gshares[lname] = share
        qshares[lname] = queries
    notes = data.get("notes", ())
    if isinstance(notes, str):
        notes = (notes,)
    try:
        return Budget(
            schema=str(data["schema"]),
            mechanism=mechanism,
            total=total,
            delta=delta,
            geolevels=tuple(geolevels),
            geolevel_shares=gshares,
            query_shares=qshares,
            neighbours=neighbours,
            name=str(data.get("name", PurePath(origin).stem)),
            description=str(data.get("description", "")),
            notes=tuple(notes),
            spine=None if data.get("spine") is None else str(data["spine"]),
        )
    except CensusDPError as exc:
        raise BudgetConfigError(f"{origin}: {exc}") from None


def budget_from_toml(text: str, origin: str) -> Budget:
    """Build a :class:`Budget` from the text of a TOML budget (a preset or a config file).

    Args:
        text: the TOML document.
        origin: file name or ``preset <name>``, used in error messages.

    Raises:
        BudgetConfigError: for invalid TOML or an invalid budget, naming ``origin``.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BudgetConfigError(f"{origin}: invalid TOML: {exc}") from None
    return budget_from_mapping(data, origin=origin)

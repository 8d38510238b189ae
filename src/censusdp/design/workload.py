"""A target workload of the user's own for ``censusdp design allocation --workload FILE``.

The built-in budgets fix the schema (PL94's HHGQ x VOTINGAGE x HISPANIC x CENRACE, ...).
A workload file describes any other histogram and what should be accurate on it:

* ``attributes``: the histogram's attributes and their sizes (``[[attributes]]`` with
  ``name`` and ``size``; the histogram has ``prod(size)`` cells);
* ``queries``: the target tables, each a set of attributes (a marginal: ``[]`` is the
  total, every attribute the detailed cells) with a ``weight`` (default 1) and an
  optional ``geolevel`` (default: every geolevel);
* optional ``geolevels`` (default one, ``"Unit"``), ``measure`` (the candidate measured
  queries at every geolevel, attribute sets; default: the targets' own sets at their
  geolevel), ``rho`` (default 1), ``neighbours`` (default ``"bounded"``) and ``name``.

The allocation starts from equal shares (:meth:`~censusdp.design.allocation.SharePlan.uniform`)
and optimises as for a budget (:func:`~censusdp.design.allocation.optimize_allocation`).
This module checks a parsed mapping (TOML or JSON); :func:`censusdp.design.report.load_workload`
reads the file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from censusdp.data.schema import Attribute, Schema
from censusdp.design._errors import DesignError
from censusdp.design.allocation import NEIGHBOURS, SharePlan, TargetTable
from censusdp.privacy.parameters import positive_fraction

__all__ = ["MAX_ATTRIBUTES", "MAX_CELLS", "CustomWorkload", "workload_from_mapping"]

MAX_ATTRIBUTES = 12
"""Most attributes of a workload (the error model has up to ``2^d`` blocks)."""

MAX_CELLS = 10**7
"""Most cells of a workload's histogram."""

_NAME = re.compile(r"[a-z][a-z0-9_]*")
_RESERVED = {"total", "detailed"}
_KEYS = {"name", "attributes", "queries", "geolevels", "measure", "rho", "neighbours"}


@dataclass(frozen=True)
class CustomWorkload:
    """A checked workload file.

    Attributes:
        plan: equal shares over the candidate queries (the allocation's start).
        targets: the target tables.
        attributes: ``(name, size)`` of every attribute.
    """

    plan: SharePlan
    targets: tuple[TargetTable, ...]
    attributes: tuple[tuple[str, int], ...]


def _fail(origin: str, field: str, value: object, rule: str) -> DesignError:
    return DesignError(f"{origin}: {field} is {value!r}; {rule}")


def _attributes(data: Mapping[str, Any], origin: str) -> Schema:
    attrs = data.get("attributes")
    if not isinstance(attrs, list) or not attrs:
        raise _fail(origin, "attributes", attrs, "give a non-empty list of {name, size}")
    if len(attrs) > MAX_ATTRIBUTES:
        raise _fail(origin, "attributes", f"{len(attrs)} entries", f"at most {MAX_ATTRIBUTES}")
    out, cells = [], 1
    for i, a in enumerate(attrs):
        where = f"attributes[{i}]"
        if not isinstance(a, Mapping) or set(a) != {"name", "size"}:
            raise _fail(origin, where, a, "it needs exactly the keys 'name' and 'size'")
        name, size = a["name"], a["size"]
        if not isinstance(name, str) or not _NAME.fullmatch(name) or name in _RESERVED:
            raise _fail(
                origin,
                f"{where}.name",
                name,
                "use lower-case letters, digits and '_' (not 'total' or 'detailed')",
            )
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise _fail(origin, f"{where}.size", size, "it must be a positive integer")
        cells *= size
        if cells > MAX_CELLS:
            raise _fail(origin, f"{where}.size", size, f"the histogram exceeds {MAX_CELLS:,} cells")
        levels = tuple(str(k) for k in range(size))
        codes = tuple(range(size))
        out.append(Attribute(name, levels, name, codes, 0, name.upper(), codes))
    names = [a.name for a in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise _fail(origin, "attributes", dupes[0], "each attribute name must appear once")
    return Schema(str(data.get("name", "custom")), tuple(out))


def _query(schema: Schema, value: object, origin: str, where: str) -> str:
    """The query name of an attribute set (``total`` for ``[]``), in schema order."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(origin, where, value, "give a list of attribute names ([] is the total)")
    unknown = [v for v in value if v not in schema.attribute_names]
    if unknown:
        raise _fail(origin, where, unknown[0], f"attributes are {list(schema.attribute_names)}")
    if len(set(value)) != len(value):
        raise _fail(origin, where, value, "an attribute appears twice")
    kept = [a for a in schema.attribute_names if a in value]
    return "*".join(kept) if kept else "total"


def _geolevels(data: Mapping[str, Any], origin: str) -> tuple[str, ...]:
    levels = data.get("geolevels", ["Unit"])
    if (
        not isinstance(levels, list)
        or not levels
        or not all(isinstance(lv, str) and lv.strip() for lv in levels)
        or len(set(levels)) != len(levels)
    ):
        raise _fail(origin, "geolevels", levels, "give a non-empty list of distinct names")
    return tuple(levels)


def _targets(
    data: Mapping[str, Any], schema: Schema, levels: tuple[str, ...], origin: str
) -> list[TargetTable]:
    queries = data.get("queries")
    if not isinstance(queries, list) or not queries:
        raise _fail(origin, "queries", queries, "give a non-empty list of {attributes, weight}")
    out = []
    for i, q in enumerate(queries):
        where = f"queries[{i}]"
        if not isinstance(q, Mapping) or "attributes" not in q:
            raise _fail(origin, where, q, "it needs the key 'attributes'")
        extra = sorted(set(q) - {"attributes", "weight", "geolevel"})
        if extra:
            raise _fail(origin, f"{where}.{extra[0]}", q[extra[0]], "unknown key")
        name = _query(schema, q["attributes"], origin, f"{where}.attributes")
        at = q.get("geolevel")
        if at is not None and at not in levels:
            raise _fail(origin, f"{where}.geolevel", at, f"geolevels are {list(levels)}")
        for level in levels if at is None else (at,):
            try:
                out.append(TargetTable(level, name, q.get("weight", 1.0)))
            except DesignError as exc:
                raise DesignError(f"{origin}: {where}: {exc}") from None
    return out


def workload_from_mapping(
    data: Mapping[str, Any],
    origin: str = "workload",
    *,
    rho: object = None,
    neighbours: str | None = None,
) -> CustomWorkload:
    """Check a parsed workload file and build its schema, targets and starting plan.

    Args:
        data: the parsed TOML or JSON document.
        origin: the file's name, for messages.
        rho: overrides the file's ``rho``.
        neighbours: overrides the file's ``neighbours``.

    Raises:
        DesignError: one line naming ``origin``, the field and the value.
    """
    if not isinstance(data, Mapping):
        raise DesignError(f"{origin}: expected a table of keys {sorted(_KEYS)}")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise _fail(origin, "key", unknown[0], f"known keys are {sorted(_KEYS)}")
    name = data.get("name", "custom")
    if not isinstance(name, str) or not name.strip():
        raise _fail(origin, "name", name, "it must be a non-empty string")
    schema = _attributes(data, origin)
    levels = _geolevels(data, origin)
    targets = _targets(data, schema, levels, origin)
    if "measure" in data:
        measure = data["measure"]
        if not isinstance(measure, list) or not measure:
            raise _fail(origin, "measure", measure, "give a non-empty list of attribute lists")
        names = tuple(
            dict.fromkeys(_query(schema, m, origin, f"measure[{i}]") for i, m in enumerate(measure))
        )
        candidates = {lv: names for lv in levels}
    else:
        candidates = {
            lv: tuple(dict.fromkeys(t.query for t in targets if t.geolevel == lv)) for lv in levels
        }
    empty = [lv for lv, qs in candidates.items() if not qs]
    if empty:
        raise _fail(origin, "geolevel", empty[0], "it has no target query (give one or 'measure')")
    try:
        rho_value = positive_fraction(data.get("rho", 1) if rho is None else rho, "rho")
    except ValueError as exc:
        raise DesignError(f"{origin}: {exc}") from None
    nb = neighbours if neighbours is not None else data.get("neighbours", "bounded")
    if nb not in NEIGHBOURS:
        raise _fail(origin, "neighbours", nb, f"it must be one of {list(NEIGHBOURS)}")
    plan = SharePlan.uniform(name, schema, rho_value, candidates, neighbours=nb)
    sizes = tuple((a.name, a.size) for a in schema.attributes)
    return CustomWorkload(plan=plan, targets=tuple(targets), attributes=sizes)

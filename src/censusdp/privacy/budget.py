"""Privacy-loss budgets: a global budget split by geolevel, then by query.

A :class:`Budget` is an exact allocation: the global ``rho`` (zCDP, discrete
Gaussian) or ``epsilon`` (pure DP, geometric) times the geolevel share times the
query share gives each (geolevel, query) measurement its own ``rho`` or
``epsilon``, hence its mechanism and noise variance (:meth:`Budget.measurements`).
Because one person is counted once per query per geolevel, the measurements
compose to exactly the global budget (zCDP and pure DP compose additively; Bun &
Steinke 2016 Lemma 2.3). Shares are validated once, in ``__post_init__``: every
share positive, each set summing to exactly 1, every query valid for the schema.

Budgets are written as TOML (see ``presets/*.toml``, shipped with the package); a
user config uses the same format and the same validation (:func:`load_config`).
"""

from __future__ import annotations

import functools
import importlib.resources
import math
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, NamedTuple

from censusdp.data.queries import make_query
from censusdp.data.schema import get_schema
from censusdp.errors import BudgetError, CensusDPError, ConfigError
from censusdp.privacy import accounting
from censusdp.privacy.mechanisms import DiscreteGaussian, Geometric
from censusdp.privacy.parameters import as_fraction, positive_fraction

__all__ = [
    "DEFAULT_GEOLEVELS",
    "MECHANISMS",
    "Budget",
    "BudgetConfigError",
    "BudgetReport",
    "PlannedMeasurement",
    "budget_from_mapping",
    "budget_report",
    "load_config",
    "load_preset",
    "resolve_budget",
    "preset_names",
    "release_privacy",
    "ReleaseBudget",
    "SPINES",
    "resolve_release_budget",
    "scaled_mechanism",
    "units_preset_for",
]

MECHANISMS: dict[str, str] = {"discrete_gaussian": "zCDP", "geometric": "pure"}
"""Supported release mechanisms and the privacy measure their budget is written in."""

DEFAULT_GEOLEVELS: tuple[tuple[str, int], ...] = (
    ("US", 0),
    ("State", 2),
    ("County", 5),
    ("Tract", 11),
    ("BlockGroup", 12),
    ("Block", 16),
)
"""The geolevels of the 2020 hierarchy, top first, with their geocode prefix lengths."""


NEIGHBOURS = {"bounded": 2, "unbounded": 1}
"""Neighbouring relations and the cells of a histogram query one person changes."""

SPINES = ("tabulation", "optimized")
"""The geographies a budget may name (``spine = ...``): the tabulation hierarchy, or
the 2020 production spine (:mod:`censusdp.data.spine`, wired in by
:mod:`censusdp.release.spine`)."""

MAX_NOISE_SD = 10**8
"""Largest noise standard deviation of any measurement (persons)."""


class BudgetConfigError(ConfigError, BudgetError):
    """A budget config file or preset is invalid (both a ConfigError and a BudgetError)."""


class PlannedMeasurement(NamedTuple):
    """One (geolevel, query) measurement of a budget.

    Attributes:
        geolevel: geolevel name.
        query: canonical query name (valid for ``censusdp.data.queries.make_query``).
        rho_or_epsilon: its exact share of the budget: ``rho`` for zCDP budgets,
            ``epsilon`` for pure-DP budgets.
        mechanism: the mechanism that spends exactly that amount on a query of the
            budget's sensitivity.
    """

    geolevel: str
    query: str
    rho_or_epsilon: Fraction
    mechanism: DiscreteGaussian | Geometric

    @property
    def rho(self) -> Fraction:
        """zCDP cost (for a pure-DP measurement ``epsilon^2 / 2``, Kazan & Reiter (2022) Thm. 2)."""
        if isinstance(self.mechanism, Geometric):
            return self.rho_or_epsilon**2 / 2
        return self.rho_or_epsilon

    @property
    def epsilon(self) -> Fraction | None:
        """Pure-DP cost, or ``None`` for a zCDP measurement."""
        return self.rho_or_epsilon if isinstance(self.mechanism, Geometric) else None

    @property
    def variance(self) -> float:
        """Variance of the noise added to each cell."""
        return self.mechanism.variance


def scaled_mechanism(
    mechanism: DiscreteGaussian | Geometric, factor: Fraction
) -> DiscreteGaussian | Geometric:
    """The mechanism of a planned measurement with its amount multiplied by ``factor``.

    A geounit with a per-geounit share (a spine release's bypass: ``factor`` is the
    unit's share over its geolevel's share) spends ``factor`` times the planned amount:
    the discrete Gaussian's ``sigma^2`` and the geometric's scale are divided by it
    (production's ``getAdjustedInverseScalePerQuery`` with the node's own budget).

    Raises:
        BudgetError: for a factor that is not positive.
    """
    factor = Fraction(factor)
    if factor <= 0:
        raise BudgetError(f"a measured geounit needs a positive budget factor, got {factor}")
    if factor == 1:
        return mechanism
    if isinstance(mechanism, Geometric):
        return Geometric(mechanism.scale / factor)
    return DiscreteGaussian(mechanism.sigma_squared / factor)


@functools.lru_cache(maxsize=512)
def _query_identity(schema: str, name: str) -> tuple[str, frozenset[str]]:
    q = make_query(get_schema(schema), name)
    return q.name, frozenset(q.variables)


@dataclass(frozen=True)
class Budget:
    """A privacy-loss budget and its allocation (exact Fractions, validated).

    Attributes:
        schema: schema name (``"pl94"`` or ``"dhc-lite"``).
        mechanism: ``"discrete_gaussian"`` (``total`` is rho) or ``"geometric"``
            (``total`` is epsilon).
        total: the global budget.
        delta: the delta at which (epsilon, delta) is reported.
        geolevels: ``(name, geocode length)`` pairs, top first.
        geolevel_shares: share of ``total`` for each geolevel.
        query_shares: for each geolevel, the share of its budget for each query.
        neighbours: the neighbouring relation the guarantee is stated for:
            ``"bounded"`` (change one person's record; the 2020 production system and
            the 2010 DDP) or ``"unbounded"`` (add or remove one person). One person then
            changes :attr:`sensitivity` = 2 or 1 cells of every histogram query, by one
            each, so a query's squared L2 and its L1 sensitivity are both that number.
        name: preset or config name.
        description: one line for reports.
        notes: caveats printed with the budget (what a preset cannot represent).
        spine: the geography the budget is spent on, when the budget says so:
            ``"optimized"`` (the 2020 production spine, ``spine = opt_spine`` in
            production's configuration) or ``"tabulation"``; ``None`` leaves it to the
            run (the tabulation hierarchy). See :mod:`censusdp.release.spine`.
    """

    schema: str
    mechanism: str
    total: Fraction
    delta: Fraction
    geolevels: tuple[tuple[str, int], ...]
    geolevel_shares: dict[str, Fraction]
    query_shares: dict[str, dict[str, Fraction]]
    neighbours: str = "bounded"
    name: str = "custom"
    description: str = ""
    notes: tuple[str, ...] = field(default=())
    spine: str | None = None

    def __post_init__(self) -> None:
        get_schema(self.schema)  # raises SchemaError for unknown schemas
        if self.mechanism not in MECHANISMS:
            raise BudgetError(
                f"mechanism is {self.mechanism!r}; it must be one of {sorted(MECHANISMS)}"
            )
        unit = "rho" if self.mechanism == "discrete_gaussian" else "epsilon"
        object.__setattr__(self, "total", positive_fraction(self.total, f"global {unit}"))
        delta = as_fraction(self.delta, "delta")
        if not 0 < delta < 1:
            raise BudgetError(f"delta is {delta}; it must satisfy 0 < delta < 1")
        object.__setattr__(self, "delta", delta)
        if self.neighbours not in NEIGHBOURS:
            raise BudgetError(
                f"neighbours is {self.neighbours!r}; it must be one of {list(NEIGHBOURS)}"
            )
        object.__setattr__(self, "notes", tuple(str(n) for n in self.notes))
        if self.spine is not None and self.spine not in SPINES:
            raise BudgetError(f"spine is {self.spine!r}; it must be one of {list(SPINES)}")

        levels = tuple((str(n), int(length)) for n, length in self.geolevels)
        if not levels:
            raise BudgetError("geolevels is empty; a budget needs at least one geolevel")
        names = [n for n, _ in levels]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise BudgetError(f"geolevel names must be unique; repeated: {dupes}")
        previous = -1
        for n, length in levels:
            if not 0 <= length <= 16:
                raise BudgetError(
                    f"geocode length of geolevel {n!r} is {length}; it must be in 0..16"
                )
            if length <= previous:
                raise BudgetError(
                    f"geocode length of geolevel {n!r} is {length}; lengths must increase "
                    f"from the top geolevel down (previous was {previous})"
                )
            previous = length
        object.__setattr__(self, "geolevels", levels)

        shares = {
            str(k): as_fraction(v, f"budget share for geolevel {k!r}")
            for k, v in dict(self.geolevel_shares).items()
        }
        self._check_share_set(shares, names, "geolevel", "geolevel shares")
        object.__setattr__(self, "geolevel_shares", {n: shares[n] for n in names})

        qshares_in = dict(self.query_shares)
        unknown = sorted(set(qshares_in) - set(names))
        if unknown:
            raise BudgetError(f"query shares given for unknown geolevels {unknown}; known: {names}")
        qshares: dict[str, dict[str, Fraction]] = {}
        for level in names:
            if level not in qshares_in or not qshares_in[level]:
                raise BudgetError(
                    f"geolevel {level!r} has no query shares; give at least one query"
                )
            canon: dict[str, Fraction] = {}
            seen: dict[frozenset[str], str] = {}
            for qname, value in dict(qshares_in[level]).items():
                try:
                    cname, ident = _query_identity(self.schema, str(qname))
                except CensusDPError as exc:
                    raise BudgetError(
                        f"query {qname!r} at geolevel {level!r} is not valid for schema "
                        f"{self.schema!r}: {exc}"
                    ) from None
                if ident in seen:
                    raise BudgetError(
                        f"geolevel {level!r} lists the same query twice: {seen[ident]!r} and "
                        f"{qname!r}"
                    )
                seen[ident] = str(qname)
                canon[cname] = as_fraction(
                    value, f"budget share for query {qname!r} at geolevel {level!r}"
                )
            self._check_share_set(canon, list(canon), f"query at geolevel {level!r}", level)
            qshares[level] = canon
        object.__setattr__(self, "query_shares", qshares)
        self._check_noise_scale()

    def _check_noise_scale(self) -> None:
        """Refuse a budget so small that a measurement's noise would be meaningless.

        Beyond a standard deviation of :data:`MAX_NOISE_SD` persons the noisy counts no
        longer fit the exact integer samplers (and say nothing about any population).
        """
        for m in self.measurements():
            mech = m.mechanism
            sd2 = mech.sigma_squared if hasattr(mech, "sigma_squared") else 2 * mech.scale**2
            if sd2 > MAX_NOISE_SD**2:
                unit = "rho" if self.privacy_measure == "zCDP" else "epsilon"
                raise BudgetError(
                    f"global {unit} {float(self.total):.3g} gives ({m.geolevel}, {m.query}) noise "
                    f"with standard deviation {float(sd2) ** 0.5:.3g}; the largest supported is "
                    f"{MAX_NOISE_SD:.0e} persons: use a larger {unit}"
                )

    @staticmethod
    def _check_share_set(
        shares: dict[str, Fraction], expected: list[str], what: str, label: str
    ) -> None:
        missing = [n for n in expected if n not in shares]
        extra = [n for n in shares if n not in expected]
        if missing:
            raise BudgetError(f"no budget share given for {what} {missing[0]!r}")
        if extra:
            raise BudgetError(f"budget share given for unknown {what} {extra[0]!r}")
        for n, s in shares.items():
            if s <= 0:
                raise BudgetError(f"budget share for {what} {n!r} is {s}; shares must be positive")
        total = sum(shares.values(), Fraction(0))
        if total != 1:
            raise BudgetError(
                f"{label}: shares sum to {total} (= {float(total):.6g}); they must sum to exactly 1"
            )

    # -- derived quantities ---------------------------------------------------------------

    @property
    def privacy_measure(self) -> str:
        """``"zCDP"`` or ``"pure"``."""
        return MECHANISMS[self.mechanism]

    @property
    def sensitivity(self) -> int:
        """Cells of a histogram query one person changes, by one each: 2 (bounded) or 1.

        This is the query's L1 sensitivity and its squared L2 sensitivity.
        """
        return NEIGHBOURS[self.neighbours]

    @property
    def geolevel_names(self) -> tuple[str, ...]:
        """Geolevel names, top first."""
        return tuple(n for n, _ in self.geolevels)

    @property
    def rho(self) -> Fraction:
        """Global zCDP rho.

        For a zCDP budget this is ``total``. For a pure-DP budget it is the zCDP
        composition ``sum_i epsilon_i^2 / 2`` over the measurements (each
        ``epsilon_i``-DP measurement is ``epsilon_i^2 / 2``-zCDP, Kazan & Reiter (2022) Thm. 2),
        which is never more than ``total^2 / 2``.
        """
        if self.privacy_measure == "zCDP":
            return self.total
        return sum((m.rho for m in self.measurements()), Fraction(0))

    def epsilon(self, delta: Fraction | str | float | None = None) -> float:
        """Global epsilon at ``delta`` (default: the budget's).

        zCDP: CKS Corollary 13 of ``rho``. Pure DP: ``total`` (which holds with
        ``delta = 0``), or the CKS epsilon of the composed ``rho`` when smaller.
        """
        d = self.delta if delta is None else delta
        if self.privacy_measure == "pure":
            return min(float(self.total), accounting.epsilon_from_rho(self.rho, d))
        return accounting.epsilon_from_rho(self.total, d)

    def geolevel_amount(self, geolevel: str) -> Fraction:
        """``total * geolevel share``."""
        try:
            return self.total * self.geolevel_shares[geolevel]
        except KeyError:
            raise BudgetError(
                f"unknown geolevel {geolevel!r}; known: {list(self.geolevel_names)}"
            ) from None

    def measurements(self) -> list[PlannedMeasurement]:
        """Every (geolevel, query) measurement with its exact amount and mechanism.

        ``amount = total * geolevel_share * query_share``. With ``Delta`` the
        query's sensitivity (:attr:`sensitivity`: 2 bounded, 1 unbounded), the mechanism
        is the discrete Gaussian with ``sigma^2 = Delta_2^2 / (2 amount)`` (``rho =
        Delta_2^2 / (2 sigma^2)``, Canonne, Kamath & Steinke 2020), that is ``1 / amount``
        under bounded neighbours as in the 2020 production system
        (``engine_utils.getAdjustedInverseScalePerQuery`` and
        ``primitives.RationalDiscreteGaussianMechanism``), or the geometric mechanism
        with ``scale = Delta_1 / amount`` (Van Riper, Kugler & Ruggles 2020, eq. 1).
        """
        out = []
        for level in self.geolevel_names:
            level_amount = self.total * self.geolevel_shares[level]
            for query, share in self.query_shares[level].items():
                amount = level_amount * share
                mech: DiscreteGaussian | Geometric
                if self.mechanism == "discrete_gaussian":
                    mech = DiscreteGaussian(Fraction(self.sensitivity) / (2 * amount))
                else:
                    mech = Geometric.from_epsilon(amount, self.sensitivity)
                out.append(PlannedMeasurement(level, query, amount, mech))
        return out

    def sampling_delta(self) -> float:
        """Extra delta from the samplers' TV bounds (see :mod:`censusdp.privacy.accounting`).

        One person changes at most ``sensitivity`` cells of each measured query.
        """
        tvs = [m.mechanism.sampling_tv * self.sensitivity for m in self.measurements()]
        return accounting.sampling_delta(self.epsilon(), tvs)

    def scaled(
        self,
        *,
        rho: Fraction | str | float | int | None = None,
        epsilon: Fraction | str | float | int | None = None,
    ) -> Budget:
        """The same shares with a new global budget.

        For a zCDP budget ``rho`` is used as is, and ``epsilon`` is turned into the
        largest ``rho`` whose CKS epsilon at this budget's delta is at most
        ``epsilon`` (:func:`censusdp.privacy.accounting.rho_from_epsilon`). For a pure-DP budget
        ``epsilon`` is used as is, and ``rho`` becomes the largest epsilon (to
        ``1e-12``) with ``epsilon^2 / 2 <= rho``.
        """
        if (rho is None) == (epsilon is None):
            raise BudgetError("give exactly one of rho or epsilon to rescale a budget")
        if self.privacy_measure == "zCDP":
            new = (
                positive_fraction(rho, "rho")
                if rho is not None
                else accounting.rho_from_epsilon(epsilon, self.delta)
            )
        elif epsilon is not None:
            new = positive_fraction(epsilon, "epsilon")
        else:
            r = positive_fraction(rho, "rho")
            den = 10**12
            num = math.isqrt((2 * r * den * den).__floor__())
            new = Fraction(num, den)
            if new <= 0:
                raise BudgetError(f"rho {r} is too small for a pure-DP budget")
        return Budget(
            schema=self.schema,
            mechanism=self.mechanism,
            total=new,
            delta=self.delta,
            geolevels=self.geolevels,
            geolevel_shares=dict(self.geolevel_shares),
            query_shares={k: dict(v) for k, v in self.query_shares.items()},
            neighbours=self.neighbours,
            name=self.name,
            description=self.description,
            notes=self.notes,
            spine=self.spine,
        )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Budget:
        """The budget a manifest recorded with :meth:`to_dict` (exact, from its strings).

        Raises:
            BudgetConfigError: if the record is incomplete or inconsistent.
        """
        try:
            levels = d["geolevels"]
            return cls(
                schema=str(d["schema"]),
                mechanism=str(d["mechanism"]),
                total=Fraction(d["total"]),
                delta=Fraction(d["delta"]),
                geolevels=tuple((str(lv["name"]), int(lv["length"])) for lv in levels),
                geolevel_shares={str(lv["name"]): Fraction(lv["share"]) for lv in levels},
                query_shares={
                    str(lv["name"]): {str(q["query"]): Fraction(q["share"]) for q in lv["queries"]}
                    for lv in levels
                },
                neighbours=str(d.get("neighbours", _legacy_neighbours(d.get("sensitivity", 2)))),
                name=str(d.get("name", "custom")),
                spine=d.get("spine"),
                description=str(d.get("description", "")),
                notes=tuple(d.get("notes", ())),
            )
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
            raise BudgetConfigError(f"recorded budget is incomplete or invalid ({exc!r})") from None

    def same_allocation(self, other: Budget) -> bool:
        """True when both spend the same amounts on the same measurements."""
        return [
            (m.geolevel, m.query, m.rho_or_epsilon, self.neighbours) for m in self.measurements()
        ] == [
            (m.geolevel, m.query, m.rho_or_epsilon, other.neighbours) for m in other.measurements()
        ] and (self.schema, self.mechanism, self.delta) == (
            other.schema,
            other.mechanism,
            other.delta,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description for manifests (exact strings plus floats)."""
        eps = self.epsilon()
        sdelta = self.sampling_delta()
        levels = []
        for m_level, length in self.geolevels:
            queries = []
            for m in self.measurements():
                if m.geolevel != m_level:
                    continue
                share = self.query_shares[m_level][m.query]
                queries.append(
                    {
                        "query": m.query,
                        "share": str(share),
                        "share_float": float(share),
                        "rho": str(m.rho),
                        "rho_float": float(m.rho),
                        "epsilon": None if m.epsilon is None else str(m.epsilon),
                        "variance": m.variance,
                        "mechanism": m.mechanism.describe(),
                    }
                )
            share = self.geolevel_shares[m_level]
            levels.append(
                {
                    "name": m_level,
                    "length": length,
                    "share": str(share),
                    "share_float": float(share),
                    "queries": queries,
                }
            )
        return {
            "name": self.name,
            "description": self.description,
            "schema": self.schema,
            "mechanism": self.mechanism,
            "privacy_measure": self.privacy_measure,
            "neighbours": self.neighbours,
            "sensitivity": self.sensitivity,
            "total": str(self.total),
            "total_float": float(self.total),
            "rho": str(self.rho),
            "rho_float": float(self.rho),
            "epsilon": eps,
            "delta": str(self.delta),
            "delta_float": float(self.delta),
            "sampling_delta": sdelta,
            "delta_total": float(self.delta) + sdelta,
            "geolevels": levels,
            "notes": list(self.notes),
            **({"spine": self.spine} if self.spine is not None else {}),
        }


# -- configuration files -------------------------------------------------------------------

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


def _legacy_neighbours(sensitivity: object) -> str:
    """Older configs gave ``sensitivity`` (1 add/remove, 2 replace) instead of ``neighbours``."""
    return {1: "unbounded", 2: "bounded"}.get(sensitivity, str(sensitivity))  # type: ignore[call-overload]


def _config_neighbours(data: Mapping[str, Any], origin: str) -> str:
    if "neighbours" in data and "sensitivity" in data:
        raise _fail(
            origin, "sensitivity", data["sensitivity"], "give neighbours or sensitivity, not both"
        )
    if "sensitivity" in data:
        value = data["sensitivity"]
        if isinstance(value, bool) or value not in (1, 2):
            raise _fail(origin, "sensitivity", value, "must be 1 (unbounded) or 2 (bounded)")
        return _legacy_neighbours(value)
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
            name=str(data.get("name", Path(origin).stem)),
            description=str(data.get("description", "")),
            notes=tuple(notes),
            spine=None if data.get("spine") is None else str(data["spine"]),
        )
    except CensusDPError as exc:
        raise BudgetConfigError(f"{origin}: {exc}") from None


def load_config(path: str | Path) -> Budget:
    """Read and validate a budget TOML file (same format as the presets).

    Raises:
        BudgetConfigError: for a missing file, invalid TOML, or an invalid budget;
            the message names the file, the key and the value.
    """
    p = Path(path)
    if p.exists() and not p.is_file():  # a directory, a FIFO, /dev/zero: never read
        raise BudgetConfigError(f"{p}: cannot read budget config: not a regular file")
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise BudgetConfigError(f"{p}: cannot read budget config: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise BudgetConfigError(
            f"{p}: not a TOML budget config: not UTF-8 text (byte {exc.start})"
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BudgetConfigError(f"{p}: invalid TOML: {exc}") from None
    return budget_from_mapping(data, origin=str(p))


def _preset_dir() -> Any:
    return importlib.resources.files("censusdp.privacy") / "presets"


def preset_names() -> tuple[str, ...]:
    """Names of the presets shipped with the package."""
    return tuple(
        sorted(f.name[: -len(".toml")] for f in _preset_dir().iterdir() if f.name.endswith(".toml"))
    )


def load_preset(name: str) -> Budget:
    """A shipped preset (``pl94-2020``, ``ddp-2010``, ``dhc-lite-demo``, ...).

    Raises:
        BudgetConfigError: for an unknown name (listing the known ones).
    """
    names = preset_names()
    if name not in names:
        raise BudgetConfigError(f"unknown budget preset {name!r}; presets are {list(names)}")
    text = (_preset_dir() / f"{name}.toml").read_text(encoding="utf-8")
    return budget_from_mapping(tomllib.loads(text), origin=f"preset {name}")


def resolve_budget(
    *,
    preset: str | None = None,
    config: str | Path | None = None,
    rho: Fraction | str | float | None = None,
    epsilon: Fraction | str | float | None = None,
    default_preset: str = "pl94-2020",
) -> Budget:
    """The one way a budget is chosen: a preset or a config file, optionally rescaled.

    Args:
        preset: a shipped preset name (default ``default_preset`` when ``config`` is
            not given either).
        config: a TOML budget file (exclusive with ``preset``).
        rho: rescale to this global rho (see :meth:`Budget.scaled`).
        epsilon: rescale to this global epsilon (exclusive with ``rho``).
        default_preset: the preset used when neither ``preset`` nor ``config`` is given.

    Raises:
        BudgetConfigError: for both a preset and a config file.
    """
    if preset is not None and config is not None:
        raise BudgetConfigError("give either a preset or a config file, not both")
    budget = load_config(config) if config is not None else load_preset(preset or default_preset)
    if rho is not None or epsilon is not None:
        budget = budget.scaled(rho=rho, epsilon=epsilon)
    return budget


def release_privacy(persons: Budget, units: Budget | None = None) -> dict[str, Any]:
    """The privacy loss of a whole release (the person run and the unit run composed).

    Both runs read the same people, so their losses add (sequential composition):
    zCDP ``rho`` adds exactly (:func:`~censusdp.privacy.accounting.compose`); a pure-DP
    release's ``epsilon`` adds, and its ``rho`` is the zCDP composition of its
    measurements. The reported ``delta`` is the whole of it: the target delta of the
    CKS conversion (zero for pure DP) plus the samplers' own term
    (:func:`~censusdp.privacy.accounting.sampling_delta`), which no release omits.

    Returns:
        A JSON-ready mapping: ``mechanism``, ``rho`` (and ``rho_exact``), ``epsilon``,
        ``delta`` (total), ``delta_target``, ``sampling_delta``, and each run's own
        :meth:`Budget.to_dict` under ``persons`` / ``units``.
    """
    runs = [persons] + ([units] if units is not None else [])
    if len({b.privacy_measure for b in runs}) != 1:
        raise BudgetError(
            f"the person and unit budgets use different privacy measures "
            f"({persons.privacy_measure} and {units.privacy_measure if units else None})"
        )
    rho = accounting.compose([b.rho for b in runs])
    tvs = [m.mechanism.sampling_tv * b.sensitivity for b in runs for m in b.measurements()]
    out: dict[str, Any] = {"persons": persons.to_dict()}
    if units is not None:
        out["units"] = units.to_dict()
    if persons.privacy_measure == "zCDP":
        epsilon = accounting.epsilon_from_rho(rho, persons.delta)
        target = float(persons.delta)
    else:
        epsilon = float(accounting.compose([b.total for b in runs]))
        target = 0.0
    sdelta = accounting.sampling_delta(epsilon, tvs)
    out.update(
        {
            "mechanism": persons.mechanism,
            "rho": float(rho),
            "rho_exact": str(rho),
            "epsilon": epsilon,
            "delta": min(1.0, target + sdelta),
            "delta_target": target,
            "sampling_delta": sdelta,
        }
    )
    return out


@dataclass(frozen=True)
class ReleaseBudget:
    """Everything a release spends: the person run and, optionally, the housing-unit run.

    One vocabulary for every command: a release's budget is the privacy loss of all it
    publishes. ``scaled(rho=R)`` makes the composed rho exactly ``R``; ``scaled(epsilon=E)``
    makes the composed (epsilon, delta) guarantee at the budget's delta at most ``E``
    (the largest such rho, Canonne, Kamath & Steinke 2020, Cor. 13). Both keep the split
    between the runs, between geolevels and between queries: every share is multiplied
    by one factor.

    Attributes:
        persons: the person run.
        units: the housing-unit run, or ``None`` when occupancy is not released.
    """

    persons: Budget
    units: Budget | None = None

    def __post_init__(self) -> None:
        if self.units is not None and self.units.privacy_measure != self.persons.privacy_measure:
            raise BudgetError(
                f"the person budget is {self.persons.privacy_measure} and the unit budget "
                f"{self.units.privacy_measure}; a release composes runs of one kind"
            )

    @property
    def runs(self) -> tuple[Budget, ...]:
        """The budgets of the runs, persons first."""
        return (self.persons,) if self.units is None else (self.persons, self.units)

    @property
    def rho(self) -> Fraction:
        """Composed zCDP rho of the whole release (exact)."""
        return accounting.compose([b.rho for b in self.runs])

    def epsilon(self) -> float:
        """The whole release's epsilon (at the person budget's delta for zCDP)."""
        return float(release_privacy(self.persons, self.units)["epsilon"])

    def scaled(
        self,
        *,
        rho: Fraction | str | float | int | None = None,
        epsilon: Fraction | str | float | int | None = None,
    ) -> ReleaseBudget:
        """The same split with a new total: composed ``rho`` = ``rho``, or composed epsilon
        at most ``epsilon``.

        Raises:
            BudgetError: for neither or both of ``rho`` and ``epsilon``.
        """
        if (rho is None) == (epsilon is None):
            raise BudgetError("give exactly one of rho or epsilon to rescale a release budget")
        totals = [b.total for b in self.runs]
        if self.persons.privacy_measure == "zCDP":
            target = (
                positive_fraction(rho, "rho")
                if rho is not None
                else accounting.rho_from_epsilon(epsilon, self.persons.delta)
            )
            factor = target / sum(totals, Fraction(0))
            return ReleaseBudget(*(b.scaled(rho=b.total * factor) for b in self.runs))
        if epsilon is None:
            one = self.persons.scaled(rho=rho).total / self.persons.total
            return ReleaseBudget(*(b.scaled(epsilon=b.total * one) for b in self.runs))
        factor = positive_fraction(epsilon, "epsilon") / sum(totals, Fraction(0))
        return ReleaseBudget(*(b.scaled(epsilon=b.total * factor) for b in self.runs))

    def to_dict(self) -> dict[str, Any]:
        """The manifest's record (see :func:`release_privacy`)."""
        return release_privacy(self.persons, self.units)


def units_preset_for(preset: str) -> str | None:
    """The housing-unit preset that goes with a person preset (``<preset>-units``), if any."""
    name = f"{preset}-units"
    return name if name in preset_names() else None


def resolve_release_budget(
    *,
    preset: str | None = None,
    config: str | Path | None = None,
    rho: Fraction | str | float | None = None,
    epsilon: Fraction | str | float | None = None,
    units: str | None = "auto",
    default_preset: str = "pl94-2020",
) -> ReleaseBudget:
    """The budget of a whole release, the one way commands choose it.

    Args:
        preset, config: the person run's budget (see :func:`resolve_budget`).
        rho: the composed rho of everything released (persons and units together).
        epsilon: the composed epsilon of everything released, at the preset's delta.
        units: the unit run's preset; ``"auto"`` (the person preset's ``-units``
            companion, if any; none for a config file) or ``None``/``"none"`` (no unit run).
        default_preset: the person preset when neither ``preset`` nor ``config`` is given.
    """
    persons = resolve_budget(preset=preset, config=config, default_preset=default_preset)
    if units == "auto":
        units = None if config is not None else units_preset_for(preset or default_preset)
    unit_budget = load_preset(units) if units not in (None, "none") else None
    whole = ReleaseBudget(persons, unit_budget)
    if rho is not None or epsilon is not None:
        whole = whole.scaled(rho=rho, epsilon=epsilon)
    return whole


# -- reports ---------------------------------------------------------------------------------


@functools.lru_cache(maxsize=512)
def _query_rows(schema_name: str, query: str) -> int:
    return make_query(get_schema(schema_name), query).n_rows


@functools.lru_cache(maxsize=512)
def _attributes_of(schema_name: str, query: str) -> tuple[str, ...]:
    """Schema attributes a query reads (recodes count as their source attribute)."""
    schema = get_schema(schema_name)
    q = make_query(schema, query)
    out = []
    for v in q.variables:
        var = schema.variable(v)
        out.append(getattr(var, "source", var.name))
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class BudgetReport:
    """The allocation table of a budget, as printed by ``censusdp budget``.

    Attributes:
        budget: the budget reported on.
        rows: one dict per (geolevel, query): shares, rho, epsilon, noise variance.
        geolevels: one dict per geolevel: share, rho and epsilon at delta.
        queries: one dict per query name: rho summed over geolevels, epsilon.
        attributes: one dict per schema attribute: rho of the queries that read it.
        totals: global rho, epsilon (CKS Cor. 13), implied and simple-bound epsilon.
    """

    budget: Budget
    rows: tuple[dict[str, Any], ...]
    geolevels: tuple[dict[str, Any], ...]
    queries: tuple[dict[str, Any], ...]
    attributes: tuple[dict[str, Any], ...]
    totals: dict[str, Any]
    release: ReleaseBudget | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready report (``censusdp budget --json``)."""
        return {
            "budget": {
                "name": self.budget.name,
                "description": self.budget.description,
                "schema": self.budget.schema,
                "mechanism": self.budget.mechanism,
                "privacy_measure": self.budget.privacy_measure,
                "neighbours": self.budget.neighbours,
                "sensitivity": self.budget.sensitivity,
            },
            "release": self._release_summary(),
            "totals": self.totals,
            "measurements": list(self.rows),
            "geolevels": list(self.geolevels),
            "queries": list(self.queries),
            "attributes": list(self.attributes),
            "notes": list(self.budget.notes),
        }

    def to_text(self) -> str:
        """A human-readable allocation table."""
        b, t = self.budget, self.totals
        pure = b.privacy_measure == "pure"
        lines = [
            f"budget {b.name}: {b.description}".rstrip(": "),
            f"schema {b.schema}, mechanism {b.mechanism} ({b.privacy_measure}), "
            f"{b.neighbours} neighbours (sensitivity {b.sensitivity}), {len(self.rows)} measurements",
        ]
        if pure:
            lines.append(f"global epsilon = {t['total']} = {t['epsilon']:.6g} (pure DP)")
            lines.append(
                f"  as zCDP: rho = sum of epsilon_i^2/2 = {t['rho_float']:.6g} "
                f"(<= epsilon^2/2 = {float(b.total) ** 2 / 2:.6g})"
            )
        else:
            lines.append(f"global rho = {t['rho']} = {t['rho_float']:.6g}")
        lines.append(
            f"  epsilon at delta={t['delta_float']:g}: {t['epsilon_at_delta']:.6g} "
            f"({'min of pure epsilon and ' if pure else ''}CKS Cor. 13; "
            f"simple bound {t['epsilon_simple']:.6g}); "
            f"implied epsilon sqrt(2 rho) = {t['implied_epsilon']:.6g}"
        )
        lines.append(
            f"  sampler TV adds delta {t['sampling_delta']:.3g} "
            f"(total delta {t['delta_total']:.6g})"
        )
        lines.append("")
        head = (
            f"{'geolevel':<11} {'query':<28} {'cells':>6} {'share':>11} {'of total':>9} "
            f"{'rho':>10} {'eps@delta':>9} {'variance':>11} {'std':>8}"
        )
        if pure:
            head += f" {'epsilon':>8}"
        lines += [head, "-" * len(head)]
        for r in self.rows:
            line = (
                f"{r['geolevel']:<11} {r['query']:<28} {r['cells']:>6} {r['share']:>11} "
                f"{r['share_of_total_float']:>9.5f} {r['rho_float']:>10.4g} "
                f"{r['epsilon_at_delta']:>9.4g} {r['variance']:>11.5g} {r['std']:>8.4g}"
            )
            if pure:
                line += f" {r['epsilon_float']:>8.4g}"
            lines.append(line)
        lines += ["", f"{'per geolevel':<28} {'share':>11} {'rho':>10} {'eps@delta':>9}"]
        for g in self.geolevels:
            lines.append(
                f"{g['geolevel']:<28} {g['share']:>11} {g['rho_float']:>10.4g} "
                f"{g['epsilon_at_delta']:>9.4g}"
            )
        lines += ["", f"{'per query (all geolevels)':<28} {'rho':>10} {'eps@delta':>9}"]
        for q in self.queries:
            lines.append(f"{q['query']:<28} {q['rho_float']:>10.4g} {q['epsilon_at_delta']:>9.4g}")
        lines += ["", f"{'per attribute':<28} {'rho':>10} {'eps@delta':>9}  (queries reading it)"]
        for a in self.attributes:
            lines.append(
                f"{a['attribute']:<28} {a['rho_float']:>10.4g} {a['epsilon_at_delta']:>9.4g}"
            )
        r = self._release_summary()
        if r is not None:
            lines += [
                "",
                f"the whole release (persons + housing units, {r['units_budget']}): "
                f"rho {r['rho']:.6g} = persons {r['persons_rho']:.6g} + units "
                f"{r['units_rho']:.6g}; epsilon {r['epsilon']:.6g} at delta {r['delta']:.3g} "
                f"({b.neighbours} neighbours)",
                "  --rho / --epsilon of 'censusdp run' set this total; the split is kept",
            ]
        if b.notes:
            lines += ["", "notes:"] + [f"  - {n}" for n in b.notes]
        return "\n".join(lines)

    def _release_summary(self) -> dict[str, Any] | None:
        if self.release is None or self.release.units is None:
            return None
        d = self.release.to_dict()
        return {
            "rho": d["rho"],
            "rho_exact": d["rho_exact"],
            "epsilon": d["epsilon"],
            "delta": d["delta"],
            "persons_rho": float(self.release.persons.rho),
            "units_rho": float(self.release.units.rho),
            "units_budget": self.release.units.name,
        }


def _loss_entry(
    loss: tuple[Fraction, Fraction], eps_at: Callable[..., float], pure: bool
) -> dict[str, Any]:
    """``rho`` of a sum of measurements and its epsilon at the report's delta."""
    r, e = loss
    return {
        "rho": str(r),
        "rho_float": float(r),
        "epsilon_at_delta": (eps_at(r, e if pure else None) if r > 0 else 0.0),
    }


def _measurement_rows(
    budget: Budget, eps_at: Callable[..., float]
) -> tuple[list[dict[str, Any]], dict[str, dict[str, tuple[Fraction, Fraction]]]]:
    """One report row per measurement, and the (rho, pure epsilon) summed per geolevel,
    query and attribute (an attribute's sum covers the queries that read it)."""
    schema = get_schema(budget.schema)
    zero = (Fraction(0), Fraction(0))
    sums: dict[str, dict[str, tuple[Fraction, Fraction]]] = {
        "geolevel": {},
        "query": {},
        "attribute": {a: zero for a in schema.attribute_names},
    }
    rows = []
    for m in budget.measurements():
        e_i = m.epsilon if m.epsilon is not None else Fraction(0)
        qshare = budget.query_shares[m.geolevel][m.query]
        of_total = budget.geolevel_shares[m.geolevel] * qshare
        rows.append(
            {
                "geolevel": m.geolevel,
                "query": m.query,
                "cells": _query_rows(budget.schema, m.query),
                "share": str(qshare),
                "share_float": float(qshare),
                "share_of_total": str(of_total),
                "share_of_total_float": float(of_total),
                "rho": str(m.rho),
                "rho_float": float(m.rho),
                "epsilon": None if m.epsilon is None else str(m.epsilon),
                "epsilon_float": None if m.epsilon is None else float(m.epsilon),
                "epsilon_at_delta": eps_at(m.rho, m.epsilon),
                "variance": m.variance,
                "std": math.sqrt(m.variance),
                "mechanism": m.mechanism.describe(),
            }
        )
        keys = [("geolevel", m.geolevel), ("query", m.query)]
        keys += [("attribute", a) for a in _attributes_of(budget.schema, m.query)]
        for kind, key in keys:
            r0, e0 = sums[kind].get(key, zero)
            sums[kind][key] = (r0 + m.rho, e0 + e_i)
    return rows, sums


def budget_report(
    *,
    preset: str | None = None,
    config: str | Path | None = None,
    rho: Fraction | str | float | None = None,
    epsilon: Fraction | str | float | None = None,
    delta: Fraction | str | float | None = None,
    units: str | None = "auto",
) -> BudgetReport:
    """Load a budget (preset or config, default ``pl94-2020``), rescale it, and report it.

    Per measurement: query share, share of the global budget, ``rho``, the
    ``epsilon`` of that measurement alone at ``delta`` (CKS Cor. 13), noise variance
    and standard deviation. Per geolevel, per query and per attribute: the summed
    ``rho`` (zCDP composes additively) and its epsilon at ``delta``. An attribute's
    row sums the queries that read it (recodes count for their source), the privacy
    loss about that attribute alone for an add/remove change.

    Args:
        preset: a shipped preset name.
        config: a TOML budget file (exclusive with ``preset``).
        rho: rescale to this global rho (see :meth:`Budget.scaled`).
        epsilon: rescale to this global epsilon.
        delta: report epsilons at this delta instead of the budget's.
        units: the housing-unit preset composed with it (``"auto"``: the ``-units``
            companion; ``None``: persons only). ``rho``/``epsilon`` are the totals of
            both runs together.
    """
    release = resolve_release_budget(
        preset=preset, config=config, rho=rho, epsilon=epsilon, units=units
    )
    budget = release.persons
    if delta is not None:
        d = as_fraction(delta, "delta")
        if not 0 < d < 1:
            raise BudgetError(f"delta is {d}; it must satisfy 0 < delta < 1")
    else:
        d = budget.delta

    pure = budget.privacy_measure == "pure"

    @functools.cache
    def cks(r: Fraction) -> float:
        return accounting.epsilon_from_rho(r, d)

    def eps_at(r: Fraction, pure_eps: Fraction | None = None) -> float:
        # pure DP: the pure epsilon holds at any delta; report the smaller bound
        e = cks(r)
        return min(e, float(pure_eps)) if pure_eps is not None else e

    rows, sums = _measurement_rows(budget, eps_at)
    levels = tuple(
        {
            "geolevel": g,
            "share": str(budget.geolevel_shares[g]),
            "share_float": float(budget.geolevel_shares[g]),
            **_loss_entry(sums["geolevel"][g], eps_at, pure),
            **({"epsilon": str(budget.geolevel_amount(g))} if pure else {}),
        }
        for g in budget.geolevel_names
    )
    queries = tuple({"query": q, **_loss_entry(v, eps_at, pure)} for q, v in sums["query"].items())
    attributes = tuple(
        {"attribute": a, **_loss_entry(v, eps_at, pure)} for a, v in sums["attribute"].items()
    )
    eps_d = eps_at(budget.rho, budget.total if pure else None)
    sdelta = budget.sampling_delta()
    totals = {
        "total": str(budget.total),
        "total_float": float(budget.total),
        "rho": str(budget.rho),
        "rho_float": float(budget.rho),
        "epsilon": float(budget.total) if budget.privacy_measure == "pure" else eps_d,
        "epsilon_at_delta": eps_d,
        "epsilon_simple": accounting.epsilon_from_rho_simple(budget.rho, d),
        "implied_epsilon": accounting.implied_epsilon(budget.rho),
        "delta": str(d),
        "delta_float": float(d),
        "sampling_delta": sdelta,
        "delta_total": float(d) + sdelta,
    }
    return BudgetReport(budget, tuple(rows), levels, queries, attributes, totals, release)

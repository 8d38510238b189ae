"""The privacy-loss budget type: a global budget split by geolevel, then by query.

A :class:`Budget` is an exact allocation: the global ``rho`` (zCDP, discrete
Gaussian) or ``epsilon`` (pure DP, geometric) times the geolevel share times the
query share gives each (geolevel, query) measurement its own ``rho`` or
``epsilon``, hence its mechanism and noise variance (:meth:`Budget.measurements`).
Because one person is counted once per query per geolevel, the measurements
compose to exactly the global budget (zCDP and pure DP compose additively; Bun &
Steinke 2016 Lemma 2.3). Shares are validated once, in ``__post_init__``: every
share positive, each set summing to exactly 1, every query valid for the schema.

Budgets are written as TOML: :mod:`censusdp.privacy.budget_config` turns a parsed
document or TOML text into a :class:`Budget`; the budget of a whole release (persons
and housing units) is :mod:`censusdp.privacy.release_budget`, and the report of
``censusdp budget`` is :mod:`censusdp.privacy.budget_report`. Reading a budget from a
file (a user's config or a shipped preset) is :mod:`censusdp.io.budget_files`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, NamedTuple

from censusdp.data.queries import run_query
from censusdp.data.schema import get_schema
from censusdp.errors import BudgetError, CensusDPError, ConfigError
from censusdp.privacy import accounting
from censusdp.privacy.mechanisms import DiscreteGaussian, Geometric
from censusdp.privacy.parameters import as_fraction, positive_fraction

__all__ = [
    "DEFAULT_GEOLEVELS",
    "MAX_NOISE_SD",
    "MECHANISMS",
    "NEIGHBOURS",
    "SPINES",
    "Budget",
    "BudgetConfigError",
    "PlannedMeasurement",
    "legacy_neighbours",
    "scaled_mechanism",
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


def legacy_neighbours(sensitivity: object) -> str:
    """The neighbouring relation a legacy ``sensitivity`` means (1 add/remove, 2 replace):
    older configs and recorded budgets gave it instead of ``neighbours``."""
    return {1: "unbounded", 2: "bounded"}.get(sensitivity, str(sensitivity))  # type: ignore[call-overload]


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
    q = run_query(schema, name)[1]
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
                neighbours=str(d.get("neighbours", legacy_neighbours(d.get("sensitivity", 2)))),
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

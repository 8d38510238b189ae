"""Multipass estimation plans: which queries each least-squares and rounding pass targets.

The 2020 production system does not fit every query at once. Its configuration
(uscensusbureau/DAS_2020_Redistricting_Production_Code, ``configs/production/pl94/
person_default.ini``: ``l2_optimization_approach = DataIndUserSpecifiedQueriesNPass``,
``rounder_optimization_approach = MultipassRounder``, ``DataIndNPass_toleranceType =
opt_tol``; its ``opt_tol_slack = 0.1`` is never read: :data:`OPT_TOL_SLACK`) runs, per
parent with its children:

* **least squares in passes** (``programs/optimization/l2_dataIndep_npass_optimizer.py``,
  class ``DataIndQueriesL2NPass``). Pass ``p`` minimises the weighted squared error of
  *its own* queries only; the answers of the queries it is told to hold are then kept
  within a tolerance in every later pass:

      pass p:  minimise  sum_{q in pass p} w_q sum_i ||A_q X[i] - y_q[i]||^2
               subject to the subproblem's constraints, and for every query h held by
               an earlier pass r < p:  |A_h X[i] - A_h X_r[i]| <= tol_r   (every child i)

  with ``tol_r = opt_tol + opt_tol_slack``, where ``opt_tol`` (``findOptimalTol``) is the
  smallest tolerance for which the held constraints are feasible. The previous pass's
  own solution satisfies them with tolerance 0, so ``opt_tol`` is the solver's residual
  (production adds Gurobi's ``ConstrResidual``); censusdp uses the validated constraint
  violation of the previous solution, which bounds it.

* **rounding in passes** (``programs/optimization/multipass_rounder.py``, class
  ``DataIndependentNpassRound``). The integer solution is ``floor(x) + b`` with binary
  ``b``; pass ``p`` minimises ``sum_{q in pass p} sum_rows |A_q b - round(A_q frac(x))|``
  (plus the cell-wise cost ``(1 - 2 frac(x)) b`` when ``detailed`` is in the pass), with
  the rounded answers of every earlier pass's queries held exactly.

Which queries go in which pass is the strategy's query ordering
(``programs/strategies/strategies.py``, ``Strategy1b_ST_CTY_TR_BG_isoTot_Ordering_dsepJune3``,
used by ``configs/production/pl94/person_US.ini``): at State, County, Tract and Block Group
the ``total`` query is fitted alone first (``isoTot``: "isolate total query ... to
control diversity-totPop error correlation") and rounded alone first; at the US and at
Block one least-squares pass fits everything and one rounding pass weighs
``total``, ``hhgq``, ``hhgq * hispanic``, ``hhgq * hispanic * cenrace``,
``hhgq * votingage * hispanic * cenrace`` and ``detailed`` together. A plan applies to the
subproblems whose *children* are at its geolevel (production reads the ordering of the
children's geolevel, ``programs/nodes/manipulate_nodes.py``).

**Outer passes.** The 2020 DHC runs (``configs/production/dhc/unit_US.ini`` and
``person_US.ini``: ``seq_optimization_approach = L2PlusRounder_interleaved``) nest the
passes above in *outer* passes (``programs/optimization/sequential_optimizers.py``,
``L2PlusRounder_interleaved.run`` and ``interleave_optimizations``): each outer pass is a
whole least squares (its own inner passes, a new optimizer holding only its own
``constrain_to`` names, ``DataIndQueriesL2NPassDecomp.findOptimalTolAndAddConstrs``) and
a whole rounding of its answer; then every query of the outer pass's last rounding pass
becomes an equality constraint at its *rounded* answer, for every child, in all later
outer passes' least squares and rounding. :class:`PassPlan` ``l2_outer`` and
``rounder_outer`` say which outer pass each pass is in.

:data:`PRODUCTION_PASSES` holds those orderings as data, keyed by schema and geolevel
name; :func:`plans_for` picks the plan of every level of a run. ``passes="single"`` turns
passes off: one least-squares pass over every measured query and the cell-wise rounding
(censusdp's behaviour before multipass, kept byte-identical).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from censusdp.data.schema_dhc import QUERY_ORDERINGS
from censusdp.errors import ConfigError

__all__ = [
    "OPT_TOL_SLACK",
    "PASS_MODES",
    "PRODUCTION_PASSES",
    "PassPlan",
    "UNIT_HISTOGRAM_QUERIES",
    "plans_for",
]

PASS_MODES = ("production", "single")
"""``"production"``: the orderings of :data:`PRODUCTION_PASSES` where the schema has them
(one pass elsewhere); ``"single"``: one pass everywhere."""

OPT_TOL_SLACK = 0.01
"""Persons added to the optimal tolerance of held answers: production's interleaved
optimizers pass 0.01 and never read the configurations' ``opt_tol_slack`` (the P.L. 94
run's ``L2PlusRounderWithBackup_interleaved``, Redistricting code
``programs/optimization/sequential_optimizers.py``, keeps ``L2PlusRounderWithBackup.__init__``'s
0.01, though ``person_default.ini`` says 0.1; the DHC runs' ``L2PlusRounder_interleaved``
the same, ``person_US.ini`` 0.1 and ``unit_US.ini`` 0.01): docs/estimation.md, "Outer
passes"."""


def _names(
    value: Sequence[Sequence[str]], what: str, *, empty_passes: bool = False
) -> tuple[tuple[str, ...], ...]:
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise ConfigError(f"pass plan {what} must be a non-empty sequence of passes, got {value!r}")
    out = []
    for i, group in enumerate(value):
        if isinstance(group, str) or not isinstance(group, Sequence) or not (group or empty_passes):
            raise ConfigError(
                f"pass plan {what} pass {i} must be a {'' if empty_passes else 'non-empty '}"
                "sequence of query names, "
                f"got {group!r}"
            )
        names = []
        for name in group:
            if not isinstance(name, str) or not name.strip():
                raise ConfigError(f"pass plan {what} pass {i} has an invalid query name {name!r}")
            key = "*".join(part.strip() for part in name.strip().lower().split("*"))
            if key not in names:  # production's orderings repeat some names; count once
                names.append(key)
        out.append(tuple(names))
    return tuple(out)


def _outer(value: Sequence[int], n: int, what: str) -> tuple[int, ...]:
    """The outer pass of each of ``n`` passes: ``()`` is outer pass 0 for all; else one
    non-decreasing index per pass, from 0, without a gap."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigError(
            f"pass plan {what} must be a sequence of outer pass numbers, got {value!r}"
        )
    out = tuple(value) or (0,) * n
    if len(out) != n:
        raise ConfigError(f"pass plan {what} has {len(out)} entries for {n} passes")
    for i, o in enumerate(out):
        if isinstance(o, bool) or not isinstance(o, int):
            raise ConfigError(f"pass plan {what} entry {i} must be an integer, got {o!r}")
        if o != (out[i - 1] if i else 0) and o != (out[i - 1] + 1 if i else 0):
            raise ConfigError(
                f"pass plan {what} is {out}; outer passes start at 0 and each pass's is its "
                "predecessor's or the next"
            )
    return out


@dataclass(frozen=True)
class PassPlan:
    """The query ordering of one geolevel (see the module docstring for the method).

    Attributes:
        l2: per least-squares pass, the names of the queries in its objective.
        hold: per least-squares pass, the queries (possibly none) whose answers later
            passes keep within the tolerance (production's "constrain-to" ordering): the
            total, the group attribute or any measured marginal, row by row.
            ``detailed`` is never held (production skips it: "unnecessary").
        rounder: per rounding pass, the queries whose L1 distance to the rounded
            least-squares answer the pass minimises; later passes hold them exactly.
            They need not be measured, but together with ``total`` and the group
            attribute they must be nested (each refines the next coarser one), which
            is what keeps every pass a network flow.
        opt_tol_slack: persons added to the optimal tolerance of held answers.
        l2_outer: per least-squares pass, its outer pass (``()``: all in outer pass 0).
        rounder_outer: per rounding pass, its outer pass (``()``: all in outer pass 0).
            Production's ``L2PlusRounder_interleaved`` runs each outer pass whole, its
            least squares then its rounding; the queries of the outer pass's last
            rounding pass are then held *exactly*, at their rounded answers, by every
            later outer pass, while a ``hold`` reaches only the later least-squares
            passes of its own outer pass (see the module docstring).
    """

    l2: tuple[tuple[str, ...], ...]
    hold: tuple[tuple[str, ...], ...]
    rounder: tuple[tuple[str, ...], ...]
    opt_tol_slack: float = OPT_TOL_SLACK
    l2_outer: tuple[int, ...] = ()
    rounder_outer: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "l2", _names(self.l2, "l2"))
        set_(self, "hold", _names(self.hold, "hold", empty_passes=True))
        set_(self, "rounder", _names(self.rounder, "rounder"))
        if len(self.hold) != len(self.l2):
            raise ConfigError(
                f"pass plan hold has {len(self.hold)} passes but l2 has {len(self.l2)}; "
                "every least-squares pass needs its (possibly repeated) hold list"
            )
        slack = self.opt_tol_slack
        if isinstance(slack, bool) or not isinstance(slack, int | float):
            raise ConfigError(f"pass plan opt_tol_slack must be a number, got {slack!r}")
        if not math.isfinite(slack) or slack < 0:
            raise ConfigError(f"pass plan opt_tol_slack is {slack}; it must be finite and >= 0")
        set_(self, "opt_tol_slack", float(slack))
        set_(self, "l2_outer", _outer(self.l2_outer, len(self.l2), "l2_outer"))
        set_(self, "rounder_outer", _outer(self.rounder_outer, len(self.rounder), "rounder_outer"))
        if self.l2_outer[-1] != self.rounder_outer[-1]:
            raise ConfigError(
                f"pass plan l2_outer has {self.l2_outer[-1] + 1} outer passes but rounder_outer "
                f"has {self.rounder_outer[-1] + 1}; every outer pass has least squares and rounding"
            )
        for r, names in enumerate(self.rounder):
            for name in names:
                earlier = [p for p in range(r) if name in self.rounder[p]]
                if earlier:
                    raise ConfigError(
                        f"pass plan rounder query {name!r} is in passes {earlier[0]} and {r}; "
                        "a rounded answer is held after its pass, so each query is rounded once"
                    )


# The query orderings of Strategy1b_ST_CTY_TR_BG_isoTot_Ordering_dsepJune3, verbatim
# except for spelling ("hhgq * hispanic" is "hhgq*hispanic" here) and repeated names.
_ALL_BUT_TOTAL = (
    "cenrace",
    "hispanic",
    "votingage",
    "hhinstlevels",
    "hhgq",
    "votingage * hispanic",
    "hhgq",
    "hispanic * cenrace",
    "votingage * cenrace",
    "votingage * hispanic",
    "votingage * hispanic * cenrace",
    "detailed",
)
_ROUNDER = (
    "total",
    "hhgq",
    "hhgq * hispanic",
    "hhgq * hispanic * cenrace",
    "hhgq * votingage * hispanic * cenrace",
    "detailed",
)
_US = PassPlan(l2=(_ALL_BUT_TOTAL,), hold=(_ALL_BUT_TOTAL,), rounder=(_ROUNDER,))
_ISOLATED_TOTAL = PassPlan(
    l2=(("total",), _ALL_BUT_TOTAL),
    hold=(("total",), _ALL_BUT_TOTAL),
    rounder=(("total",), _ROUNDER[1:]),
)
_DEFAULT = PassPlan(
    l2=(("total", *_ALL_BUT_TOTAL),), hold=(("total", *_ALL_BUT_TOTAL),), rounder=(_ROUNDER,)
)

# dhc-lite (the dhc-lite-demo and ddp-2010 presets): one least-squares pass over every
# measured query (``bind_l2`` puts the queries a plan does not name into its last pass),
# and production's multipass-rounding idea applied to what the release publishes: the
# P1-P5 tables read hhgq, votingage, hispanic and cenrace, so those marginals (nested
# as in production's rounder) are rounded first, after the total, and the detailed
# cells last, held to them. The least-squares cells are not unique when no query sees
# every cell alone (below the State); their marginals in the measured queries are, and
# rounding the published marginals first keeps the choice among optimal cells out of
# the tables (docs/estimation.md).
_PUBLISHED = PassPlan(
    l2=(("total",),),
    hold=((),),
    rounder=(("total",), _ROUNDER[1:-1], ("detailed",)),
)

# The 2020 DHC person run (test_strategy_regular_ordering_dhcp_20220811_exp_21_1, every
# geolevel; data.schema_dhc keeps production's ordering verbatim; person_US.ini's
# seq_optimization_approach L2PlusRounder_interleaved). The ordering is two outer passes
# of one least-squares and one rounding pass each: (1) least squares of the nine
# marginal queries, rounded in four nested crosses, whose rounded answers (2) the least
# squares of ``detailed`` and its rounding hold exactly. The constrain-to name of the
# first outer pass (``relgq * age_40_groups * hispanic * cenrace * sex``) holds nothing:
# it reaches only later least-squares passes of its own outer pass, and there is none
# (``DataIndQueriesL2NPassDecomp.optimizationPassesLoop``: ``if pass_num !=
# self.pass_nums[-1]``); that cross is held exactly, rounded, as the finest of the four.
# The interleaved optimizer gives every least squares ``opt_tol_slack`` 0.01 whatever the
# configuration says (``L2PlusRounder.__init__``; only ``L2PlusRounder.run`` reads the
# option): :data:`OPT_TOL_SLACK`, though in this plan it holds nothing.

_DHCP_ORDERING = QUERY_ORDERINGS["dhcp-2020"]
_DHCP = PassPlan(
    l2=_DHCP_ORDERING["l2"],
    hold=_DHCP_ORDERING["constrain_to"],
    rounder=_DHCP_ORDERING["rounder"],
    opt_tol_slack=OPT_TOL_SLACK,
    l2_outer=(0, 1),
    rounder_outer=(0, 1),
)

# The 2020 DHC household run (test_strategy_regular_ordering_dhch_20220922_exp_iteration_23_1,
# every geolevel; unit_US.ini's seq_optimization_approach L2PlusRounder_interleaved).
# Production's ordering has three outer passes of one least-squares and one rounding
# pass each. Its first fits and rounds the unit
# histogram's tenvacgq alone and holds it; here the units are their own TopDown,
# estimated before the households and held exactly (release.dhc_units), so the
# household plan is production's second and third outer passes: (1) least squares of
# the six marginal household queries, rounded in the two nested crosses of
# detailedcoupletypemultgendetownchildsize, whose rounded answers (2) the least squares
# of the two hhage crosses and detailed, and the rounding of detailed, hold exactly.
# The constrain-to name of the second outer pass (the unmeasured 99-level
# ...multgenownchildsize) would hold nothing even if it were measured: it reaches only
# later least-squares passes of its own outer pass, and there is none.
UNIT_HISTOGRAM_QUERIES = ("tenvacgq",)
"""The queries of a DHC household ordering that read the unit histogram (its own TopDown)."""


def _households_only(passes: Sequence[Sequence[str]]) -> tuple[tuple[str, ...], ...]:
    """An ordering's passes without the unit histogram's queries (empty passes dropped)."""
    kept = (tuple(q for q in p if q not in UNIT_HISTOGRAM_QUERIES) for p in passes)
    return tuple(p for p in kept if p)


_DHCH_ORDERING = QUERY_ORDERINGS["dhch-2020"]
_DHCH = PassPlan(
    l2=_households_only(_DHCH_ORDERING["l2"]),
    hold=_households_only(_DHCH_ORDERING["constrain_to"]),
    rounder=_households_only(_DHCH_ORDERING["rounder"]),
    opt_tol_slack=OPT_TOL_SLACK,
    l2_outer=(0, 1),
    rounder_outer=(0, 1),
)

PRODUCTION_PASSES: dict[str, dict[str, PassPlan]] = {
    "pl94": {
        "root": _US,
        "us": _US,
        "state": _ISOLATED_TOTAL,
        "county": _ISOLATED_TOTAL,
        "tract": _ISOLATED_TOTAL,
        "blockgroup": _ISOLATED_TOTAL,
        "*": _DEFAULT,
    },
    "dhc-lite": {"*": _PUBLISHED},
    "dhcp-hhgq": {"*": _PUBLISHED},
    "dhcp-2020": {"*": _DHCP},
    "dhch-2020": {"*": _DHCH},
}
"""Production's query orderings: schema name -> normalised geolevel name (lower case,
no ``_`` or spaces, so production's ``Block_Group`` is ``blockgroup``) -> plan; ``"*"``
is the plan of every other geolevel (production's ``default_ordering``, used at Block).
``"root"`` is the plan of a run's top geolevel whatever its name: production's two pl94
runs solve their root in one pass without ``total`` (the US of the national run,
``Strategy1b_ST_CTY_TR_BG_isoTot_Ordering_dsepJune3``; the State of Puerto Rico's,
``Strategy1b_CTY_TR_BG_isoTot_Ordering_PR_dsepJune3``, whose ``st_ordering`` is the US
ordering: "PR has no AIAN areas ... State now has no 'total' query").
``dhcp-2020`` is the DHC person run's ordering at every geolevel (its root included),
``dhch-2020`` the DHC household run's (its unit histogram's pass, ``tenvacgq``, is the
unit TopDown of :mod:`censusdp.release.dhc_units`).
``dhc-lite`` (and the 2010 DDP's ``dhcp-hhgq``, whose rounder is not production's 2020
one) is not a production configuration: it is production's rounding idea on the tables
a dhc-lite release publishes (see ``_PUBLISHED``)."""


def _level_key(name: str) -> str:
    return name.lower().replace("_", "").replace(" ", "").replace("-", "")


def plans_for(
    schema_name: str, geolevel_names: Sequence[str], passes: str = "production"
) -> list[PassPlan | None]:
    """The pass plan of every geolevel of a run (``None``: one pass, cell-wise rounding).

    Args:
        schema_name: the person schema (``"pl94"``); schemas without production
            orderings get ``None`` everywhere.
        geolevel_names: the run's geolevels, top first (the first is the root, which
            takes the table's ``"root"`` plan when it has one).
        passes: ``"production"`` or ``"single"`` (see :data:`PASS_MODES`).

    Raises:
        ConfigError: for an unknown ``passes`` value.
    """
    if passes not in PASS_MODES:
        raise ConfigError(f"passes must be one of {PASS_MODES}, got {passes!r}")
    table = PRODUCTION_PASSES.get(schema_name) if passes == "production" else None
    if table is None:
        return [None] * len(geolevel_names)
    plans = [table.get(_level_key(n), table.get("*")) for n in geolevel_names]
    if plans and "root" in table:
        plans[0] = table["root"]
    return plans

"""Which least-squares backends ``auto`` tries on a subproblem, and in what order.

The policy is a table (:data:`AUTO_CHAIN`): each row is a condition on the subproblem's
shape (:class:`Shape`) and the backends to try, best first; the first row whose condition
holds gives the chain. After it, a single child of more than :data:`ADMM_MAX_ROOT_CELLS`
kept cells never gets the ADMM. When every backend of the chain fails, the chain runner
(:func:`~censusdp.release.topdown.solvers.least_squares.solve_l2`) takes the integer
flow closest to a non-negative least-squares point. The measurements behind each row are
in docs/estimation.md ("The solver chain").

=====================================================================================  ===================================
condition (first that holds)                                                           backends, best first
=====================================================================================  ===================================
children weighted differently per query, sparse optimum, > 64 cells                    activeset, clarabel
children weighted differently per query                                                clarabel, activeset
definite Hessian, capped totals, > 64 cells, not one large child                       clarabel, admm, activeset
every group exact, sparse optimum, > 64 cells, singular Hessian, not one large child   clarabel, activeset, admm
sparse optimum, > 64 cells, definite Hessian, not one large child                      activeset, admm, clarabel
sparse optimum, > 64 cells                                                             activeset, clarabel, admm
definite Hessian, > 64 cells, not one large child                                      admm, activeset, clarabel, interior
definite Hessian, or the root                                                          clarabel, interior, activeset, admm
singular Hessian below the root, > 500,000 variables                                   interior, clarabel, activeset, admm
singular Hessian below the root                                                        clarabel, interior, activeset, admm
=====================================================================================  ===================================

A subproblem with child groups (a state's AIAN and non-AIAN parts under the US, their
totals summing to the state's: ``Subproblem.child_group``) gets the program's solvers
alone (PIQP then Clarabel; ``piqp`` or ``clarabel`` alone when asked for, Clarabel for
any other name): the other backends do not hold the group rows.

Wherever Clarabel is in a chain, a family of at most :data:`PIQP_MAX_VARIABLES`
variables (children x kept cells) tries PIQP on the same program first
(:func:`program_backends`; :mod:`~censusdp.release.topdown.solvers.piqp_qp`), and
Clarabel when PIQP does not solve it.

A method asked for by name runs alone, except on children weighted differently per
query (which the ADMM and the interior point cannot weigh): there only ``activeset``,
``clarabel`` or ``piqp`` run alone, any other name gets the first two rows. ``piqp``
asked for by name is Clarabel on a family of more than :data:`PIQP_MAX_VARIABLES`
variables (why: there).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from censusdp.release.topdown.problem import Subproblem
from censusdp.release.topdown.solvers.active_set import ActiveSetBackend
from censusdp.release.topdown.solvers.admm import DENSE_MAX, AdmmBackend, child_scale
from censusdp.release.topdown.solvers.base import Backend, Compressed
from censusdp.release.topdown.solvers.clarabel_qp import ClarabelBackend
from censusdp.release.topdown.solvers.interior import InteriorBackend
from censusdp.release.topdown.solvers.piqp_qp import PiqpBackend

__all__ = [
    "ADMM_MAX_ROOT_CELLS",
    "AUTO_CHAIN",
    "BACKENDS",
    "FEW_CELLS",
    "HELD_TOTAL_BAND",
    "INTERIOR_MIN_VARIABLES",
    "METHODS",
    "PIQP_MAX_VARIABLES",
    "Row",
    "Shape",
    "backend_order",
    "program_backends",
]

BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        ActiveSetBackend(),
        InteriorBackend(),
        AdmmBackend(),
        ClarabelBackend(),
        PiqpBackend(),
    )
}
"""Every least-squares backend by name."""
METHODS = ("auto", "activeset", "interior", "admm", "clarabel", "piqp")
"""What ``--method`` accepts: ``auto`` (the chain of :data:`AUTO_CHAIN`) or one backend."""

FEW_CELLS = 64
"""Families of at most this many kept cells count as small (``> 64 cells`` in the table)."""
ADMM_MAX_ROOT_CELLS = 50_000
"""A single child with more kept cells never gets the ADMM (a dhc-lite root)."""
HELD_TOTAL_BAND = 0.5
"""A child total's band (upper less lower bound) of at most this many persons is a held
total, not a cap (:attr:`Shape.capped_totals`): the second pass of production's tract
families holds each total within ``0.1 + v`` persons of the first pass's (a band of
about 0.2), where a household cap ``[0, units]`` is at least one. Sent to Clarabel as
capped, production fidelity's widest family (Los Angeles County's 2,334 tracts) went to
the backend that does not finish it in 5 CPU minutes; the ADMM takes it whole
(docs/scaling.md)."""
PIQP_MAX_VARIABLES = 350_000
"""Families of at most this many variables (children x kept cells) try PIQP before
Clarabel: 1.3 to 1.4 times faster on California's block and block-group families, 1.2
to 3.1 times on its tract families of 5 to 51 tracts (up to 13,000 variables), 1.16 at
151 tracts (58,000), even at 199 (82,000), 1.8 at Alameda County's 360 (144,000: 16 CPU
s against 29); whole tasks of its five tract families from 169,000 to 313,000 variables
(Santa Clara, San Bernardino, Riverside, Orange, San Diego's 627 tracts) 145 CPU s
against 230 (1.2 to 2.6 times). On Los Angeles' 2,334 tracts (1.5 million) its
factorisation had not finished in 20 CPU minutes against Clarabel's 6; families between
313,000 and that were not measured
(:mod:`~censusdp.release.topdown.solvers.piqp_qp`). Larger families never reach PIQP,
not even when it is asked for by name (:func:`backend_order`): on full Vermont's largest
held household family (599,415 variables) PIQP 0.7.0's setup kills the process (SIGSEGV,
no error a caller could catch)."""
INTERIOR_MIN_VARIABLES = 500_000
"""Dense families with a singular Hessian and more variables (children x kept cells)
than this try the interior point before Clarabel."""


@dataclass(frozen=True)
class Shape:
    """What the chain policy reads of a subproblem.

    Attributes:
        per_child_weights: the children are weighted differently from query to query
            (a spine release's per-geounit budgets that are not one multiple of the query
            weights), which only the active set and Clarabel can weigh.
        sparse: the optimum is sparse: no parent, or a parent holding at most a quarter
            of children x kept cells persons.
        many_cells: more than :data:`FEW_CELLS` kept cells.
        definite: a weighted query sees every kept cell alone (a ``detailed`` query): the
            Hessian is definite.
        one_large_child: a single child with more kept cells than the ADMM factors
            densely (``admm.DENSE_MAX``): the root, nothing to share across children.
        root: no parent.
        variables: children x kept cells.
        huge_single_child: a single child of more than :data:`ADMM_MAX_ROOT_CELLS` cells.
        capped_totals: some child's total has a finite upper bound more than
            :data:`HELD_TOTAL_BAND` above its lower bound (a household run: each
            geounit's households in ``[0, its housing units]``), an inequality on every
            child that may bind or not. A total held by an earlier pass (production's
            passes: within ``0.1`` person and the pass's violation) is not a cap.
        exact_groups: every child's every group with a kept cell has its lower bound
            equal to its upper bound (a DHC person run held to a P.L. 94 release's
            2,016-cell ``pl94`` cross).
    """

    per_child_weights: bool
    sparse: bool
    many_cells: bool
    definite: bool
    one_large_child: bool
    root: bool
    variables: int
    huge_single_child: bool
    capped_totals: bool = False
    exact_groups: bool = False

    @classmethod
    def of(cls, sub: Subproblem, comp: Compressed) -> Shape:
        """The shape of ``sub`` (its queries compressed to ``comp``)."""
        return cls(
            per_child_weights=sub.unit_weights is not None and child_scale(comp) is None,
            sparse=sub.parent is None or 4 * int(sub.parent.sum()) <= sub.k * sub.c,
            many_cells=sub.c > FEW_CELLS,
            definite=comp.sees_every_cell(),
            one_large_child=sub.k == 1 and sub.c > DENSE_MAX,
            root=sub.parent is None,
            variables=sub.k * sub.c,
            huge_single_child=sub.k == 1 and sub.c > ADMM_MAX_ROOT_CELLS,
            capped_totals=bool(
                (
                    np.isfinite(sub.total_upper)
                    & (sub.total_upper > sub.total_lower + HELD_TOTAL_BAND)
                ).any()
            ),
            exact_groups=_every_group_exact(sub),
        )


def _every_group_exact(sub: Subproblem) -> bool:
    """Whether every child's groups with a kept cell have equal lower and upper bounds."""
    kept = np.bincount(sub.groups, minlength=sub.G) > 0
    return bool(kept.any() and (sub.group_lower[:, kept] == sub.group_upper[:, kept]).all())


@dataclass(frozen=True)
class Row:
    """One row of the chain table: when it applies, and the backends it tries."""

    when: str
    applies: Callable[[Shape], bool]
    backends: tuple[str, ...]


AUTO_CHAIN: tuple[Row, ...] = (
    Row(
        "children weighted differently per query, sparse optimum, > 64 cells",
        lambda s: s.per_child_weights and s.sparse and s.many_cells,
        ("activeset", "clarabel"),
    ),
    Row(
        "children weighted differently per query",
        lambda s: s.per_child_weights,
        ("clarabel", "activeset"),
    ),
    Row(
        # the household run's families (households under housing units): the active set
        # cycles on which of a block group's hundreds of capped totals bind (30 updates,
        # then the ADMM: 27 to 109 CPU s a block group of generated Vermont x0.03);
        # Clarabel's interior point takes 0.02 to 2.8 s on the same families, and 15.6 s
        # for the ADMM's 45 on full Vermont's County family (docs/estimation.md)
        "definite Hessian, capped totals, > 64 cells, not one large child",
        lambda s: s.definite and s.capped_totals and s.many_cells and not s.one_large_child,
        ("clarabel", "admm", "activeset"),
    ),
    Row(
        # a DHC person run held to a P.L. 94 release (every pl94 group exact): the active
        # set's equalities never settled on 1% Vermont's 22 such block, block-group and
        # tract-subset families (30 updates, then Clarabel: 24.2 CPU s in all, Clarabel
        # alone 13.5; docs/estimation.md)
        "every group exact, sparse optimum, > 64 cells, singular Hessian, not one large child",
        lambda s: (
            s.exact_groups
            and s.sparse
            and s.many_cells
            and not s.definite
            and not s.one_large_child
        ),
        ("clarabel", "activeset", "admm"),
    ),
    Row(
        "sparse optimum, > 64 cells, definite Hessian, not one large child",
        lambda s: s.sparse and s.many_cells and s.definite and not s.one_large_child,
        ("activeset", "admm", "clarabel"),
    ),
    Row(
        "sparse optimum, > 64 cells",
        lambda s: s.sparse and s.many_cells,
        ("activeset", "clarabel", "admm"),
    ),
    Row(
        "definite Hessian, > 64 cells, not one large child",
        lambda s: s.definite and s.many_cells and not s.one_large_child,
        ("admm", "activeset", "clarabel", "interior"),
    ),
    Row(
        "definite Hessian, or the root",
        lambda s: s.definite or s.root,
        ("clarabel", "interior", "activeset", "admm"),
    ),
    Row(
        "singular Hessian below the root, > 500,000 variables",
        lambda s: s.variables > INTERIOR_MIN_VARIABLES,
        ("interior", "clarabel", "activeset", "admm"),
    ),
    Row(
        "singular Hessian below the root",
        lambda s: True,
        ("clarabel", "interior", "activeset", "admm"),
    ),
)
"""The ``auto`` policy, first matching row wins (see the module docstring)."""


def _piqp_fits(sub: Subproblem) -> bool:
    """Whether PIQP may be given ``sub``: at most :data:`PIQP_MAX_VARIABLES` variables."""
    return sub.k * sub.c <= PIQP_MAX_VARIABLES


def program_backends(sub: Subproblem) -> tuple[str, ...]:
    """The backends that solve the least-squares program of ``sub``
    (:func:`~censusdp.release.topdown.solvers.clarabel_qp.build_program`), best first:
    PIQP then Clarabel for a family of at most :data:`PIQP_MAX_VARIABLES` variables,
    Clarabel alone above."""
    if _piqp_fits(sub):
        return ("piqp", "clarabel")
    return ("clarabel",)


def _with_piqp(sub: Subproblem, backends: tuple[str, ...]) -> tuple[str, ...]:
    """``backends`` with Clarabel's place taken by :func:`program_backends`."""
    out: list[str] = []
    for b in backends:
        out.extend(program_backends(sub) if b == "clarabel" else (b,))
    return tuple(out)


def backend_order(sub: Subproblem, comp: Compressed, method: str) -> tuple[str, ...]:
    """The backends to try on ``sub``, best first, before the NNLS-and-flow fallback."""
    if method == "piqp" and not _piqp_fits(sub):
        method = "clarabel"  # PIQP only within its limit, even by name (PIQP_MAX_VARIABLES)
    if sub.child_group is not None:
        # grouped child totals (the parts of a state under the US): only the program's
        # solvers hold the equality rows; the family is small (at most 102 children)
        if method == "auto":
            return program_backends(sub)
        return ("piqp",) if method == "piqp" else ("clarabel",)
    shape = Shape.of(sub, comp)
    if method != "auto" and not (
        shape.per_child_weights and method not in ("activeset", "clarabel", "piqp")
    ):
        return (method,)
    row = next(r for r in AUTO_CHAIN if r.applies(shape))
    if shape.huge_single_child:
        return _with_piqp(sub, tuple(b for b in row.backends if b != "admm"))
    return _with_piqp(sub, row.backends)

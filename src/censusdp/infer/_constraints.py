"""The exact linear facts the GLS enters (:class:`Constraints`, with
:class:`SiblingGroups`), and the Gaussian conditioning that enters them
(:func:`condition_total`, :func:`condition_zero`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from censusdp.data.geography import Hierarchy
from censusdp.errors import InputError
from censusdp.infer._algebra import Layout

__all__ = [
    "Constraints",
    "SiblingGroups",
    "condition_total",
    "condition_zero",
    "single_child_totals",
]


@dataclass(frozen=True, eq=False)
class SiblingGroups:
    """Exact totals of groups of siblings: ``sum_{c in g} 1'x_c = totals[g]``.

    A state of two parts (its AIAN and non-AIAN parts on the production spine, children
    of the US in an input of several states) has an invariant total on the union of its
    parts, not on either part: production's ``addGroupedChildTotalConstraint``. The
    members of a group need not be next to each other, but they share one parent.

    Attributes:
        level: the level of the grouped units (below the root, above the bottom).
        group: ``(units of level,)`` each unit's group, ``-1`` for none.
        totals: ``(groups,)`` each group's exact total.
    """

    level: int
    group: np.ndarray
    totals: np.ndarray

    def __post_init__(self) -> None:
        g = np.asarray(self.group)
        t = np.asarray(self.totals, dtype=np.float64)
        if g.ndim != 1 or g.dtype.kind not in "iu":
            raise InputError(f"sibling groups must be a 1-D integer array, got {g.dtype} {g.shape}")
        if t.ndim != 1 or not np.isfinite(t).all():
            raise InputError("sibling group totals must be a 1-D array of finite numbers")
        if g.size and (g.max() >= t.size or g.min() < -1):
            raise InputError(
                f"sibling groups are numbered -1 to {t.size - 1}, got {g.min()} to {g.max()}"
            )
        if t.size and (np.bincount(g[g >= 0], minlength=t.size) == 0).any():
            raise InputError("every sibling group needs a member")

    @property
    def n(self) -> int:
        """Number of groups."""
        return int(np.asarray(self.totals).size)


@dataclass(frozen=True, eq=False)
class Constraints:
    """Exact linear facts entered into the GLS.

    Attributes:
        zero: ``(bottom units, d)``: general coordinates known to be zero at each
            bottom unit (all simple cells of that combination), or ``None``.
        totals: ``level -> (units,)`` exact total of every unit of that level (``nan``:
            not exact).
        groups: exact totals of groups of siblings (:class:`SiblingGroups`), or ``None``.
    """

    zero: np.ndarray | None = None
    totals: dict[int, np.ndarray] | None = None
    groups: SiblingGroups | None = None

    def __post_init__(self) -> None:
        if self.zero is not None:
            z = np.asarray(self.zero)
            if z.ndim != 2 or z.dtype != bool:
                raise InputError(
                    f"zero constraints must be a 2-D boolean array (units x d), got "
                    f"{z.dtype} of shape {z.shape}"
                )
        for level, tot in (self.totals or {}).items():
            t = np.asarray(tot, dtype=np.float64)
            if t.ndim != 1 or np.isinf(t).any():
                raise InputError(
                    f"exact totals of level {level} must be a 1-D array of finite numbers "
                    "(nan: not exact)"
                )


def single_child_totals(
    hierarchy: Hierarchy, totals: dict[int, np.ndarray]
) -> dict[int, np.ndarray]:
    """``totals`` with every exact total also given to the parent of a single child.

    A unit with one child holds the same people, so it has the child's exact total
    (``nan`` where a level's total is unknown). This keeps an invariant exact when the
    child was not measured (a bypassed spine geounit), whose estimate is its parent's.
    """
    out = {lv: np.asarray(t, dtype=np.float64) for lv, t in totals.items()}
    for level in range(hierarchy.n_levels - 1, 0, -1):
        if level not in out:
            continue
        ptr = hierarchy.child_ptr[level - 1]
        single = np.flatnonzero(np.diff(ptr) == 1)
        child = out[level][ptr[single]]
        single, child = single[np.isfinite(child)], child[np.isfinite(child)]
        if single.size == 0:
            continue
        parent = out.get(level - 1)
        if parent is None:
            parent = np.full(hierarchy.n_units(level - 1), np.nan)
        else:
            parent = parent.copy()
        parent[single] = np.where(np.isfinite(parent[single]), parent[single], child)
        out[level - 1] = parent
    return out


def condition_total(
    layout: Layout, x: np.ndarray, table: np.ndarray, index: np.ndarray, totals: np.ndarray
) -> np.ndarray:
    """Condition on ``1'x = T`` exactly; returns the new table (``x`` is updated in place).

    ``P 1 = (P_0 1_d) (x) 1``, so only block 0 changes:
    ``P_0 <- P_0 - P_0 1 1' P_0 / (1' P_0 1)``, and
    ``x <- x + (P_0 1_d) (T - 1'x) / (1' P_0 1_d prod_j n_j)``.
    Entries whose total is already exact (``1'P_0 1 = 0``) are left unchanged.
    """
    ones = np.ones(layout.d)
    p1 = table[:, 0] @ ones  # (K, d)
    q = p1 @ ones  # (K,)
    scale = np.maximum(np.abs(table[:, 0]).max(axis=(1, 2)), 1e-300)
    ok = q > 1e-13 * scale * layout.d
    new = table.copy()
    new[ok, 0] -= np.einsum("ki,kj->kij", p1[ok], p1[ok]) / q[ok, None, None]
    new[:, 0] = 0.5 * (new[:, 0] + np.swapaxes(new[:, 0], -1, -2))
    nsimple = float(np.prod(layout.sizes)) if layout.m else 1.0
    resid = totals - x.reshape(x.shape[0], -1).sum(axis=1)
    gain = np.where(ok[index], 1.0 / np.where(ok[index], q[index], 1.0), 0.0) / nsimple
    shift = p1[index] * (resid * gain)[:, None]
    x += shift.reshape((x.shape[0], layout.d) + (1,) * layout.m)
    return new


def condition_zero(
    layout: Layout, cov: np.ndarray, zero: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Condition a covariance on the general coordinates ``zero`` being exactly 0.

    Returns ``(R, P)``: the operator that maps an unconditioned mean to the conditioned
    one (``x <- x - P E'(E P E')^-1 E x`` in every block) and the conditioned covariance.
    """
    d = layout.d
    z = np.flatnonzero(zero)
    eye = np.broadcast_to(np.eye(d), cov.shape).copy()
    if z.size == 0:
        return eye, cov.copy()
    keep = np.flatnonzero(~zero)
    r = np.zeros_like(cov)
    p = np.zeros_like(cov)
    if keep.size:
        pzz = cov[:, z][:, :, z]
        pkz = cov[:, keep][:, :, z]
        gain = np.swapaxes(np.linalg.solve(pzz, np.swapaxes(pkz, -1, -2)), -1, -2)  # (B, k, z)
        pk = cov[:, keep][:, :, keep] - gain @ np.swapaxes(pkz, -1, -2)
        p[np.ix_(np.arange(cov.shape[0]), keep, keep)] = 0.5 * (pk + np.swapaxes(pk, -1, -2))
        r[np.ix_(np.arange(cov.shape[0]), keep, keep)] = np.eye(keep.size)
        r[np.ix_(np.arange(cov.shape[0]), keep, z)] = -gain
    return r, p

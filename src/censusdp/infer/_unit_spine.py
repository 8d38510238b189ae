"""The unit run's GLS, made on its own spine, seen on the persons' geounits.

A spine release measures the unit run on its own spine (the persons' spine without
group-quarters types as block-group entities, :func:`censusdp.release.spine.unit_rules`).
Its state parts, counties, tracts and blocks are the persons' geounits (the same sets of
blocks); its block groups may differ. ``infer`` reports one row per persons' geounit, so
each unit line there is the unit GLS of the same set of blocks: the unit geounit's own
estimate where one holds exactly those blocks, otherwise the sum of the unit GLS's block
estimates with its variance from the unit tree's factors
(:func:`censusdp.infer.tree_cov.partition_variances`), which accounts for their
covariances.
"""

from __future__ import annotations

import numpy as np

from censusdp.data.geography import Hierarchy
from censusdp.infer._lines import LineSet
from censusdp.infer.tree_cov import TreeFactors, partition_variances

__all__ = ["UnitSpine", "rows_on_persons"]


class UnitSpine:
    """The unit run's hierarchy and how its blocks sit in the persons' block order.

    Args:
        hierarchy: the unit run's estimation hierarchy.
        order: unit block ``i`` is persons' block ``order[i]``
            (:meth:`censusdp.release.spine.ReleaseGeography.unit_order`).
    """

    def __init__(self, hierarchy: Hierarchy, order: np.ndarray) -> None:
        self.hierarchy = hierarchy
        self.order = np.asarray(order, dtype=np.int64)
        self.inverse = np.argsort(self.order)

    def target(self, target: np.ndarray) -> np.ndarray:
        """A persons' block target (per persons' block) in the unit run's block order."""
        return np.asarray(target, dtype=np.int64)[self.order]


def rows_on_persons(
    rows: dict[int, tuple[np.ndarray, np.ndarray]],
    persons: Hierarchy,
    units: UnitSpine,
    factors: TreeFactors | None,
    lines: LineSet | None,
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """The unit GLS's ``(estimate, sd)`` rows per level, on the persons' geounits.

    ``rows`` are per level of the unit hierarchy (its geounits' order); ``factors`` and
    ``lines`` those of its tree (``None``: the lines are exact, sd 0).
    """
    uh, bottom = units.hierarchy, persons.n_levels - 1
    block_est = rows[bottom][0][units.inverse]
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {
        bottom: (block_est, rows[bottom][1][units.inverse])
    }
    for level in range(bottom):
        p_of = persons.ancestor_index(level)  # per persons' block
        u_of = uh.ancestor_index(level)[units.inverse]  # per persons' block
        n = persons.n_units(level)
        first = np.full(n, -1, dtype=np.int64)
        first[p_of[::-1]] = u_of[::-1]  # the unit geounit of one of its blocks
        # the same geounit: all its blocks in one unit geounit, which has no other block
        uniform = np.ones(n, dtype=bool)
        np.logical_and.at(uniform, p_of, u_of == first[p_of])
        sizes_p = np.bincount(p_of, minlength=n)
        sizes_u = np.bincount(u_of, minlength=uh.n_units(level))
        same = uniform & (sizes_p == sizes_u[first])
        est = np.zeros((n, rows[level][0].shape[1]))
        sd = np.zeros_like(est)
        est[same] = rows[level][0][first[same]]
        sd[same] = rows[level][1][first[same]]
        other = np.flatnonzero(~same)
        if other.size:
            np.add.at(est, p_of, np.where(same[p_of][:, None], 0.0, block_est))
            if factors is not None and lines is not None:
                var = partition_variances(factors, uh, lines, units.target(p_of), n)
                sd[other] = np.sqrt(np.maximum(var[other], 0.0))
        out[level] = (est, sd)
    return out

"""Small synthetic hierarchies, schemas and measurements for the GLS tests."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from censusdp.data.geography import GeoLevels, Hierarchy
from censusdp.data.measurements import MeasuredQuery, MeasurementSet, measured_rows
from censusdp.data.queries import make_query
from censusdp.data.schema import Attribute, Recode, Schema, StructuralZero

LEVELS4 = GeoLevels.from_pairs([("US", 0), ("State", 2), ("County", 5), ("Block", 16)])


def _ident(name: str, n: int) -> Attribute:
    return Attribute(
        name, tuple(f"{name}{i}" for i in range(n)), name, tuple(range(n)), 0, name, tuple(range(n))
    )


def toy_schema(races: int = 3) -> Schema:
    """HHGQ (3) x VOTINGAGE (2) x HISPANIC (2) x CENRACE (races), minors barred from hhgq 1."""
    return Schema(
        name=f"toy{races}",
        attributes=(
            _ident("hhgq", 3),
            _ident("votingage", 2),
            _ident("hispanic", 2),
            _ident("cenrace", races),
        ),
        recodes=(Recode("hhinst", "hhgq", ("hh", "gq"), (0, 1, 1)),),
        structural_zeros=(StructuralZero("no_minors_in_1", (("hhgq", (1,)), ("votingage", (0,)))),),
    )


TOY_QUERIES = ("total", "hhinst", "votingage*hispanic", "hispanic*cenrace", "detailed")


def tree(fanouts: tuple[int, ...], levels: GeoLevels = LEVELS4) -> Hierarchy:
    """A hierarchy with the given fan-out below each level (root first)."""
    codes = [""]
    for li, f in enumerate(fanouts):
        width = levels[li + 1].length - levels[li].length
        codes = [c + str(k + 1).zfill(width) for c in codes for k in range(f)]
    return Hierarchy.from_blocks(np.array(codes), levels)


def truth(
    schema: Schema, hierarchy: Hierarchy, rng: np.random.Generator, mean: float = 3.0
) -> sp.csr_matrix:
    """Random block histograms (Poisson counts, structural zeros empty)."""
    nb = hierarchy.blocks.size
    x = rng.poisson(mean, (nb, schema.size)).astype(np.int64)
    x[:, schema.structural_zero_mask] = 0
    return sp.csr_matrix(x)


def measure_gaussian(
    schema: Schema,
    hierarchy: Hierarchy,
    block_hist: sp.csr_matrix,
    plan: dict[str, dict[str, float]],
    rng: np.random.Generator,
    discrete: bool = False,
) -> MeasurementSet:
    """Noisy answers ``q(x) + N(0, v)`` (rounded when ``discrete``) for ``plan[level][query] = v``."""
    levels = hierarchy.aggregate(block_hist)
    out = MeasurementSet(schema, hierarchy.geolevels, hierarchy.geocodes)
    for li, lv in enumerate(hierarchy.geolevels.levels):
        for qname, v in plan.get(lv.name, {}).items():
            q = make_query(schema, qname)
            rows = measured_rows(schema, q)
            exact = np.asarray(q.answer_many(levels[li]).todense())[:, rows].astype(np.float64)
            noise = rng.normal(0.0, np.sqrt(v), exact.shape)
            vals = exact + (np.rint(noise) if discrete else noise)
            out.queries[(lv.name, q.name)] = MeasuredQuery(
                lv.name, q.name, rows, vals, float(v), "Gaussian"
            )
    return out

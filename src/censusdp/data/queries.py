"""Queries: linear functions of a detailed histogram, as sparse operators.

A :class:`Query` is built from a schema and a name: ``"total"``, ``"detailed"`` or a
``*``-separated list of attribute or recode names (``"votingage*hispanic*cenrace"``).
Every such query is a *marginal*: each cell contributes to exactly one answer row, so
the operator is stored as ``row_of_cell`` (one int per cell) and applying it to many
histograms at once is a sparse product or a ``bincount``, never a dense
(units x cells) array.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from censusdp.data.schema import Schema, get_schema, unit_schema_of
from censusdp.errors import SchemaError

__all__ = ["Query", "make_query", "run_query"]


@dataclass(frozen=True, eq=False)
class Query:
    """A marginal query over a schema.

    Attributes:
        name: canonical name (``"total"``, ``"detailed"`` or ``"a*b*c"``).
        variables: the attribute/recode names it groups by, in order.
        shape: number of levels of each variable; answers are row-major over it.
        row_of_cell: for every schema cell, the answer row it adds to.
    """

    name: str
    variables: tuple[str, ...]
    shape: tuple[int, ...]
    row_of_cell: np.ndarray

    @property
    def n_rows(self) -> int:
        """Number of answers."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def n_cells(self) -> int:
        """Number of schema cells it reads."""
        return int(self.row_of_cell.size)

    @cached_property
    def matrix(self) -> sp.csr_matrix:
        """The (rows x cells) 0/1 operator."""
        n = self.n_cells
        return sp.csr_matrix(
            (np.ones(n, dtype=np.float64), (self.row_of_cell, np.arange(n))),
            shape=(self.n_rows, n),
        )

    def answer(self, histogram: np.ndarray) -> np.ndarray:
        """Answers for one dense histogram (length ``n_cells``)."""
        histogram = np.asarray(histogram)
        if histogram.shape != (self.n_cells,):
            raise SchemaError(
                f"query {self.name!r} expects a histogram of {self.n_cells} cells, "
                f"got shape {histogram.shape}"
            )
        return np.bincount(self.row_of_cell, weights=histogram, minlength=self.n_rows).astype(
            np.result_type(histogram.dtype, np.int64)
            if np.issubdtype(histogram.dtype, np.integer)
            else np.float64
        )

    def answer_many(self, histograms: sp.spmatrix | np.ndarray) -> sp.csr_matrix | np.ndarray:
        """Answers for many histograms at once (units x cells -> units x rows).

        A sparse input gives a sparse output; a dense input a dense output.
        """
        if sp.issparse(histograms):
            return sp.csr_matrix(histograms @ self.matrix.T)
        histograms = np.asarray(histograms)
        return np.asarray(histograms @ self.matrix.T)

    def row_labels(self, schema: Schema) -> list[str]:
        """A readable label for each answer row."""
        if not self.variables:
            return ["total"]
        labels = [schema.variable_levels(v) for v in self.variables]
        out = []
        for idx in np.ndindex(*self.shape):
            out.append(" | ".join(lab[i] for lab, i in zip(labels, idx, strict=True)))
        return out


def make_query(schema: Schema, name: str) -> Query:
    """Build a query from its name.

    Args:
        schema: the schema whose cells the query reads.
        name: ``"total"``, ``"detailed"``, or attribute/recode names joined by ``*``
            (case-insensitive, e.g. ``"HHGQ*VOTINGAGE"``).

    Raises:
        SchemaError: for an unknown name or a repeated variable.
    """
    key = name.strip().lower()
    if key == "total":
        return Query("total", (), (), np.zeros(schema.size, dtype=np.int64))
    if key == "detailed":
        variables = schema.attribute_names
    else:
        variables = tuple(v.strip() for v in key.split("*"))
        if any(not v for v in variables):
            raise SchemaError(f"query name {name!r} has an empty part")
        if len(set(variables)) != len(variables):
            raise SchemaError(f"query {name!r} repeats a variable")
    levels = [schema.cell_levels(v) for v in variables]  # raises for unknown names
    shape = tuple(schema.variable(v).size for v in variables)
    rows = np.ravel_multi_index(tuple(levels), shape).astype(np.int64)
    canonical = "detailed" if key == "detailed" else "*".join(variables)
    return Query(canonical, variables, shape, rows)


def run_query(schema_name: str, name: str) -> tuple[Schema, Query]:
    """A query a run on schema ``schema_name`` measures, and the schema it reads.

    A query of the schema, or, for a schema measured beside a unit histogram in one run
    (production's DHC household run measures ``tenvacgq`` beside its household histogram:
    :func:`censusdp.data.schema.unit_schema_of`), a query of that histogram.

    Raises:
        SchemaError: for an unknown schema, or a query valid on neither histogram (the
            message is the run schema's own).
    """
    schema = get_schema(schema_name)
    try:
        return schema, make_query(schema, name)
    except SchemaError as exc:
        unit = unit_schema_of(schema_name)
        if unit is None:
            raise
        try:
            return unit, make_query(unit, name)
        except SchemaError:
            raise exc from None

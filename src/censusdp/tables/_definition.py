"""A table's definition: its lines and the sparse operator from histogram cells to lines
(:class:`TableDefinition`), and the builder the table modules define them with."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from censusdp.data.schema import CENRACE_LEVELS, CENRACE_RACES

__all__ = ["SEP", "Builder", "TableDefinition"]

SEP = "!!"
_SIZE_WORDS = ("one", "two", "three", "four", "five", "six")


@dataclass(frozen=True, eq=False)
class TableDefinition:
    """One table: its lines and the sparse operator from histogram cells to lines.

    Attributes:
        name: ``"P1"`` ... ``"H1"``, ``"P12"`` ...
        title: the Census table title.
        universe: what the table counts (``"Total population"`` ...).
        variables: Census variable name of each line (``"P1_001N"`` ...).
        labels: the ``!!``-path label of each line.
        leaves: indices of the lines that partition the universe (no line is the sum of
            others); their sum over a geounit is the table total. Used for distances.
        matrix: ``(n_cells, n_lines)`` int64 CSR 0/1 operator; ``hist @ matrix``
            tabulates.
        source: ``"persons"`` (cells of the ``pl94`` schema) or ``"units"``
            (:data:`censusdp.data.histograms.UNIT_CELLS` cells) or ``"households"``
            (cells of the ``household2010`` schema, :mod:`censusdp.tables.households`), or
            for the DHC tables (:mod:`censusdp.tables.dhc`) ``"dhc_persons"``
            (``relgq x sex x age x hispanic x race`` cells), ``"dhc_households"``
            (:data:`censusdp.tables.dhc.DHC_HOUSEHOLD_CELLS`) or ``"dhc_units"``
            (``tenvacgq``).
    """

    name: str
    title: str
    universe: str
    variables: tuple[str, ...]
    labels: tuple[str, ...]
    leaves: tuple[int, ...]
    matrix: sp.csr_matrix
    source: str

    @property
    def n_lines(self) -> int:
        """Number of lines."""
        return len(self.variables)


class Builder:
    """Accumulates (label, cell mask, is_leaf) lines of one table."""

    def __init__(self, n_cells: int) -> None:
        self.n_cells = n_cells
        self.labels: list[str] = []
        self.masks: list[np.ndarray] = []
        self.leaves: list[int] = []

    def add(self, label: str, mask: np.ndarray, leaf: bool = False) -> None:
        if leaf:
            self.leaves.append(len(self.labels))
        self.labels.append(label)
        self.masks.append(np.asarray(mask, dtype=bool))

    def race_breakdown(self, prefix: str, universe: np.ndarray, cenrace: np.ndarray) -> None:
        """The 70 lines of P1 below its Total, restricted to ``universe`` cells."""
        n_races = np.asarray([len(r) for r in CENRACE_RACES], dtype=np.int64)[cenrace]
        one = f"{prefix}Population of one race:"
        self.add(one, universe & (n_races == 1))
        for level in range(6):
            self.add(f"{one}{SEP}{CENRACE_LEVELS[level]}", universe & (cenrace == level), True)
        multi = f"{prefix}Population of two or more races:"
        self.add(multi, universe & (n_races >= 2))
        for size in range(2, 7):
            head = f"{multi}{SEP}Population of {_SIZE_WORDS[size - 1]} races:"
            self.add(head, universe & (n_races == size))
            for level, races in enumerate(CENRACE_RACES):
                if len(races) == size:
                    self.add(
                        f"{head}{SEP}{CENRACE_LEVELS[level]}", universe & (cenrace == level), True
                    )

    def build(self, name: str, title: str, universe: str, source: str) -> TableDefinition:
        masks = np.stack(self.masks, axis=1)  # cells x lines
        cells, lines = np.nonzero(masks)
        matrix = sp.csr_matrix(
            (np.ones(cells.size, dtype=np.int64), (cells, lines)),
            shape=(self.n_cells, len(self.labels)),
        )
        variables = tuple(f"{name}_{i + 1:03d}N" for i in range(len(self.labels)))
        return TableDefinition(
            name=name,
            title=title,
            universe=universe,
            variables=variables,
            labels=tuple(self.labels),
            leaves=tuple(self.leaves),
            matrix=matrix,
            source=source,
        )

"""The writer of ``infer``'s long forms (``margins.*``, ``places.*``, ``districts.*``),
table by table, for :mod:`censusdp.infer.release`."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from censusdp.io.atomic import atomic_path

__all__ = ["LongWriter"]


class LongWriter:
    """``NAME.parquet`` and/or ``NAME.csv`` written table by table (atomic files entered
    on ``stack``: removed unless the stack closes without an error)."""

    def __init__(self, stack: ExitStack, out_dir: Path, name: str, formats: tuple[str, ...]):
        self.paths = [out_dir / f"{name}.{f}" for f in formats]
        self.formats = formats
        self.rows = 0
        self._tmp = [stack.enter_context(atomic_path(p)) for p in self.paths]
        self._writers: list[Any] = []
        stack.callback(self._close)

    def write(self, table: pa.Table, csv: bool = True) -> None:
        """Append ``table`` (to the CSV file too unless ``csv`` is false)."""
        if not self._writers:
            for fmt, tmp in zip(self.formats, self._tmp, strict=True):
                if fmt == "parquet":
                    self._writers.append(pq.ParquetWriter(tmp, table.schema, compression="zstd"))
                else:
                    self._writers.append(pcsv.CSVWriter(str(tmp), table.schema))
        for fmt, w in zip(self.formats, self._writers, strict=True):
            if csv or fmt != "csv":
                w.write_table(table)
        self.rows += table.num_rows

    def _close(self) -> None:
        for w in self._writers:
            w.close()

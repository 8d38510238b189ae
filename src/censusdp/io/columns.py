"""Reading a Parquet file into NumPy columns (released files, not the validated CEF)."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from censusdp.errors import InputError

__all__ = ["dictionary_strings", "read_columns"]


def read_columns(
    path: str | os.PathLike[str], columns: list[str] | None = None
) -> dict[str, np.ndarray]:
    """Every (or the named) column of a Parquet file as a NumPy array.

    Dictionary-encoded columns are decoded; ``geocode`` comes back as fixed-width
    16-character strings.

    Raises:
        InputError: naming the file when it is missing or not readable Parquet.
    """
    try:
        table = pq.read_table(path, columns=columns)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"{path}: not a readable Parquet file ({exc})") from None
    out = {}
    for c in table.column_names:
        col = table.column(c)
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        out[c] = np.asarray(col.to_numpy(zero_copy_only=False))
    if "geocode" in out:
        out["geocode"] = out["geocode"].astype("U16")
    return out


def dictionary_strings(indices: np.ndarray, dictionary: np.ndarray) -> pa.Array:
    """A dictionary-encoded string column: ``dictionary[indices]`` without repeating strings."""
    return pa.DictionaryArray.from_arrays(
        pa.array(indices, pa.int32()), pa.array(dictionary.astype(object), pa.string())
    )

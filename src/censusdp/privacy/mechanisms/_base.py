"""Shared pieces of the mechanisms: the check of the counts they are given."""

from __future__ import annotations

import numpy as np

from censusdp.errors import CensusDPError

__all__ = ["integer_values"]


def integer_values(values: object, what: str = "values") -> np.ndarray:
    """The true counts passed to ``release``, as ``int64`` (any shape).

    Raises:
        CensusDPError: if they are not integers (floats with integral values are
            accepted only when every value is integral and within int64).
    """
    arr = np.asarray(values)
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64, copy=False)
    if arr.dtype.kind == "b":
        return arr.astype(np.int64)
    if arr.dtype.kind == "f":
        if arr.size and (not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr))):
            raise CensusDPError(f"{what} must be integer counts; got non-integral floats")
        if arr.size and np.max(np.abs(arr)) >= 2**62:
            raise CensusDPError(f"{what} are too large for int64 noise addition")
        return arr.astype(np.int64)
    raise CensusDPError(f"{what} must be integer counts; got dtype {arr.dtype}")

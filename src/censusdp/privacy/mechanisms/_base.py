"""Shared pieces of the mechanisms: exact-rational parameters and input checks."""

from __future__ import annotations

import numbers
from fractions import Fraction

import numpy as np

from censusdp.errors import BudgetError, CensusDPError

__all__ = ["as_fraction", "check_sensitivity", "integer_values", "positive_fraction"]


def as_fraction(value: object, name: str) -> Fraction:
    """Convert a privacy parameter to an exact ``Fraction``.

    Ints, Fractions and strings (``"165/4099"``, ``"2.56"``, ``"1e-10"``) convert
    exactly; a float converts through its shortest decimal ``repr`` (so ``0.1`` is
    ``1/10``, the number the user typed), never through its binary expansion.

    Raises:
        BudgetError: naming ``name`` if the value is not a finite number.
    """
    if isinstance(value, bool):
        raise BudgetError(f"{name} must be a number, got bool {value!r}")
    if isinstance(value, (float, np.floating)) and not np.isfinite(value):
        raise BudgetError(f"{name} must be finite, got {value!r}")
    try:
        if isinstance(value, Fraction):
            return value
        if isinstance(value, numbers.Integral):
            return Fraction(int(value))
        if isinstance(value, numbers.Rational):
            return Fraction(int(value.numerator), int(value.denominator))
        if isinstance(value, (float, np.floating)):
            return Fraction(repr(float(value)))
        if isinstance(value, str):
            return Fraction(value.strip().replace("_", ""))
    except (ValueError, ZeroDivisionError):
        raise BudgetError(
            f"{name} must be a number or a fraction like '1/3', got {value!r}"
        ) from None
    raise BudgetError(f"{name} must be a number, got {type(value).__name__} {value!r}")


def positive_fraction(value: object, name: str) -> Fraction:
    """:func:`as_fraction` and require ``> 0``."""
    x = as_fraction(value, name)
    if x <= 0:
        raise BudgetError(f"{name} is {x}; it must be positive")
    return x


def check_sensitivity(sensitivity: object) -> int:
    """An L1/L2 sensitivity of an integer-valued query: a positive integer."""
    if isinstance(sensitivity, bool) or not isinstance(sensitivity, numbers.Integral):
        raise BudgetError(f"sensitivity must be a positive integer, got {sensitivity!r}")
    if int(sensitivity) < 1:
        raise BudgetError(f"sensitivity is {sensitivity}; it must be a positive integer")
    return int(sensitivity)


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

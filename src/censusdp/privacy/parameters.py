"""Privacy parameters as exact rationals, validated once at the boundary.

Every rho, epsilon, delta, share and sensitivity a user or a file gives enters through
these functions, so that privacy arithmetic is exact (``fractions.Fraction``) until a
float is needed, and every bad value is refused with a message naming the parameter.
"""

from __future__ import annotations

import numbers
from fractions import Fraction

import numpy as np

from censusdp.errors import BudgetError

__all__ = ["as_fraction", "check_sensitivity", "positive_fraction"]


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

"""Privacy parameters as exact rationals, validated once at the boundary.

Every rho, epsilon, delta, share and sensitivity a user or a file gives enters through
these functions, so that privacy arithmetic is exact (``fractions.Fraction``) until a
float is needed, and every bad value is refused with a message naming the parameter.
"""

from __future__ import annotations

import numbers
import sys
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
        BudgetError: naming ``name`` if the value is not a finite number, or one a
            float cannot hold (beyond ``1.8e308``, or nonzero below ``2.2e-308``).
    """
    if isinstance(value, bool):
        raise BudgetError(f"{name} must be a number, got bool {value!r}")
    if isinstance(value, (float, np.floating)) and not np.isfinite(value):
        raise BudgetError(f"{name} must be finite, got {value!r}")
    if isinstance(value, Fraction):
        return value
    if not isinstance(value, numbers.Rational | float | np.floating | str):
        raise BudgetError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    try:
        if isinstance(value, numbers.Integral):
            x = Fraction(int(value))
        elif isinstance(value, numbers.Rational):
            x = Fraction(int(value.numerator), int(value.denominator))
        elif isinstance(value, (float, np.floating)):
            x = Fraction(repr(float(value)))
        else:
            x = Fraction(value.strip().replace("_", ""))
    except (ValueError, ZeroDivisionError):
        raise BudgetError(
            f"{name} must be a number or a fraction like '1/3', got {value!r}"
        ) from None
    return _in_float_range(x, name, value)


_FLOAT_MAX = Fraction(sys.float_info.max)
_FLOAT_TINY = Fraction(sys.float_info.min)


def _in_float_range(x: Fraction, name: str, value: object) -> Fraction:
    """``x``, unless a float cannot hold it (``"1e309"``, ``"1e-400"``): the noise and
    the reports are computed in floats."""
    if abs(x) > _FLOAT_MAX:
        raise BudgetError(
            f"{name} must be finite (at most {sys.float_info.max:.4g}), got {value!r}"
        )
    if x and abs(x) < _FLOAT_TINY:
        raise BudgetError(
            f"{name} is too close to 0 (below {sys.float_info.min:.4g}), got {value!r}"
        )
    return x


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

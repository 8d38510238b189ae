"""Traditional disclosure limitation (the 2010 baseline): household swapping and top-coding.

:mod:`censusdp.protect.swap` holds the algorithms (no file I/O);
:func:`protect_swap` and :func:`swap_then_dp` (loaded on first use) write a swapped
release in the same run layout as ``censusdp run`` and a DP release made on top of a
swapped file (JASON (JSR-19-2F) secs. 3.3 and 8.4.3).
"""

from __future__ import annotations

from typing import Any

from censusdp.protect.swap import (
    SwapOptions,
    SwapResult,
    household_table,
    swap_households,
    top_code_ages,
)

__all__ = [
    "SwapOptions",
    "SwapResult",
    "household_table",
    "protect_swap",
    "swap_households",
    "swap_then_dp",
    "top_code_ages",
]


def __getattr__(name: str) -> Any:
    # The file drivers read and write Parquet; load them on first use only.
    if name in ("protect_swap", "swap_then_dp"):
        from censusdp.protect import _release

        return getattr(_release, name)
    raise AttributeError(f"module 'censusdp.protect' has no attribute {name!r}")

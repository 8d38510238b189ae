"""The exception hierarchy of censusdp.

User-facing errors subclass :class:`CensusDPError` (itself a ``ValueError``) so a
caller can catch everything the library rejects with one clause, and the CLI maps
them to exit code 2. :class:`InternalError` means a bug in censusdp, never bad input.
"""

from __future__ import annotations

__all__ = [
    "BudgetError",
    "CensusDPError",
    "ConfigError",
    "GeographyError",
    "InfeasibleError",
    "InputError",
    "InternalError",
    "SchemaError",
]


class CensusDPError(ValueError):
    """Base class of every error caused by the caller's input or configuration."""


class SchemaError(CensusDPError):
    """A schema, attribute, recode or query is malformed or unknown."""


class GeographyError(CensusDPError):
    """A geocode or geolevel definition is malformed."""


class InputError(CensusDPError):
    """An input file is missing or fails validation.

    Attributes:
        problems: every problem found, each a human-readable line naming the
            file, column, row and value.
    """

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        self.problems = list(problems or [])
        if self.problems:
            shown = self.problems[:50]
            more = len(self.problems) - len(shown)
            lines = [message, *("  " + p for p in shown)]
            if more > 0:
                lines.append(f"  ... and {more} more problems")
            message = "\n".join(lines)
        super().__init__(message)


class BudgetError(CensusDPError):
    """A privacy budget or allocation is invalid (non-positive, shares not summing to 1, ...)."""


class ConfigError(CensusDPError):
    """A configuration file or preset is malformed."""


class InfeasibleError(CensusDPError):
    """An estimation subproblem has no solution that satisfies its constraints."""


class InternalError(RuntimeError):
    """A bug in censusdp: an internal invariant was violated. Please report it."""

    def __init__(self, message: str) -> None:
        super().__init__(f"internal error (this is a bug in censusdp): {message}")

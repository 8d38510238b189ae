"""The exception hierarchy of censusdp.

User-facing errors subclass :class:`CensusDPError` (itself a ``ValueError``) so a
caller can catch everything the library rejects with one clause. The CLI prints one
line for each and exits with :attr:`CensusDPError.exit_code`: 2 for a usage or
configuration mistake (:class:`ConfigError`, :class:`BudgetError`,
:class:`SchemaError`), 1 for data that fails a check (:class:`InputError`,
:class:`GeographyError`, :class:`InfeasibleError`, :class:`ValidationError`) or an
output the operating system will not let censusdp write (:class:`OutputError`).
:class:`InternalError` means a bug in censusdp, never bad input.
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
    "OutputError",
    "ResumeError",
    "SchemaError",
    "ValidationError",
]


class CensusDPError(ValueError):
    """Base class of every error caused by the caller's input or configuration."""

    exit_code = 2


class SchemaError(CensusDPError):
    """A schema, attribute, recode or query is malformed or unknown."""


class GeographyError(CensusDPError):
    """A geocode or geolevel definition is malformed."""

    exit_code = 1


class InputError(CensusDPError):
    """An input file is missing or fails validation.

    Attributes:
        problems: every problem found, each a human-readable line naming the
            file, column, row and value.
    """

    exit_code = 1

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        self.problems = list(problems or [])
        if self.problems:
            more = len(self.problems) - 1
            message = f"{message}: {self.problems[0]}"
            if more > 0:
                message += f" (and {more} more problem{'s' if more > 1 else ''})"
        super().__init__(message)

    def details(self) -> str:
        """Every problem, one per line (the message shows the first)."""
        return "\n".join(self.problems)


class BudgetError(CensusDPError):
    """A privacy budget or allocation is invalid (non-positive, shares not summing to 1, ...)."""


class ConfigError(CensusDPError):
    """A configuration file or preset is malformed."""


class OutputError(CensusDPError):
    """An output cannot be written for a reason of the system (a read-only directory, a
    missing permission, a full disk): exit 1, as for any operating-system error."""

    exit_code = 1


class ResumeError(ConfigError):
    """A ``--resume`` that cannot continue the interrupted run it found (other inputs,
    budget, seed or options, or a checkpoint file that fails its checksum); the
    interrupted run's work is kept for a matching resume."""


class InfeasibleError(CensusDPError):
    """An estimation subproblem has no solution that satisfies its constraints."""

    exit_code = 1


class ValidationError(CensusDPError):
    """A release fails validation (a file changed, a constraint broken, ...)."""

    exit_code = 1


class InternalError(RuntimeError):
    """A bug in censusdp: an internal invariant was violated. Please report it."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(f"internal error (this is a bug in censusdp): {message}")

    def __reduce__(self):
        # A pool or Spark task's error is pickled: rebuilt from the message alone, so the
        # driver does not prefix it twice.
        return (type(self), (self.message,))

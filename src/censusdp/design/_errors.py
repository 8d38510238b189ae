"""The error type of the design lab."""

from __future__ import annotations

from censusdp.errors import ConfigError

__all__ = ["DesignError"]


class DesignError(ConfigError):
    """A design-lab request is invalid (unknown workload or strategy, bad size, ...)."""

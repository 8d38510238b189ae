"""Progress lines and logging: the one place long steps report through.

Library functions take ``progress: Progress = None`` and report with :func:`say`.
``None`` means silent: the library never prints on its own. Every message also goes to
the standard :mod:`logging` logger ``censusdp`` (level INFO), so an embedding
application can route it anywhere. The command line passes :func:`printer`, which
writes one plain line per message to stderr (nothing with ``--quiet``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

__all__ = ["Progress", "logger", "printer", "say"]

Progress = Callable[[str], None] | None
"""A callback taking one human-readable line, or ``None`` for silence."""

logger = logging.getLogger("censusdp")


def say(progress: Progress, msg: str) -> None:
    """Log ``msg`` at INFO and hand it to ``progress`` (if any)."""
    logger.info(msg)
    if progress is not None:
        progress(msg)


def printer(quiet: bool = False) -> Progress:
    """A progress callback printing each line to stderr, or ``None`` when ``quiet``."""
    if quiet:
        return None

    def emit(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    return emit

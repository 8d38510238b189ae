"""Progress and logging: the one place long steps report through.

One meaning everywhere: a library function takes ``progress: Progress = None``, where
``None`` is silent (the library never prints on its own) and anything else is a callable
taking one human-readable line. Inside the library:

* :func:`say` reports one line (an event: "read 150 persons ...");
* :func:`task` (or :func:`track` over an iterable) reports a counted step -- tasks done out
  of a total, with the elapsed time and an ETA.

Every line also goes to the standard :mod:`logging` logger ``censusdp`` (INFO, or the
level given), so an embedding application can route it anywhere with ``logging`` alone.
With ``progress=None`` the lines go to the logger at DEBUG only: a step the caller asked
to be silent (a release inside a sweep) stays silent at the command line's default level
and shows with ``-v``.

The command line runs inside :func:`configure`, which puts one handler on that logger
(``--quiet``: warnings only; default: info; ``-v``: debug) and hands the commands a
:class:`Reporter` (through :func:`printer`). On a terminal the reporter draws a progress
bar with an ETA (``tqdm``) for each counted step and prints the log lines above the bars;
when stderr is not a terminal (a log file, a pipe, CI) a counted step prints plain lines
instead -- ``measuring County: 120/3,143 tasks (4%), 0:12 elapsed, ETA 5:02`` -- at
every tenth of the way, at least every 15 seconds (at most one a second), and once at
the end.

A plain callable passed as ``progress`` gets exactly the lines that would be printed off
a terminal, so a notebook or a web service sees the same counts and ETAs.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, TypeVar

__all__ = [
    "Progress",
    "Reporter",
    "Task",
    "configure",
    "format_seconds",
    "log_lines",
    "logger",
    "prefixed",
    "printer",
    "say",
    "task",
    "track",
]

Progress = Callable[[str], None] | None
"""A callable taking one human-readable line, or ``None`` for silence."""

logger = logging.getLogger("censusdp")

T = TypeVar("T")

# Off-terminal lines of a counted step: every tenth of the way (but at most one line per
# MIN_INTERVAL seconds) and at least every MAX_INTERVAL seconds, and always the last.
MIN_INTERVAL = 1.0
MAX_INTERVAL = 15.0
STEPS = 10

_now = time.monotonic  # replaced by tests that need a clock of their own


def format_seconds(seconds: float) -> str:
    """``0:07``, ``12:34`` or ``1:02:03`` (hours when there are any)."""
    s = max(0, int(round(seconds)))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Reporter:
    """The command line's progress: log lines through ``logging``, bars on a terminal.

    Calling it with a line logs the line at INFO on the ``censusdp`` logger (which
    :func:`configure` prints). :func:`task` asks it for a bar; it draws one only when
    ``stream`` is a terminal, ``bars`` is not ``False`` and INFO lines are shown.
    """

    def __init__(self, stream: IO[str] | None = None, *, bars: bool | None = None) -> None:
        self._stream = stream
        self._bars = bars
        self._active: list[Any] = []  # open tqdm bars, outermost first
        self._lock = threading.Lock()

    @property
    def stream(self) -> IO[str]:
        """Where bars and lines go (stderr at the time of writing, by default)."""
        return self._stream if self._stream is not None else sys.stderr

    def __call__(self, msg: str) -> None:
        logger.info(msg)

    def log(self, level: int, msg: str) -> None:
        """Log ``msg`` at ``level`` on the ``censusdp`` logger."""
        logger.log(level, msg)

    def wants_bars(self) -> bool:
        """True when a counted step should draw a bar rather than print lines."""
        if self._bars is False or not logger.isEnabledFor(logging.INFO):
            return False
        if self._bars:
            return True
        isatty = getattr(self.stream, "isatty", None)
        return bool(isatty and isatty())

    def open_bar(self, label: str, total: int | None, unit: str, *, keep: bool = True) -> Any:
        """A ``tqdm`` bar on the stream, kept on screen when done if ``keep`` and it is the
        outermost one (a step whose caller prints its own summary clears its bar).

        The bar shows the count, the elapsed time and the ETA (``[0:12<5:02]``); its
        width is the terminal's (100 columns when the terminal does not say).
        """
        from tqdm import tqdm

        fmt = _BAR_FORMAT if total is not None else _COUNTER_FORMAT
        size = shutil.get_terminal_size((100, 24))  # a terminal may report 0 x 0
        with self._lock:
            bar = tqdm(
                total=total,
                desc=label,
                unit=unit,
                file=self.stream,
                leave=keep and not self._active,
                ncols=size.columns,
                nrows=size.lines,
                bar_format=fmt,
                mininterval=0.2,
                disable=False,
            )
            self._active.append(bar)
        return bar

    def close_bar(self, bar: Any) -> None:
        """Close ``bar`` (and forget it)."""
        with self._lock:
            if bar in self._active:
                self._active.remove(bar)
        bar.close()

    def write(self, line: str) -> None:
        """Write one line to the stream, above any open bars."""
        if self._active:
            from tqdm import tqdm

            tqdm.write(line, file=self.stream)
        else:
            self.stream.write(line + "\n")
            self.stream.flush()


class _Prefixed(Reporter):
    """A :class:`Reporter`'s view that puts ``prefix`` before every line and bar label
    (:func:`prefixed`); bars, stream and lock are the reporter's own."""

    def __init__(self, inner: Reporter, prefix: str) -> None:  # noqa: D107 - no super(): shares inner's state
        self._inner, self._prefix = inner, prefix

    @property
    def stream(self) -> IO[str]:
        return self._inner.stream

    def __call__(self, msg: str) -> None:
        self._inner(self._prefix + msg)

    def log(self, level: int, msg: str) -> None:
        self._inner.log(level, self._prefix + msg)

    def wants_bars(self) -> bool:
        return self._inner.wants_bars()

    def open_bar(self, label: str, total: int | None, unit: str, *, keep: bool = True) -> Any:
        return self._inner.open_bar(self._prefix + label, total, unit, keep=keep)

    def close_bar(self, bar: Any) -> None:
        self._inner.close_bar(bar)

    def write(self, line: str) -> None:
        self._inner.write(line)


def prefixed(progress: Progress, prefix: str) -> Progress:
    """``progress`` with ``prefix + ": "`` before every line and every bar's label: the
    lines of a step that runs beside another (a release's unit run beside its person
    run), which would otherwise mix with the other's without saying whose they are."""
    if progress is None:
        return None
    head = f"{prefix}: "
    if isinstance(progress, Reporter):
        return _Prefixed(progress, head)
    inner = progress
    return lambda msg: inner(head + msg)


_BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} {unit} [{elapsed}<{remaining}]"
_COUNTER_FORMAT = "{desc}: {n_fmt} {unit} [{elapsed}]"


def say(progress: Progress, msg: str, *, level: int = logging.INFO) -> None:
    """Report one line: log it at ``level`` and hand it to ``progress`` (if any).

    Lines below INFO (``level=logging.DEBUG``) go to the logger only; with
    ``progress=None`` lines below WARNING are logged at DEBUG (silent by default).
    """
    if isinstance(progress, Reporter):
        progress.log(level, msg)
        return
    if progress is None and level < logging.WARNING:
        level = logging.DEBUG
    logger.log(level, msg)
    if progress is not None and level >= logging.INFO:
        progress(msg)


class Task:
    """A counted step: :meth:`advance` as items finish; a bar or plain lines report it.

    Use :func:`task` (a context manager) or :func:`track` rather than this class.
    """

    def __init__(
        self,
        progress: Progress,
        label: str,
        total: int | None,
        *,
        unit: str = "tasks",
        summary: bool = True,
    ) -> None:
        self.progress = progress
        self.label = label
        self.total = None if total is None else max(0, int(total))
        self.unit = unit
        self.summary = summary
        self.done = 0
        self.started = _now()
        self._last_line = self.started
        self._last_step = 0
        self._bar = None
        if isinstance(progress, Reporter) and progress.wants_bars():
            self._bar = progress.open_bar(label, self.total, unit, keep=summary)
        logger.debug(f"{label}: started ({self._count()})")

    @property
    def elapsed(self) -> float:
        """Seconds since the step started."""
        return _now() - self.started

    def eta(self) -> float | None:
        """Seconds left at the rate so far (``None`` before the first item or without a total)."""
        if not self.total or not self.done:
            return None
        return self.elapsed / self.done * max(0, self.total - self.done)

    def _count(self) -> str:
        if self.total is None:
            return f"{self.done:,} {self.unit}"
        pct = 100 * self.done // self.total if self.total else 100
        return f"{self.done:,}/{self.total:,} {self.unit} ({pct}%)"

    def line(self) -> str:
        """The plain line for the state now: counts, elapsed time and ETA."""
        if self.total is not None and self.done >= self.total:
            return f"{self.label}: {self.done:,} {self.unit} in {format_seconds(self.elapsed)}"
        eta = self.eta()
        tail = "" if eta is None else f", ETA {format_seconds(eta)}"
        return f"{self.label}: {self._count()}, {format_seconds(self.elapsed)} elapsed{tail}"

    def advance(self, n: int = 1) -> None:
        """``n`` more items are done."""
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
            return
        now = _now()
        since = now - self._last_line
        step = self._last_step
        if self.total:
            step = min(STEPS, self.done * STEPS // self.total)
        if self.total is not None and self.done >= self.total:
            return  # the last line is the summary of close()
        if since >= MAX_INTERVAL or (step > self._last_step and since >= MIN_INTERVAL):
            self._last_line, self._last_step = now, step
            say(self.progress, self.line())

    def close(self) -> None:
        """Finish: close the bar, or print the summary line."""
        if self.total is not None and self.done != self.total:
            self.total = self.done  # fewer items than announced (e.g. empty parents skipped)
        if self._bar is not None:
            self._bar.total = self.total
            self._bar.refresh()
            assert isinstance(self.progress, Reporter)
            self.progress.close_bar(self._bar)
            self._bar = None
            logger.debug(self.line())
        elif self.summary:
            say(self.progress, self.line())
        else:
            logger.debug(self.line())

    def __enter__(self) -> Task:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is not None and self._bar is not None:
            assert isinstance(self.progress, Reporter)
            self.progress.close_bar(self._bar)
            self._bar = None
            return
        if exc[0] is None:
            self.close()


def task(
    progress: Progress,
    label: str,
    total: int | None,
    *,
    unit: str = "tasks",
    summary: bool = True,
) -> Task:
    """A counted step reported through ``progress``; use as ``with task(...) as t:``.

    Args:
        progress: ``None`` (silent), a callable taking lines, or a :class:`Reporter`.
        label: what is being done ("estimating County").
        total: how many items the step has (``None``: unknown; no ETA then).
        unit: what an item is ("tasks", "trials", "counties").
        summary: report a final line ("... 120 tasks in 0:42"); ``False`` when the
            caller reports its own summary of the step.
    """
    return Task(progress, label, total, unit=unit, summary=summary)


def track(
    progress: Progress,
    items: Iterable[T],
    label: str,
    total: int | None = None,
    *,
    unit: str = "tasks",
    summary: bool = True,
) -> Iterator[T]:
    """Yield ``items``, advancing a :func:`task` after each (total: ``len(items)`` if known)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with task(progress, label, total, unit=unit, summary=summary) as t:
        for item in items:
            yield item
            t.advance()


class _Handler(logging.Handler):
    """Writes each record as one line through the reporter (above any bars)."""

    def __init__(self, reporter: Reporter) -> None:
        super().__init__()
        self.reporter = reporter

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = record.getMessage()
            if record.levelno >= logging.WARNING:
                msg = f"{record.levelname.lower()}: {msg}"
            elif record.levelno < logging.INFO:
                msg = f"debug: {msg}"
            if record.name not in ("censusdp", "censusdp.progress"):
                msg = f"[{record.name}] {msg}"
            self.reporter.write(msg)
        except Exception:  # pragma: no cover - logging must never raise
            self.handleError(record)


_active: Reporter | None = None

# Loggers of libraries whose records the command line prints with its own: the least
# level shown without and with -v. py4j's DEBUG records hold the commands it sends to
# the JVM, the gateway's secret among them: never shown.
FOREIGN_LOGGERS = {"py4j": (logging.WARNING, logging.INFO)}


@contextlib.contextmanager
def configure(
    verbosity: int = 0, *, stream: IO[str] | None = None, bars: bool | None = None
) -> Iterator[Reporter]:
    """Print the ``censusdp`` logger's records for the duration (the command line's setup).

    Args:
        verbosity: ``-1`` quiet (warnings and errors only), ``0`` info (the default),
            ``1`` or more debug (and the INFO records of :data:`FOREIGN_LOGGERS`).
        stream: where to print (default: stderr at the time of each line).
        bars: draw progress bars (``None``: when the stream is a terminal).

    Yields:
        the :class:`Reporter` that :func:`printer` hands to the commands meanwhile.
        Levels and handlers are restored on exit.
    """
    global _active
    reporter = Reporter(stream, bars=bars)
    handler = _Handler(reporter)
    level = logging.WARNING if verbosity < 0 else logging.INFO if verbosity == 0 else logging.DEBUG
    targets = [(logger, level)] + [
        (logging.getLogger(name), levels[verbosity > 0]) for name, levels in FOREIGN_LOGGERS.items()
    ]
    saved = [(lg, lg.level, lg.propagate) for lg, _ in targets]
    previous = _active
    for lg, lv in targets:
        lg.addHandler(handler)
        lg.setLevel(lv)
        lg.propagate = False
    _active = reporter
    try:
        yield reporter
    finally:
        _active = previous
        for lg, lv, prop in saved:
            lg.removeHandler(handler)
            lg.setLevel(lv)
            lg.propagate = prop


def printer(quiet: bool = False) -> Progress:
    """The progress the command line hands to the library.

    ``None`` when ``quiet``; else the :class:`Reporter` of the :func:`configure` in force,
    or (outside one) a callable printing each line to stderr.
    """
    if quiet:
        return None
    if _active is not None:
        return _active
    return _print_line


def _print_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def log_lines(
    stream: IO[bytes], name: str, level_of: Callable[[str], int], *, encoding: str = "utf-8"
) -> threading.Thread:
    """Log every line read from ``stream`` on logger ``name`` at ``level_of(line)``.

    For the output of a child process (Spark's JVM): a daemon thread reads until the
    stream ends, so the child never blocks on a full pipe.
    """
    log = logging.getLogger(name)

    def pump() -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode(encoding, "replace").rstrip()
            if line:
                log.log(level_of(line), line)

    thread = threading.Thread(target=pump, name=f"{name}-log", daemon=True)
    thread.start()
    return thread

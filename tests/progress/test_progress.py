"""censusdp.progress: bars on a terminal, plain lines off it, levels, and None = silent."""

from __future__ import annotations

import io
import logging
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

import censusdp.progress as prog
from censusdp.progress import Reporter, configure, format_seconds, printer, say, task, track


class FakeTTY(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(prog, "_now", c)
    return c


def test_format_seconds() -> None:
    assert format_seconds(0) == "0:00"
    assert format_seconds(7.4) == "0:07"
    assert format_seconds(754) == "12:34"
    assert format_seconds(3723) == "1:02:03"
    assert format_seconds(-3) == "0:00"


def test_bar_on_a_terminal_lines_above_it() -> None:
    tty = FakeTTY()
    with configure(0, stream=tty) as rep:
        assert rep.wants_bars()
        with task(rep, "estimating County", 4) as t:
            say(rep, "a log line while the bar runs")
            for _ in range(4):
                t.advance()
    out = tty.getvalue()
    assert "\r" in out  # redrawn in place
    assert "estimating County" in out and "4/4" in out
    assert re.search(r"<\d\d:\d\d", out)  # tqdm's remaining time (the ETA)
    assert "a log line while the bar runs\n" in out
    # no plain progress lines on a terminal
    assert "tasks in" not in out and "elapsed" not in out


def test_plain_lines_off_a_terminal(clock: Clock) -> None:
    buf = io.StringIO()
    with configure(0, stream=buf) as rep:
        assert not rep.wants_bars()
        with task(rep, "estimating Tract", 10) as t:
            for _ in range(10):
                clock.t += 2.0
                t.advance()
    lines = buf.getvalue().splitlines()
    assert "\r" not in buf.getvalue()
    # every tenth of the way (2 s apart here), the last one as the summary
    assert lines[0] == "estimating Tract: 1/10 tasks (10%), 0:02 elapsed, ETA 0:18"
    assert lines[4] == "estimating Tract: 5/10 tasks (50%), 0:10 elapsed, ETA 0:10"
    assert lines[-1] == "estimating Tract: 10 tasks in 0:20"
    assert len(lines) == 10


def test_plain_lines_are_throttled(clock: Clock) -> None:
    got: list[str] = []
    with task(got.append, "measuring", 1000, unit="geounits") as t:
        for _ in range(1000):
            clock.t += 0.01  # 10 s in all: a tenth every second
            t.advance()
    # one line per second at most, at tenths: 1s..9s, then the summary
    assert len(got) == 10
    assert got[-1] == "measuring: 1,000 geounits in 0:10"


def test_slow_step_reports_at_least_every_15_seconds(clock: Clock) -> None:
    got: list[str] = []
    with task(got.append, "solving", 1000) as t:
        for _ in range(3):
            clock.t += 16.0
            t.advance()  # 0.1% each: no tenth crossed, but 16 s passed
    assert got[:3] == [
        "solving: 1/1,000 tasks (0%), 0:16 elapsed, ETA 4:26:24",
        "solving: 2/1,000 tasks (0%), 0:32 elapsed, ETA 4:26:08",
        "solving: 3/1,000 tasks (0%), 0:48 elapsed, ETA 4:25:52",
    ]


def test_unknown_total_and_fewer_items_than_announced(clock: Clock) -> None:
    got: list[str] = []
    with task(got.append, "reading", None, unit="chunks") as t:
        clock.t += 20
        t.advance(3)
    assert got == ["reading: 3 chunks, 0:20 elapsed", "reading: 3 chunks, 0:20 elapsed"]
    got.clear()
    with task(got.append, "estimating Block", 8) as t:
        t.advance(5)
    assert got == ["estimating Block: 5 tasks in 0:00"]  # total shrinks to what was done


def test_summary_false_leaves_the_last_line_to_the_caller() -> None:
    got: list[str] = []
    with task(got.append, "x", 2, summary=False) as t:
        t.advance(2)
    assert got == []


@given(st.lists(st.integers(1, 50), min_size=1, max_size=30))
def test_track_yields_everything_and_counts_it(sizes: list[int]) -> None:
    got: list[str] = []
    items = list(range(len(sizes)))
    assert list(track(got.append, items, "items", unit="items")) == items
    assert got[-1].startswith(f"items: {len(items)} items in ")


def test_none_is_silent(capsys: pytest.CaptureFixture[str], caplog) -> None:
    caplog.set_level(logging.DEBUG, logger="censusdp")
    with task(None, "quiet step", 3) as t:
        t.advance(3)
    say(None, "an event")
    out, err = capsys.readouterr()
    assert out == "" and err == ""
    # ... but the logger still receives the lines, at DEBUG (for an embedding application)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.DEBUG, "quiet step: started (0/3 tasks (0%))"),
        (logging.DEBUG, "quiet step: 3 tasks in 0:00"),
        (logging.DEBUG, "an event"),
    ]


def test_a_silent_step_inside_a_command_shows_only_with_v() -> None:
    for verbosity, shown in ((0, False), (1, True)):
        buf = io.StringIO()
        with configure(verbosity, stream=buf):
            with task(None, "inner release", 2) as t:  # e.g. a release inside a sweep
                t.advance(2)
            say(None, "inner event")
        assert ("debug: inner release: 2 tasks in" in buf.getvalue()) is shown
        assert ("debug: inner event" in buf.getvalue()) is shown


@pytest.mark.parametrize(
    ("verbosity", "shown", "hidden"),
    [
        (-1, ["warning: careful"], ["an info line", "a debug line"]),
        (0, ["warning: careful", "an info line"], ["a debug line"]),
        (1, ["warning: careful", "an info line", "debug: a debug line"], []),
    ],
)
def test_levels(verbosity: int, shown: list[str], hidden: list[str]) -> None:
    buf = io.StringIO()
    with configure(verbosity, stream=buf):
        rep = printer(quiet=verbosity < 0)
        say(rep, "an info line")
        say(rep, "a debug line", level=logging.DEBUG)
        prog.logger.warning("careful")
    text = buf.getvalue()
    for s in shown:
        assert s in text
    for s in hidden:
        assert s not in text


def test_configure_restores_the_logger() -> None:
    before = (prog.logger.level, list(prog.logger.handlers), prog.logger.propagate)
    with configure(1, stream=io.StringIO()):
        assert prog.logger.level == logging.DEBUG
        assert printer() is not None and isinstance(printer(), Reporter)
    assert (prog.logger.level, list(prog.logger.handlers), prog.logger.propagate) == before
    assert printer(quiet=True) is None
    assert not isinstance(printer(), Reporter)  # outside configure: plain stderr lines


def test_quiet_draws_no_bar() -> None:
    tty = FakeTTY()
    with configure(-1, stream=tty) as rep:
        assert not rep.wants_bars()
        with task(printer(quiet=True), "x", 3) as t:
            t.advance(3)
    assert tty.getvalue() == ""


def test_py4j_debug_never_shown() -> None:
    buf = io.StringIO()
    with configure(2, stream=buf):
        logging.getLogger("py4j.clientserver").debug("Command to send: A secret-token")
        logging.getLogger("py4j.clientserver").info("Closing down clientserver connection")
        logging.getLogger("censusdp.spark").debug("26/11/25 WARN Utils: loopback")
    text = buf.getvalue()
    assert "secret-token" not in text
    assert "[py4j.clientserver] Closing down clientserver connection" in text
    assert "[censusdp.spark] debug: 26/11/25 WARN Utils: loopback" in text

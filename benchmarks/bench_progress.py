"""What progress reporting costs. Prints JSON.

Two measurements, each against the silent method in the same run:

* per item: the seconds one ``Task.advance()`` adds to a loop, for ``progress=None``, a
  plain callable (the lines written off a terminal), and a ``tqdm`` bar on a terminal
  (a stream that says it is one; the bar is drawn into memory);
* per release: ``run_release`` on a small synthetic CEF with ``progress=None`` and with
  the command line's reporter (plain lines, ``-v``), median of ``--repeats`` runs each,
  alternating, and their ratio.

Run: ``python benchmarks/bench_progress.py [--items 200000] [--repeats 3] [--json OUT]``
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from censusdp.io.budget_files import load_preset  # noqa: E402
from censusdp.progress import configure, task  # noqa: E402
from censusdp.release.pipeline import run_release  # noqa: E402
from synth import block_codes, make_cef, write_cef  # noqa: E402


class _FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def _loop(progress, n: int) -> float:
    t = time.perf_counter()
    with task(progress, "bench", n) as bar:
        for _ in range(n):
            bar.advance()
    return time.perf_counter() - t


def _bare(n: int) -> float:
    t = time.perf_counter()
    done = 0
    for _ in range(n):
        done += 1
    return time.perf_counter() - t


def per_item(n: int) -> dict:
    """Seconds per advance() beyond a bare loop, for each kind of progress."""
    bare = _bare(n)
    lines: list[str] = []
    out = {"items": n, "bare_loop_seconds": bare}
    out["none_us_per_item"] = (_loop(None, n) - bare) / n * 1e6
    out["plain_lines_us_per_item"] = (_loop(lines.append, n) - bare) / n * 1e6
    out["plain_lines_written"] = len(lines)
    tty = _FakeTTY()
    with configure(0, stream=tty) as rep:
        out["tqdm_bar_us_per_item"] = (_loop(rep, n) - bare) / n * 1e6
    out["tqdm_bytes_drawn"] = len(tty.getvalue())
    return out


def per_release(repeats: int) -> dict:
    """run_release silent vs reporting (plain lines at -v), alternating runs."""
    base = Path(tempfile.mkdtemp(prefix="bench-progress-"))
    persons, units = make_cef(np.random.default_rng(7), block_codes(2, 2, 3, 5), gq_rate=0.3)
    write_cef(base / "cef", persons, units)
    budget, ubudget = load_preset("pl94-2020"), load_preset("pl94-2020-units")
    times: dict[str, list[float]] = {"silent": [], "reporting": []}
    for r in range(repeats):
        for mode in ("silent", "reporting"):
            out = base / f"{mode}{r}"
            t = time.perf_counter()
            if mode == "silent":
                run_release(base / "cef", out, budget=budget, units_budget=ubudget, seed=r)
            else:
                with configure(1, stream=io.StringIO()) as rep:
                    run_release(
                        base / "cef", out, budget=budget, units_budget=ubudget, seed=r, progress=rep
                    )
            times[mode].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "persons": int(len(persons["geocode"])),
        "repeats": repeats,
        "seconds": times,
        "median_seconds": med,
        "ratio_reporting_over_silent": med["reporting"] / med["silent"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None, metavar="OUT")
    args = ap.parse_args()
    result = {
        "benchmark": "progress",
        "per_item": per_item(args.items),
        "per_release": per_release(args.repeats),
        "note": "timings on a shared machine; compare the columns of one run, not across runs",
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

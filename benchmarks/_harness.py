"""What the end-to-end benchmark scripts share: the installed ``censusdp`` command, a
working directory, a generated input, and timing a command (wall and CPU seconds).

Scripts import it as a sibling module (``python benchmarks/bench_x.py`` puts this
directory first on ``sys.path``). CPU seconds are the children's user + system time,
which does not depend on the machine's load the way wall time does.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def censusdp() -> str:
    """The ``censusdp`` script installed next to the running interpreter."""
    return str(Path(sys.executable).with_name("censusdp"))


def add_input_arguments(
    ap: argparse.ArgumentParser,
    *,
    state: str = "VT",
    scale: float = 1.0,
    seed: int = 1,
    workers: int = 2,
) -> None:
    """``--state --scale --seed --workers --dir``: the input a benchmark generates."""
    ap.add_argument("--state", default=state)
    ap.add_argument("--scale", type=float, default=scale)
    ap.add_argument("--seed", type=int, default=seed)
    ap.add_argument("--workers", type=int, default=workers)
    ap.add_argument("--dir", default=None, help="working directory (default: a temp dir)")


def workdir(args: argparse.Namespace, prefix: str) -> Path:
    """``--dir`` if given, else a fresh temporary directory (kept, for inspection)."""
    return Path(args.dir or tempfile.mkdtemp(prefix=prefix))


def children_cpu() -> float:
    """User + system CPU seconds of every finished child process so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str]) -> tuple[float, float]:
    """Run ``cmd`` quietly (raising if it fails); its wall and CPU seconds."""
    c0, t0 = children_cpu(), time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0, children_cpu() - c0


def generate(args: argparse.Namespace, out: Path) -> float:
    """``censusdp generate`` of ``args.state`` at ``args.scale`` into ``out``: wall seconds."""
    cmd = [censusdp(), "generate", "--state", args.state, "--seed", str(args.seed)]
    cmd += ["--scale", str(args.scale), "--out", str(out), "--overwrite", "--quiet"]
    return timed(cmd)[0]


def run_command(cef: Path, out: Path, args: argparse.Namespace, *options: str) -> list[str]:
    """``censusdp run`` of ``cef`` into ``out`` with the benchmark's seed and workers."""
    cmd = [censusdp(), "run", "--input", str(cef), "--out", str(out), "--seed", str(args.seed)]
    return [*cmd, "--workers", str(args.workers), *options, "--quiet"]


def rss_mb(pid: int) -> float:
    """Resident memory of process ``pid`` in MB (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def children(pid: int) -> list[int]:
    """The direct children of process ``pid`` (Linux ``/proc``)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(v) for v in f.read().split()]
    except OSError:
        return []


def sampled(cmd: list[str]) -> tuple[float, float, dict[str, float], str]:
    """Run ``cmd`` (raising with its stderr if it fails) and sample its memory twice a
    second: ``(wall s, CPU s of its process tree, {"driver_mb", "worker_mb", "tree_mb"}
    peak RSS of the process, of its largest child (a pool worker) and of the whole
    tree, its standard output)``."""
    before = children_cpu()
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    mem = {"driver_mb": 0.0, "worker_mb": 0.0, "tree_mb": 0.0}

    def sample() -> None:
        while proc.poll() is None:
            main = rss_mb(proc.pid)
            workers = [rss_mb(c) for c in children(proc.pid)]
            mem["driver_mb"] = max(mem["driver_mb"], main)
            mem["worker_mb"] = max([mem["worker_mb"], *workers])
            mem["tree_mb"] = max(mem["tree_mb"], main + sum(workers))
            time.sleep(0.5)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out, err = proc.communicate()
    th.join(1.0)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{err[-3000:]}")
    return wall, children_cpu() - before, {k: round(v, 1) for k, v in mem.items()}, out


def say(msg: str) -> None:
    """A progress line on standard error (standard output is the JSON)."""
    print(msg, file=sys.stderr, flush=True)


def clock() -> tuple[float, float]:
    """Now, as (wall, this process's CPU) seconds, for :func:`since`."""
    return time.perf_counter(), time.process_time()


def since(t: tuple[float, float]) -> dict[str, float]:
    """Wall and CPU seconds since ``t`` (from :func:`clock`)."""
    return {
        "wall_s": round(time.perf_counter() - t[0], 3),
        "cpu_s": round(time.process_time() - t[1], 3),
    }


def cached_input(work: Path, state: str, scale: float, seed: int = 1) -> Path:
    """``work/<state>_<scale>``: a generated input, generated only when missing."""
    cef = work / f"{state}_{scale:g}"
    if not (cef / "persons.parquet").exists():
        say(f"generate {state} at {scale}")
        cmd = [sys.executable, "-m", "censusdp", "generate", "--state", state, "--quiet"]
        subprocess.run(
            [*cmd, "--scale", str(scale), "--seed", str(seed), "--out", str(cef)],
            check=True,
            stdout=sys.stderr,  # a benchmark's standard output is its JSON alone
        )
    return cef


def cached_release(work: Path, state: str, scale: float, seed: int = 1) -> Path:
    """``work/run_<state>_<scale>``: a pl94-2020 release of :func:`cached_input` on two
    workers, made only when missing."""
    run = work / f"run_{state}_{scale:g}"
    if not (run / "manifest.json").exists():
        cef = cached_input(work, state, scale, seed)
        say(f"release {state} at {scale}")
        cmd = [sys.executable, "-m", "censusdp", "run", "--input", str(cef), "--out", str(run)]
        subprocess.run(
            [*cmd, "--seed", str(seed), "--workers", "2", "--quiet"], check=True, stdout=sys.stderr
        )
    return run


def add_release_arguments(
    ap: argparse.ArgumentParser, *, state: str = "WY", scale: float = 0.25
) -> None:
    """``--run --state --scale --dir``: a release a benchmark reads, or makes
    (:func:`release_of`)."""
    ap.add_argument("--run", default=None, help="a release directory (default: make one)")
    ap.add_argument("--state", default=state)
    ap.add_argument("--scale", type=float, default=scale)
    ap.add_argument("--dir", default=None, help="working directory (default: a temp dir)")


def release_of(args: argparse.Namespace, prefix: str) -> Path:
    """``--run``, or the :func:`cached_release` of ``--state`` at ``--scale`` in
    :func:`workdir`."""
    if args.run:
        return Path(args.run)
    return cached_release(workdir(args, prefix), args.state, args.scale)

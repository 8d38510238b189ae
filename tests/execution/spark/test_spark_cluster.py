"""A real multi-executor Spark run, and the packaged wheel under ``spark-submit``.

The suite starts a Spark standalone master and two workers on this machine (one core and
1 GiB each, loopback only, RPC authenticated and encrypted with a shared secret from a
``spark-defaults.conf``, as docs/scaling.md tells a cluster operator to configure), runs
``censusdp run --executor spark --spark-master spark://...`` as a user would, and checks
that every release file is byte-identical to the in-process release with the same seed,
that both executors ran tasks, and that the manifests differ only in the fields that
describe how and how fast the run went (:data:`RUN_DEPENDENT`).

The second test builds the wheel, installs it (without its dependencies, which come
from this environment through a ``.pth`` file) into a fresh virtual environment, and runs
the two-line launcher of docs/scaling.md with ``spark-submit --master local[2]`` on that
environment's interpreter: the bytes are again those of the in-process release.

Both take minutes (JVM start-up of four daemons and two executors on a shared machine),
so they are ``slow``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")
if shutil.which("java") is None:  # pragma: no cover - depends on the machine
    pytest.skip("Spark needs a Java runtime (java not on PATH)", allow_module_level=True)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SPARK_HOME = Path(pyspark.__file__).parent
CLI = [sys.executable, "-m", "censusdp"]
REPO = Path(__file__).resolve().parents[3]

RUN_DEPENDENT = {"argv", "command", "executor", "timings", "peak_memory_mb"}
"""Top-level manifest fields that may differ between executors, besides the timing
fields of each level's estimation summary (:data:`SUMMARY_TIMINGS`)."""

SUMMARY_TIMINGS = {
    "wall_seconds",
    "task_seconds",
    "task_cpu_seconds",
    "l2_seconds",
    "rounding_seconds",
    "max_task_seconds",
    "max_task_cpu_seconds",
    "median_task_seconds",
    "critical_path_seconds",
    "critical_path_cpu_seconds",
    "driver_build_cpu_seconds",
}


def _spark_env(conf_dir: Path) -> dict[str, str]:
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_CONF_DIR": str(conf_dir)}
    env.update(SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    return env


def _wait_for(path: Path, pattern: str, proc: subprocess.Popen, timeout: float) -> re.Match:
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = re.search(pattern, path.read_text(errors="replace")) if path.exists() else None
        if m:
            return m
        if proc.poll() is not None:
            raise AssertionError(f"{path.name}: daemon exited: {path.read_text()[-2000:]}")
        time.sleep(0.5)
    raise AssertionError(
        f"{path.name}: no {pattern!r} after {timeout}s: {path.read_text()[-2000:]}"
    )


def _stop(procs: list[subprocess.Popen]) -> None:
    """Stop the daemons this fixture started (each leads its own process group, which
    holds the executors a worker launched)."""
    for p in reversed(procs):
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A standalone master and two one-core workers; yields (master URL, env, work dirs)."""
    base = tmp_path_factory.mktemp("standalone")
    conf = base / "conf"
    conf.mkdir()
    secret_file = conf / "spark-defaults.conf"
    secret_file.write_text(
        "spark.authenticate true\n"
        f"spark.authenticate.secret {secrets.token_hex(32)}\n"
        "spark.network.crypto.enabled true\n"
        "spark.master.rest.enabled false\n"
        "spark.ui.enabled false\n"
    )
    secret_file.chmod(0o600)
    env = _spark_env(conf)
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    procs: list[subprocess.Popen] = []

    def start(name: str, *args: str) -> tuple[subprocess.Popen, Path]:
        log = base / f"{name}.log"
        with open(log, "wb") as out:
            p = subprocess.Popen(
                [spark_class, *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        procs.append(p)
        return p, log

    try:
        master, log = start(
            "master",
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0"),
        )
        url = _wait_for(log, r"Starting Spark master at (spark://[0-9.]+:\d+)", master, 240)[1]
        _wait_for(log, r"New state: ALIVE", master, 120)
        work = []
        for i in (1, 2):
            work.append(base / f"work{i}")
            worker, wlog = start(
                f"worker{i}",
                "org.apache.spark.deploy.worker.Worker",
                *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0"),
                *("--cores", "1", "--memory", "1g", "--work-dir", str(work[-1]), url),
            )
            _wait_for(wlog, r"Successfully registered with master", worker, 240)
        yield url, env, work
    finally:
        _stop(procs)


@pytest.fixture(scope="module")
def small_state(tmp_path_factory) -> Path:
    """A small generated state and its in-process release (seed 11)."""
    base = tmp_path_factory.mktemp("cluster_state")
    gen = [*CLI, "generate", "--state", "DC", "--seed", "3", "--scale", "0.02", "--quiet"]
    subprocess.run([*gen, "--out", str(base / "cef")], check=True, capture_output=True)
    run = [*CLI, "run", "--input", str(base / "cef"), "--seed", "11", "--quiet"]
    proc = subprocess.run(
        [*run, "--out", str(base / "inprocess"), "--executor", "inprocess"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return base


def _checksums(run: Path) -> dict[str, str]:
    return {
        str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run.rglob("*"))
        if p.is_file() and p.name != "manifest.json"
    }


def _manifest_differences(a: dict, b: dict) -> set[str]:
    """Paths of the manifest fields that differ, as ``key`` or ``estimation.*.field``."""
    out = {k for k in set(a) | set(b) if a.get(k) != b.get(k) and k != "estimation"}
    for run in set(a["estimation"]) | set(b["estimation"]):
        for la, lb in zip(a["estimation"][run], b["estimation"][run], strict=True):
            out |= {f"estimation.*.{k}" for k in set(la) | set(lb) if la.get(k) != lb.get(k)}
    return out


def _same_release(reference: Path, other: Path) -> tuple[dict, dict]:
    want, got = _checksums(reference), _checksums(other)
    # part files (MDF, MDF2020 text, tables) are compared one by one, with their indexes
    assert "mdf_persons.parquet/part-00000.parquet" in want and "mdf_units.txt/_parts.json" in want
    assert "tables/P1.parquet/part-00001.parquet" in want
    assert got == want
    ma = json.loads((reference / "manifest.json").read_text())
    mb = json.loads((other / "manifest.json").read_text())
    assert ma["files"] == mb["files"] == want
    allowed = RUN_DEPENDENT | {f"estimation.*.{k}" for k in SUMMARY_TIMINGS}
    assert _manifest_differences(ma, mb) <= allowed, _manifest_differences(ma, mb) - allowed
    return ma, mb


def test_standalone_cluster_release_is_byte_identical(cluster, small_state: Path) -> None:
    url, env, work = cluster
    out = small_state / "standalone"
    proc = subprocess.run(
        [*CLI, "run", "--input", str(small_state / "cef"), "--seed", "11", "--quiet"]
        + ["--out", str(out), "--executor", "spark", "--spark-master", url],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    local, spark = _same_release(small_state / "inprocess", out)
    assert spark["executor"]["name"] == "spark" and spark["executor"]["master"] == url
    assert local["executor"]["name"] == "in-process"
    assert spark["validation"]["ok"]
    # the NMF's part files were written by the executors' tasks, not by the driver
    assert not spark["executor"]["nmf_parts_by_driver"] and local["executor"]["nmf_parts_by_driver"]
    # and so were the MDF's (persons, units, Parquet and MDF2020 text), byte for byte
    assert not spark["executor"]["mdf_parts_by_driver"] and local["executor"]["mdf_parts_by_driver"]
    for name in ("mdf_persons.parquet", "mdf_units.parquet", "mdf_persons.txt", "mdf_units.txt"):
        assert (out / name / "_parts.json").is_file(), name
    assert len(list((out / "noisy_measurements.parquet").glob("part-*.parquet"))) > 1
    # and the CEF was read by the executors' tasks (io/cef_parts.py), not by the driver
    assert spark["executor"]["input_parts"] == local["executor"]["input_parts"] >= 1
    assert not spark["executor"]["input_parts_by_driver"]
    assert local["executor"]["input_parts_by_driver"]
    # both executors (one per worker) ran tasks of the release
    for w in work:
        logs = list(w.glob("app-*/*/stderr"))
        assert logs, f"no executor was launched on {w.name}"
        assert any("Running task" in p.read_text(errors="replace") for p in logs), w.name


def test_wheel_and_launcher_run_under_spark_submit(small_state: Path, tmp_path: Path) -> None:
    """docs/scaling.md's recipe, locally: build the wheel, install it into a fresh
    environment, and run the launcher with spark-submit in local mode."""
    wheels = tmp_path / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(REPO)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = wheels.glob("censusdp-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for data in (
        "censusdp/privacy/presets/pl94-2020.toml",
        "censusdp/generate/tracts2010.parquet",
        "censusdp/cli/__init__.py",
    ):
        assert data in names, data
    # a fresh environment holding the wheel; its dependencies come from this one
    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    py = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    deps = [p for p in sys.path if p.endswith("site-packages")]
    (Path(site) / "censusdp_test_deps.pth").write_text("\n".join(deps) + "\n")
    inst = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index"]
        + ["--target", site, str(wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert inst.returncode == 0, inst.stderr[-3000:]
    where = subprocess.run(
        [str(py), "-c", "import censusdp; print(censusdp.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    ).stdout.strip()
    assert where.startswith(site), where  # the wheel's copy, not the source tree
    launcher = tmp_path / "censusdp_submit.py"
    launcher.write_text("from censusdp.cli import main\n\nraise SystemExit(main())\n")
    env = _spark_env(tmp_path)  # an empty SPARK_CONF_DIR
    env.update(PYSPARK_PYTHON=str(py), PYSPARK_DRIVER_PYTHON=str(py))
    out = tmp_path / "submitted"
    proc = subprocess.run(
        [str(SPARK_HOME / "bin" / "spark-submit"), "--master", "local[2]", str(launcher)]
        + ["run", "--input", str(small_state / "cef"), "--out", str(out)]
        + ["--seed", "11", "--quiet", "--executor", "spark"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=1200,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, submitted = _same_release(small_state / "inprocess", out)
    assert submitted["executor"]["master"] == "local[2]"

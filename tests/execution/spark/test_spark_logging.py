"""Spark's output goes through logging: no FutureWarning, no raw JVM lines on stderr."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from censusdp.execution.spark import spark_log_level
from synth import block_codes, make_cef, write_cef


@pytest.mark.parametrize(
    ("line", "level"),
    [
        ("26/11/25 23:56:28 WARN Utils: Set SPARK_LOCAL_IP if you need to bind", logging.DEBUG),
        ("26/11/25 23:56:28 INFO SparkContext: Running Spark version 4.3.0", logging.DEBUG),
        ("26/11/25 23:56:28 ERROR Executor: Exception in task 0.0", logging.WARNING),
        ("26/11/25 23:56:28 FATAL SparkContext: cannot start", logging.WARNING),
        ('Setting default log level to "WARN".', logging.DEBUG),
        ("WARNING: Using incubator modules: jdk.incubator.vector", logging.DEBUG),
        ("Traceback (most recent call last):", logging.WARNING),
        ("java.lang.OutOfMemoryError: Java heap space", logging.WARNING),
    ],
)
def test_spark_log_levels(line: str, level: int) -> None:
    assert spark_log_level(line) == level


@pytest.mark.slow
@pytest.mark.spark
def test_spark_run_prints_no_future_warning_and_no_raw_jvm_lines(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:  # pragma: no cover - depends on the machine
        pytest.skip("Spark needs a Java runtime (java not on PATH)")
    persons, units = make_cef(np.random.default_rng(4), block_codes(2, 1, 1, 3), gq_rate=0.3)
    write_cef(tmp_path / "cef", persons, units)

    def run(*extra: str) -> str:
        main = "import sys; from censusdp.cli import main; sys.exit(main(sys.argv[1:]))"
        argv = [sys.executable, "-c", main, "run", "--input", str(tmp_path / "cef")]
        argv += ["--seed", "1", "--executor", "spark", "--spark-master", "local[1]", *extra]
        env = {**os.environ, "PYTHONWARNINGS": "default"}  # show every warning, once
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
        assert proc.returncode == 0, proc.stderr
        return proc.stderr

    err = run("--out", str(tmp_path / "a"))
    assert "FutureWarning" not in err
    # no line of the JVM's own (log4j timestamps, start-up notices) reaches stderr
    assert not re.search(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d ", err, re.M), err
    assert "log4j" not in err and "setLogLevel" not in err
    assert "[censusdp.spark]" not in err  # Spark's chatter is debug: hidden by default
    verbose = run("--out", str(tmp_path / "b"), "-v")
    assert "FutureWarning" not in verbose
    assert re.search(r"^\[censusdp\.spark\] debug: ", verbose, re.M)
    assert "Command to send" not in verbose  # py4j's debug records carry the gateway secret

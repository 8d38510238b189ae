"""``censusdp infer --executor spark``: the block tasks on Spark give the in-process answer.

Skipped unless pyspark and a Java runtime are available (the ``spark`` extra).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")
if shutil.which("java") is None:  # pragma: no cover - depends on the machine
    pytest.skip("Spark needs a Java runtime (java not on PATH)", allow_module_level=True)

from censusdp.cli import main  # noqa: E402
from censusdp.infer.release import ESTIMATE_COLUMNS, infer_release  # noqa: E402
from censusdp.release.options import Execution  # noqa: E402
from synth import block_codes, make_cef, write_cef  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.slow]  # Spark start-up: about 25 s


def test_spark_matches_in_process(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    cef = write_cef(tmp_path / "cef", *make_cef(rng, block_codes(2, 2, 2, 4)))
    run = tmp_path / "run"
    assert main(["run", "--input", str(cef), "--out", str(run), "--seed", "3", "--quiet"]) == 0
    infer_release(run, tmp_path / "local")
    m = infer_release(
        run, tmp_path / "spark", execution=Execution(executor="spark", spark_master="local[2]")
    )
    assert m["executor"]["name"] == "spark"
    a = pq.read_table(tmp_path / "local" / "estimates.parquet")
    b = pq.read_table(tmp_path / "spark" / "estimates.parquet")
    for c in ESTIMATE_COLUMNS:
        x, y = (
            a.column(c).to_numpy(zero_copy_only=False),
            b.column(c).to_numpy(zero_copy_only=False),
        )
        if np.asarray(x).dtype.kind == "f":
            np.testing.assert_allclose(x, y, rtol=0, atol=1e-9)
        else:
            np.testing.assert_array_equal(np.asarray(x).astype(str), np.asarray(y).astype(str))

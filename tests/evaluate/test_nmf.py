"""Tests of the closed-form NMF summary and its check against the truth (Gong (2022): the
noise distribution of a transparent release is public; Kazan & Reiter (2022) sec. 2.3)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.evaluate.nmf import Z90, nmf_summary


def _batches(h, truth, variance, rng, shuffle, dictionary, batch_size):
    li = h.n_levels - 1
    units, cells = np.indices(truth.shape)
    true = truth.ravel()
    noise = rng.normal(0, np.sqrt(variance), true.size)
    order = rng.permutation(true.size) if shuffle else np.arange(true.size)
    geocode = pa.array(h.geocodes[li][units.ravel()[order]].astype(object))
    if dictionary:
        geocode = geocode.dictionary_encode()
    table = pa.table(
        {
            "geolevel": pa.array(["Block"] * true.size),
            "geocode": geocode,
            "query": pa.array(["q"] * true.size).dictionary_encode(),
            "cell": pa.array(cells.ravel()[order].astype(np.int32)),
            "value": pa.array((true + noise)[order]),
            "variance": pa.array(np.full(true.size, variance)),
        }
    )
    return table.to_batches(max_chunksize=batch_size), (true + noise) - true


@pytest.mark.parametrize(("shuffle", "dictionary"), [(False, True), (True, False)])
def test_empirical_noise_matches_independent_computation(shuffle, dictionary):
    rng = np.random.default_rng(0)
    blocks = np.array([f"5000100010010{i:03d}" for i in range(400)])
    h = Hierarchy.from_blocks(blocks)
    truth = rng.poisson(2.0, (400, 12)) * (rng.random((400, 12)) < 0.5)
    batches, e = _batches(h, truth, 4.0, rng, shuffle, dictionary, batch_size=777)
    out = nmf_summary(
        batches, h, lambda level, q: sp.csr_matrix(truth) if level == "Block" else None
    )
    rec = out["Block"]["q"]
    assert rec["n"] == truth.size and rec["sd_mean_variance"] == pytest.approx(2.0)
    assert rec["interval90_halfwidth"] == pytest.approx(Z90 * 2.0)
    emp = rec["empirical"]
    assert emp["n"] == truth.size
    assert emp["mean_error"] == pytest.approx(e.mean())
    assert emp["error_variance"] == pytest.approx(np.mean(e**2))
    assert emp["coverage90"] == pytest.approx(np.mean(np.abs(e) <= Z90 * 2.0))
    # 4,800 Gaussian draws: the ratio is within 5 standard errors of 1 (sd ~ 0.02).
    assert emp["variance_ratio"] == pytest.approx(1.0, abs=0.1)


def test_without_truth_only_closed_form():
    rng = np.random.default_rng(1)
    h = Hierarchy.from_blocks(np.array(["5000100010010001", "5000100010010002"]))
    batches, _ = _batches(h, np.ones((2, 3), dtype=int), 9.0, rng, False, False, 100)
    rec = nmf_summary(batches, h)["Block"]["q"]
    assert rec["sd_min"] == rec["sd_max"] == pytest.approx(3.0) and "empirical" not in rec

"""Tests of the accuracy metrics (TVD of JASON (JSR-19-2F) sec. 6.1, MAE, RMSE, bias by size bin)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from censusdp.evaluate.metrics import (
    COUNT_BINS,
    Pairs,
    all_under18_share,
    bin_index,
    error_stats,
    largest_errors,
    occupancy_full_share,
    tvd,
)
from censusdp.evaluate.trials import ErrorAccumulator, integer_quantiles
from profiles import examples


def test_tvd_formula_jason_sec61():
    # TVD = 1 - L1(H_DAS, H_CEF) / (2 POP): L1 = 2 + 1 + 3 = 6, POP = 10 + 5 + 5 = 20.
    p = Pairs.dense(np.array([10, 5, 5]), np.array([8, 6, 8]))
    assert tvd(p) == {"tvd": pytest.approx(1 - 6 / 40), "l1": 6, "pop": 20}
    assert tvd(Pairs.dense(np.array([3, 0]), np.array([3, 0])))["tvd"] == 1.0
    # It can go negative with enough noise (JASON (JSR-19-2F) sec. 6.1 remark).
    assert tvd(Pairs.dense(np.array([1]), np.array([10])))["tvd"] < 0
    assert math.isnan(tvd(Pairs.dense(np.array([0]), np.array([2])))["tvd"])


def test_bins():
    assert [b[0] for b in COUNT_BINS] == ["0", "1-9", "10-99", "100-999", "1000+"]
    np.testing.assert_array_equal(
        bin_index(np.array([0, 1, 9, 10, 99, 100, 999, 1000, 10**7])), [0, 1, 1, 2, 2, 3, 3, 4, 4]
    )


def test_error_stats_by_bin():
    t = np.array([0, 0, 3, 50, 50, 500, 5000])
    r = np.array([1, 0, 1, 52, 47, 510, 4990])
    s = error_stats(Pairs.dense(t, r))
    e = r - t
    assert s["n"] == 7
    assert s["mae"] == pytest.approx(np.abs(e).mean())
    assert s["rmse"] == pytest.approx(np.sqrt((e**2).mean()))
    assert s["bias"] == pytest.approx(e.mean())
    assert s["max_abs_error"] == 10
    assert s["by_bin"]["0"] == pytest.approx(
        {
            "n": 2,
            "sum_abs_error": 1,
            "sum_error": 1,
            "sum_sq_error": 1.0,
            "mae": 0.5,
            "rmse": math.sqrt(0.5),
            "bias": 0.5,
            "max_abs_error": 1,
        }
    )
    assert s["by_bin"]["10-99"]["bias"] == pytest.approx(-0.5)
    assert s["by_bin"]["1000+"]["bias"] == -10
    assert s["by_bin"]["1-9"]["n"] == 1


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 12), st.integers(1, 30))
def test_sparse_pairs_equal_dense(seed, n_rows, n_cols):
    rng = np.random.default_rng(seed)
    t = rng.poisson(0.6, (n_rows, n_cols)) * (rng.random((n_rows, n_cols)) < 0.4)
    r = np.maximum(t + rng.integers(-2, 3, t.shape) * (rng.random(t.shape) < 0.3), 0)
    a = error_stats(Pairs.sparse(sp.csr_matrix(t), sp.csr_matrix(r)))
    b = error_stats(Pairs.dense(t, r))
    bins_a, bins_b = a.pop("by_bin"), b.pop("by_bin")
    for label in bins_a:
        assert bins_a[label] == pytest.approx(bins_b[label], nan_ok=True)
    assert a == pytest.approx(b, nan_ok=True)
    assert tvd(Pairs.sparse(sp.csr_matrix(t), sp.csr_matrix(r))) == pytest.approx(
        tvd(Pairs.dense(t, r)), nan_ok=True
    )


def test_sparse_pairs_n_total_excludes_cells():
    t = sp.csr_matrix(np.array([[1, 0, 0], [0, 0, 2]]))
    r = sp.csr_matrix(np.array([[0, 0, 0], [0, 1, 2]]))
    p = Pairs.sparse(t, r, n_total=4)
    assert p.n == 4 and p.n_zero == 1
    assert error_stats(p)["mae"] == pytest.approx(2 / 4)


def test_largest_errors_order_and_labels():
    t = np.array([[10, 0], [5, 5], [0, 0]])
    r = np.array([[4, 0], [5, 11], [1, 0]])
    out = largest_errors(t, r, np.array(["a", "b", "c"]), k=3, columns=("X", "Y"))
    assert [(o["geocode"], o["variable"], o["error"]) for o in out] == [
        ("a", "X", -6),
        ("b", "Y", 6),
        ("c", "X", 1),
    ]
    # each row also names its place as the Census does
    out = largest_errors(t, r, np.array(["50001", "50003", "50005"]), k=1)
    assert (out[0]["GEOID"], out[0]["NAME"]) == ("50001", "Addison County, Vermont")
    block = largest_errors(np.array([3]), np.array([5]), np.array(["5000100010011001"]), k=1)
    assert block[0]["GEOID"] == "500010001001001" and block[0]["NAME"].startswith("Block 1001, ")


def test_pathology_shares():
    # Van Riper et al. (2020) sec. 3: 100% occupancy = no vacant unit among units with housing.
    o = occupancy_full_share(np.array([0, 4, 4, 10]), np.array([0, 4, 3, 10]))
    assert o == {"n_units": 3, "n_full": 2, "share": pytest.approx(2 / 3)}
    u = all_under18_share(np.array([0, 3, 60, 70]), np.array([0, 0, 0, 5]), min_population=50)
    assert u == {"min_population": 50, "n_units": 2, "n_all_under18": 1, "share": 0.5}
    assert all_under18_share(np.array([0, 3]), np.array([0, 0]))["n_all_under18"] == 1


@settings(max_examples=examples(30), deadline=None)
@given(st.lists(st.integers(-50, 50), min_size=1, max_size=200), st.integers(0, 30))
def test_integer_quantiles_match_inverted_cdf(values, zeros):
    arr = np.asarray(values + [0] * zeros)
    v, c = np.unique(arr, return_counts=True)
    qs = (0.05, 0.25, 0.5, 0.75, 0.95)
    assert integer_quantiles(v, c, qs) == [
        int(np.quantile(arr, q, method="inverted_cdf")) for q in qs
    ]


def test_error_accumulator_summarises_a_table_whose_truth_is_empty():
    """A table whose truth is all zero (P5 where there are no group quarters) has no TVD
    in any trial: NaN, without a warning (which ``filterwarnings = error`` would raise)."""
    acc = ErrorAccumulator()
    for r in ([0, 2], [1, 0]):
        acc.add("P5", "Block", Pairs.dense(np.array([0, 0]), np.array(r)))
    acc.add("P1", "Block", Pairs.dense(np.array([0, 4]), np.array([0, 3])))
    acc.add("P1", "Block", Pairs.dense(np.array([0, 0]), np.array([0, 3])))
    s = acc.summary()
    assert s["P5"]["Block"]["tvd"]["trials"] == 2
    assert all(math.isnan(s["P5"]["Block"]["tvd"][k]) for k in ("mean", "min", "max"))
    assert s["P1"]["Block"]["tvd"] == {"trials": 2, "mean": 0.875, "min": 0.875, "max": 0.875}


def test_error_accumulator_pools_trials():
    rng = np.random.default_rng(0)
    acc = ErrorAccumulator()
    pooled = {b: [] for b in range(5)}
    for _ in range(4):
        t = rng.integers(0, 2000, 300)
        r = t + rng.integers(-5, 6, 300)
        acc.add("m", "L", Pairs(t, r, n_zero=10))
        for b in range(5):
            sel = bin_index(t) == b
            pooled[b].extend((r - t)[sel].tolist())
        pooled[0].extend([0] * 10)
    s = acc.summary()["m"]["L"]
    assert s["tvd"]["trials"] == 4
    for b, (label, _, _) in enumerate(COUNT_BINS):
        arr = np.asarray(pooled[b])
        rec = s["by_bin"][label]
        assert rec["n"] == arr.size
        assert rec["interval90"] == [
            int(np.quantile(arr, 0.05, method="inverted_cdf")),
            int(np.quantile(arr, 0.95, method="inverted_cdf")),
        ]
        assert rec["abs_q90"] == int(np.quantile(np.abs(arr), 0.9, method="inverted_cdf"))
        assert rec["mean"] == pytest.approx(arr.mean())
        assert rec["sd"] == pytest.approx(arr.std())

"""Appendix A's information-theoretic predictions for Dinur-Nissim reconstruction.

JASON (JSR-19-2F) sec. 4.5 and App. A: how many random subset-sum queries carry ``n``
bits of information about an ``n``-bit database, noiseless and under noise of a given
variance; and our own large-``m`` prediction of what least squares then rounding
recovers under Gaussian noise. The experiments report these beside their measurements.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from scipy.special import ndtr

from censusdp.errors import CensusDPError

__all__ = ["information_bits", "information_predictions", "ls_gaussian_prediction"]


def _info_noiseless(r: float, n: int) -> float:
    """Eq. (A-8): ``I(C_bar) = r/2 log2(pi e n / 8) + 1/2 log2(1 + r)`` bits from r random queries."""
    return 0.5 * r * math.log2(math.pi * math.e * n / 8.0) + 0.5 * math.log2(1.0 + r)


def _info_noisy(r: float, n: int, var: float) -> float:
    """Eq. (A-15), extended to ``r > n``: ``1/2 log2 det(I + C / sigma^2)``.

    ``C = W'W / 4`` has (within the approximation of eq. (A-7)) ``min(r, n) - 1``
    eigenvalues ``max(r, n) / 16`` and one ``max(r, n) (min(r, n) + 1) / 16``; for
    ``r <= n`` this is exactly eq. (A-15).
    """
    lo, hi = min(r, n), max(r, n)
    return 0.5 * (lo - 1.0) * math.log2(1.0 + hi / (16.0 * var)) + 0.5 * math.log2(
        1.0 + hi * (lo + 1.0) / (16.0 * var)
    )


def _smallest_r(info: Callable[[float], float], target: float) -> int:
    hi = 1
    while info(hi) < target:
        hi *= 2
        if hi > 1 << 62:
            raise CensusDPError("information never reaches n bits")
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if info(mid) >= target:
            hi = mid
        else:
            lo = mid
    return hi


def information_predictions(
    n: int, noise_variance: float = 0.0, queries: int | None = None
) -> dict[str, Any]:
    """Appendix A's information-theoretic predictions for an ``n``-bit database.

    JASON (JSR-19-2F) sec. 4.5 and App. A: (1) noiseless, about ``2n / log2 n`` queries determine
    the database (A.6); (2) with noise variance ``sigma^2 < n/48`` no more than ``~n``
    queries are needed (A.8); (3) for ``sigma^2 >> n/16`` about ``16 sigma^2`` queries
    (sec. 4.5). Eq. (A-16) gives ``I_net ~ n r log2(e) / (16 sigma^2)``, so ``I_net >= n``
    needs ``r >= 16 sigma^2 ln 2`` (the appendix prints ``16 sigma^2 / ln 2``; both are
    reported). ``queries_needed_information`` solves ``I(r) >= n`` with eq. (A-8)
    (noiseless) or (A-15) (noisy; extended to ``r > n``). These are necessary
    information counts for *some* decoder, not the behaviour of least squares.

    Args:
        n: number of bits.
        noise_variance: per-query noise variance ``sigma_N^2`` (0 = noiseless).
        queries: if given, also report the information gathered by that many queries.

    Returns:
        a JSON-ready dict.
    """
    if n < 2:
        raise CensusDPError(f"n must be >= 2; got n={n}")
    if noise_variance < 0 or not math.isfinite(noise_variance):
        raise CensusDPError(f"noise_variance must be finite and >= 0; got {noise_variance}")
    out: dict[str, Any] = {
        "n": n,
        "noise_variance": noise_variance,
        "linear_algebra_queries": n,
        "adaptive_pairs_queries": 0.75 * n,
        "noiseless_min_queries_2n_over_log2n": 2.0 * n / math.log2(n),
        "noiseless_random_queries_A8": _smallest_r(lambda r: _info_noiseless(r, n), n),
        "small_noise_threshold_variance_n_over_48": n / 48.0,
        "large_noise_variance_n_over_16": n / 16.0,
    }
    if noise_variance > 0:
        var = noise_variance
        out["regime"] = (
            "small noise (sigma^2 < n/48): <= n queries suffice"
            if var < n / 48.0
            else ("large noise (sigma^2 >> n/16)" if var > n / 16.0 else "intermediate noise")
        )
        out["queries_needed_information"] = _smallest_r(lambda r: _info_noisy(r, n, var), n)
        out["queries_16_sigma2"] = 16.0 * var
        out["queries_16_sigma2_ln2_A16"] = 16.0 * var * math.log(2.0)
        out["queries_16_sigma2_over_ln2_as_printed"] = 16.0 * var / math.log(2.0)
    else:
        out["regime"] = "noiseless"
        out["queries_needed_information"] = out["noiseless_random_queries_A8"]
    if queries is not None:
        bits = information_bits(n, queries, noise_variance)
        out["queries"] = queries
        out["information_bits"] = bits
        out["information_over_n"] = bits / n
    return out


def information_bits(n: int, queries: int, noise_variance: float = 0.0) -> float:
    """Bits of information about ``n`` bits in ``queries`` random 0/1 queries (App. A).

    Eq. (A-15) with noise (extended to ``queries > n``), eq. (A-8) without (at most
    ``n`` queries count).
    """
    if noise_variance > 0:
        return _info_noisy(queries, n, noise_variance)
    return _info_noiseless(min(queries, n), n)


def ls_gaussian_prediction(n: int, queries: int, noise_variance: float) -> float:
    """Predicted fraction recovered by *unconstrained* least squares then rounding.

    Our own large-``m`` approximation (not in the seeds), a reference for the noisy
    experiments: for ``m > n`` random 0/1 queries, ``x_hat = d + (Q'Q)^-1 Q'z`` and the
    mean of ``[(Q'Q)^-1]_ii`` is ``4 / (m - n)`` (Marchenko-Pastur, bulk ``m/4``), so a bit
    is wrong when its error exceeds 1/2: ``P(correct) ~ Phi(sqrt(m - n) / (4 sigma))``.
    The box constraint makes the real attack somewhat better when this is far below 1.
    """
    if queries <= n:
        return float("nan")
    if noise_variance <= 0:
        return 1.0
    return float(ndtr(math.sqrt(queries - n) / (4.0 * math.sqrt(noise_variance))))

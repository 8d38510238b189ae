"""Mechanism-aware posterior of a proportion (Gong 2022, sec. 4): exactness and samplers.

The exact Beta-mixture posterior is checked against an independent brute force: mpmath
quadrature over theta of prior x sum_k f(X - k) Binomial(k; n, theta).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special, stats

from censusdp.errors import CensusDPError
from censusdp.infer import (
    BetaPrior,
    NoiseLaw,
    NoisyCount,
    abc_draws,
    exact_posterior,
    gibbs_draws,
    infer_proportion,
    naive_posterior,
)
from censusdp.privacy.accounting import rho_from_epsilon
from censusdp.privacy.mechanisms import DiscreteGaussian, Geometric


def _brute(counts, law: NoiseLaw, prior: BetaPrior, dps: int = 30):
    """Unnormalised posterior density of theta and its normaliser, by mpmath."""
    mpmath.mp.dps = dps
    p = mpmath.mpf(law.parameter.numerator) / law.parameter.denominator

    def kern(z):
        z = mpmath.mpf(z)
        if law.law in ("laplace", "geometric"):
            return mpmath.exp(-abs(z) / p)
        return mpmath.exp(-(z * z) / (2 * p))

    # per count, the coefficients f(X - k) C(n, k) of theta^k (1 - theta)^(n - k)
    coef = [
        [kern(mpmath.mpf(c.noisy) - k) * mpmath.binomial(c.n, k) for k in range(c.n + 1)]
        for c in counts
    ]

    def dens(t):
        out = t ** (prior.a - 1) * (1 - t) ** (prior.b - 1)
        r = t / (1 - t) if t < 1 else mpmath.inf
        for c, cf in zip(counts, coef, strict=True):
            out *= (1 - t) ** c.n * mpmath.polyval(cf[::-1], r) if t < 1 else cf[-1]
        return out

    z = mpmath.quad(dens, [0, 0.5, 1])
    return dens, z


CASES = [
    # (law, parameter kwargs, counts, prior)
    ("discrete-gaussian", {"rho": "1/2"}, [NoisyCount(20, 3)], BetaPrior()),
    ("discrete-gaussian", {"rho": "1/10"}, [NoisyCount(25, -2)], BetaPrior(2.0, 5.0)),
    ("gaussian", {"scale": "3"}, [NoisyCount(15, 16.5)], BetaPrior()),
    ("gaussian", {"rho": "2"}, [NoisyCount(30, 12.25)], BetaPrior(0.5, 0.5)),
    ("laplace", {"epsilon": "1/2"}, [NoisyCount(20, 4.75)], BetaPrior()),
    ("laplace", {"scale": "2"}, [NoisyCount(12, 14)], BetaPrior(3.0, 1.0)),
    ("geometric", {"epsilon": "1"}, [NoisyCount(20, 0)], BetaPrior()),
    ("geometric", {"scale": "5/2"}, [NoisyCount(18, 9)], BetaPrior(1.5, 2.5)),
    ("discrete-gaussian", {"rho": "1/5"}, [NoisyCount(12, 4), NoisyCount(9, 1)], BetaPrior()),
    ("laplace", {"epsilon": "1"}, [NoisyCount(10, 2.5), NoisyCount(14, 9.0)], BetaPrior(2.0, 2.0)),
]


@pytest.mark.parametrize("law_name,kw,counts,prior", CASES)
def test_exact_posterior_matches_mpmath_quadrature(law_name, kw, counts, prior) -> None:
    """Mean, sd and both 95% quantiles agree with brute-force quadrature to 1e-9."""
    law = NoiseLaw.from_args(law_name, **kw)
    mix = exact_posterior(counts, law, prior)
    dens, z = _brute(counts, law, prior)
    mean = mpmath.quad(lambda t: t * dens(t), [0, 0.5, 1]) / z
    m2 = mpmath.quad(lambda t: t * t * dens(t), [0, 0.5, 1]) / z
    assert mix.mean() == pytest.approx(float(mean), abs=1e-10)
    assert mix.sd() == pytest.approx(math.sqrt(float(m2 - mean**2)), abs=1e-9)
    lo, hi = mix.interval(0.95)
    assert float(mpmath.quad(dens, [0, lo]) / z) == pytest.approx(0.025, abs=1e-9)
    assert float(mpmath.quad(dens, [0, hi]) / z) == pytest.approx(0.975, abs=1e-9)
    # the density integrates like the brute force one, pointwise
    for t in (0.05, 0.2, 0.5):
        assert float(mix.pdf(t)[0]) == pytest.approx(float(dens(t) / z), rel=1e-8)


def test_true_count_posterior_is_brute_force() -> None:
    """P(k | X) prop. to f(X - k) x Beta-Binomial(k; n, a, b), summed by hand."""
    law = NoiseLaw.from_args("discrete-gaussian", rho="1/4")
    prior = BetaPrior(2.0, 3.0)
    n, x = 10, 6
    mix = exact_posterior(NoisyCount(n, x), law, prior)
    k = np.arange(n + 1)
    bb = stats.betabinom(n, prior.a, prior.b).pmf(k)
    w = np.exp(-((x - k) ** 2) * 0.25 / 2) * bb
    w /= w.sum()
    np.testing.assert_allclose(mix.w, w[mix.k.astype(int)], rtol=1e-12)
    s = mix.count_summary()
    assert s["mean"] == pytest.approx(float(np.dot(k, w)), rel=1e-12)
    cdf = np.cumsum(w)
    assert s["ci95"] == [int(np.argmax(cdf >= 0.025)), int(np.argmax(cdf >= 0.975))]


def test_noise_vanishing_gives_the_naive_answer() -> None:
    """With almost no noise the mechanism-aware posterior is the naive Beta(a + X, b + n - X)."""
    law = NoiseLaw.from_args("discrete-gaussian", rho="1000000")
    r = infer_proportion(NoisyCount(40, 13), law, BetaPrior(1.0, 2.0))
    assert r["mean"] == pytest.approx(r["naive"]["mean"], abs=1e-12)
    np.testing.assert_allclose(r["ci95"], r["naive"]["ci95"], atol=1e-10)
    assert r["naive"]["mean"] == pytest.approx(14 / 43, abs=1e-15)


def test_noise_widens_the_interval_and_naive_is_wrong_near_zero() -> None:
    """Gong 2022 sec. 3-4: the naive analysis understates uncertainty (a small count, rho 0.1)."""
    law = NoiseLaw.from_args("discrete-gaussian", rho="1/10")
    r = infer_proportion(NoisyCount(30, -1), law)
    assert r["naive"]["clipped"] is True
    w_exact = r["ci95"][1] - r["ci95"][0]
    w_naive = r["naive"]["ci95"][1] - r["naive"]["ci95"][0]
    assert w_exact > 1.5 * w_naive


def test_integer_shifts_make_laplace_and_geometric_agree() -> None:
    """For an integer X the likelihood of integer k is exp(-eps |X - k|) under both laws."""
    a = infer_proportion(NoisyCount(25, 7), NoiseLaw.from_args("laplace", epsilon="0.7"))
    b = infer_proportion(NoisyCount(25, 7), NoiseLaw.from_args("geometric", epsilon="0.7"))
    assert a["mean"] == pytest.approx(b["mean"], rel=1e-14)
    c = infer_proportion(NoisyCount(25, 7.5), NoiseLaw.from_args("laplace", epsilon="0.7"))
    assert abs(c["mean"] - a["mean"]) > 1e-3


def test_large_n_is_fast_and_concentrates() -> None:
    """n = 10^6: the exact sum runs and the interval is the binomial-plus-noise width."""
    law = NoiseLaw.from_args("gaussian", scale="100")
    r = infer_proportion(NoisyCount(1_000_000, 300_000), law)
    sd = math.sqrt(0.3 * 0.7 / 1e6 + (100 / 1e6) ** 2)
    assert r["mean"] == pytest.approx(0.3, abs=1e-6)
    assert r["ci95"][1] - r["ci95"][0] == pytest.approx(2 * 1.959964 * sd, rel=1e-3)


# -- parameter mapping -------------------------------------------------------------------


def test_parameter_mapping() -> None:
    """--scale/--rho/--epsilon map to each law as documented in censusdp.infer._noise."""
    dg = NoiseLaw.from_args("discrete-gaussian", rho="1/2")
    assert dg.parameter == Fraction(2) and dg.rho == pytest.approx(0.5)
    assert NoiseLaw.from_args("gaussian", scale="3").parameter == Fraction(9)
    e = NoiseLaw.from_args("discrete-gaussian", epsilon="17.14")
    assert e.parameter == 1 / rho_from_epsilon(Fraction("17.14"), Fraction("1e-10"))
    assert NoiseLaw.from_args("geometric", epsilon="1/4").parameter == Fraction(4)
    assert NoiseLaw.from_args("laplace", scale="3/2").epsilon == pytest.approx(2 / 3)
    lr = NoiseLaw.from_args("laplace", rho="1/2")  # eps = sqrt(2 rho) = 1
    assert float(lr.parameter) == pytest.approx(1.0, rel=1e-15)
    d = dg.describe()
    assert d["sigma_squared"] == 2.0 and d["given"] == {"rho": "1/2"}
    assert "bounded" in d["convention"]
    g = NoiseLaw.from_args("geometric", epsilon="1").describe()
    assert g["scale_b"] == 1.0 and g["epsilon"] == 1.0 and g["rho"] == 0.5


def test_kernels_match_the_release_mechanisms() -> None:
    """The likelihood kernels are the release mechanisms' pmfs up to a constant."""
    z = np.arange(-12, 13)
    dg = NoiseLaw.from_args("discrete-gaussian", rho="1/3")  # sigma^2 = 3
    ref = DiscreteGaussian(Fraction(3)).log_pmf(z)
    np.testing.assert_allclose(dg.log_density(z), ref, atol=1e-12)
    geo = NoiseLaw.from_args("geometric", epsilon="1/2")
    np.testing.assert_allclose(
        geo.log_density(z), Geometric.from_epsilon("1/2").log_pmf(z), atol=1e-12
    )
    assert dg.variance == pytest.approx(DiscreteGaussian(Fraction(3)).variance, rel=1e-12)
    assert geo.variance == pytest.approx(Geometric.from_epsilon("1/2").variance, rel=1e-12)


@pytest.mark.parametrize(
    "law_name,kw",
    [
        ("discrete-gaussian", {"rho": "1/5"}),
        ("geometric", {"epsilon": "1/2"}),
        ("laplace", {"scale": "2"}),
        ("gaussian", {"scale": "2"}),
    ],
)
def test_noise_samplers_accept_true_scale_and_reject_30_percent_off(law_name, kw) -> None:
    """KS (continuous) or chi-square (discrete) goodness of fit, fixed seed, alpha = 1e-4."""
    law = NoiseLaw.from_args(law_name, **kw)
    rng = np.random.default_rng(11)
    z = law.sample(40_000, rng)
    wrong = NoiseLaw(
        law.law,
        law.parameter * Fraction(13, 10)
        if law.law != "gaussian"
        else law.parameter * Fraction(169, 100),
    )

    def pvalue(model: NoiseLaw) -> float:
        if not model.discrete:
            cdf = (
                stats.laplace(scale=float(model.parameter)).cdf
                if model.law == "laplace"
                else stats.norm(scale=math.sqrt(float(model.parameter))).cdf
            )
            return float(stats.kstest(z, cdf).pvalue)
        support = np.arange(-60, 61)
        p = np.exp(model.log_density(support))
        obs = np.array(
            [np.sum(z <= -50)] + [np.sum(z == s) for s in range(-49, 50)] + [np.sum(z >= 50)]
        )
        exp = np.concatenate(
            [
                [p[support <= -50].sum()],
                p[(support > -50) & (support < 50)],
                [p[support >= 50].sum()],
            ]
        )
        keep = exp * z.size >= 5
        o = np.concatenate([obs[keep], [obs[~keep].sum()]])
        e = np.concatenate([exp[keep], [exp[~keep].sum()]]) * z.size
        e *= o.sum() / e.sum()
        return float(stats.chisquare(o, e).pvalue)

    assert pvalue(law) > 1e-4
    assert pvalue(wrong) < 1e-4


# -- samplers agree with the exact answer --------------------------------------------------


def _ks_distance(sample: np.ndarray, cdf) -> float:
    x = np.sort(sample)
    f = cdf(x)
    n = x.size
    return float(max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n)))


@pytest.mark.parametrize("simulate", [False, True])
def test_abc_draws_follow_the_exact_posterior(simulate: bool) -> None:
    """ABC (kernel, and exact match of the simulated mechanism) vs the exact CDF.

    Kolmogorov-Smirnov distance below 2.23 / sqrt(m) (alpha = 1e-4 for exact draws);
    the naive posterior, a plausible wrong answer, fails the same bound.
    """
    law = NoiseLaw.from_args("discrete-gaussian", rho="1/8")
    counts = [NoisyCount(30, 2)]
    m = 20_000
    sample, info = abc_draws(counts, law, draws=m, seed=5, simulate=simulate)
    mix = exact_posterior(counts, law)
    bound = 2.23 / math.sqrt(m)
    assert _ks_distance(sample, mix.cdf) < bound
    naive = naive_posterior(counts)
    al = 1 + 2
    naive_cdf = stats.beta(al, 1 + 30 - 2).cdf
    assert naive["mean"] == pytest.approx(3 / 32)
    assert _ks_distance(sample, naive_cdf) > 3 * bound
    assert 0 < info["acceptance_rate"] < 1 and info["seed"] == 5


def test_abc_and_gibbs_agree_with_exact_for_several_counts() -> None:
    """Three counts sharing theta (the exact answer convolves the per-count sums)."""
    law = NoiseLaw.from_args("laplace", epsilon="1/2")
    counts = [NoisyCount(15, 3.2), NoisyCount(22, 0.4), NoisyCount(9, 5.0)]
    mix = exact_posterior(counts, law, BetaPrior(1.0, 3.0))
    dens, z = _brute(counts, law, BetaPrior(1.0, 3.0), dps=30)
    mean = mpmath.quad(lambda t: t * dens(t), [0, 0.5, 1]) / z
    assert mix.mean() == pytest.approx(float(mean), abs=1e-10)
    m = 20_000
    abc, _ = abc_draws(counts, law, BetaPrior(1.0, 3.0), draws=m, seed=1)
    assert _ks_distance(abc, mix.cdf) < 2.23 / math.sqrt(m)
    gibbs, info = gibbs_draws(counts, law, BetaPrior(1.0, 3.0), draws=8_000, seed=2, thin=4)
    # thinned Gibbs draws are nearly independent; allow twice the iid bound
    assert _ks_distance(gibbs, mix.cdf) < 2 * 2.23 / math.sqrt(8_000)
    assert abs(gibbs.mean() - mix.mean()) < 5 * mix.sd() / math.sqrt(8_000 / 4)
    assert info["burn_in"] == 500


def test_infer_proportion_methods_report_seed_and_agree() -> None:
    law = NoiseLaw.from_args("geometric", epsilon="1/2")
    exact = infer_proportion(NoisyCount(40, 10), law, method="exact")
    abc = infer_proportion(NoisyCount(40, 10), law, method="abc", draws=20_000, seed=3)
    assert abc["seed"] == 3 and abc["sampler"]["method"] == "abc"
    assert abc["mean"] == pytest.approx(exact["mean"], abs=5 * abc["mc_standard_error_of_mean"])
    np.testing.assert_allclose(abc["ci95"], exact["ci95"], atol=0.01)


# -- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: NoiseLaw.from_args("poisson", rho=1), "must be one of"),
        (lambda: NoiseLaw.from_args("gaussian"), "exactly one of"),
        (lambda: NoiseLaw.from_args("gaussian", rho=1, scale=2), "exactly one of"),
        (lambda: NoiseLaw.from_args("laplace", epsilon="-1"), "epsilon is -1; it must be positive"),
        (lambda: NoiseLaw.from_args("gaussian", rho="abc"), "rho must be a number"),
        (lambda: NoisyCount(0, 3), "n is 0"),
        (lambda: NoisyCount(5, float("nan")), "finite"),
        (lambda: BetaPrior(0.0, 1.0), "prior a is 0.0"),
        (
            lambda: exact_posterior(NoisyCount(5, 2.5), NoiseLaw.from_args("geometric", epsilon=1)),
            "releases integers",
        ),
        (
            lambda: abc_draws(
                NoisyCount(5, 2.5), NoiseLaw.from_args("gaussian", rho=1), simulate=True
            ),
            "discrete law",
        ),
        (
            lambda: abc_draws(
                NoisyCount(500, 250),
                NoiseLaw.from_args("gaussian", rho=10**6),
                draws=10,
                max_proposals=1000,
                batch=100,
            ),
            "ABC accepted",
        ),
    ],
)
def test_invalid_inputs(call, match: str) -> None:
    with pytest.raises(CensusDPError, match=match):
        call()


@settings(derandomize=True, max_examples=40, deadline=None)
@given(
    n=st.integers(1, 60),
    x=st.integers(-10, 70),
    rho=st.sampled_from(["1/20", "1/4", "1", "4"]),
    a=st.sampled_from([0.5, 1.0, 2.0]),
)
def test_mixture_is_a_distribution(n: int, x: int, rho: str, a: float) -> None:
    """Weights sum to 1, the CDF runs 0 -> 1 monotonically, quantiles invert it."""
    mix = exact_posterior(
        NoisyCount(n, x), NoiseLaw.from_args("discrete-gaussian", rho=rho), BetaPrior(a, 1.0)
    )
    assert mix.w.sum() == pytest.approx(1.0, abs=1e-12)
    grid = np.linspace(0, 1, 101)
    c = mix.cdf(grid)
    assert c[0] == pytest.approx(0.0, abs=1e-12) and c[-1] == pytest.approx(1.0, abs=1e-12)
    assert np.all(np.diff(c) >= -1e-13)
    for p in (0.025, 0.5, 0.975):
        assert float(mix.cdf(mix.quantile(p))[0]) == pytest.approx(p, abs=1e-10)
    lo, hi = mix.interval()
    assert 0.0 <= lo < mix.mean() < hi <= 1.0
    assert special.betainc(1.0, 1.0, 0.5) == 0.5


@pytest.mark.parametrize(
    "n,x,law_kw,prior",
    [
        (20_000, 100, ("gaussian", {"scale": "3"}), BetaPrior(50.0, 2.0)),
        (20_000, 19_990, ("laplace", {"epsilon": "2"}), BetaPrior(0.3, 40.0)),
        (5_000, -40, ("discrete-gaussian", {"rho": "1/100"}), BetaPrior(1.0, 1.0)),
    ],
)
def test_window_drops_nothing_that_matters(n, x, law_kw, prior) -> None:
    """The likelihood window (large n) gives the full-range sum over k = 0..n.

    The reference sums every k with numpy in log space, independently of the library;
    the priors here pull hard against the data, the case the window's slack is for.
    """
    law = NoiseLaw.from_args(law_kw[0], **law_kw[1])
    mix = exact_posterior(NoisyCount(n, x), law, prior)
    assert mix.k.size < n  # the window did cut
    k = np.arange(n + 1, dtype=np.float64)
    logw = (
        law.log_kernel(x - k)
        + special.gammaln(n + 1)
        - special.gammaln(k + 1)
        - special.gammaln(n - k + 1)
        + special.betaln(prior.a + k, prior.b + n - k)
    )
    w = np.exp(logw - logw.max())
    w /= w.sum()
    mean = float(np.dot(w, prior.a + k) / (prior.a + prior.b + n))
    assert mix.mean() == pytest.approx(mean, rel=1e-12)
    assert float(np.dot(mix.w, mix.k)) == pytest.approx(float(np.dot(w, k)), rel=1e-12, abs=1e-12)


def test_state_sized_subgroup_is_fast() -> None:
    """n = 39 million (a large state): the window keeps the sum to the likely true counts."""
    import time

    law = NoiseLaw.from_args("gaussian", scale="1000")
    t = time.perf_counter()
    r = infer_proportion(NoisyCount(39_000_000, 15_600_000), law)
    assert time.perf_counter() - t < 30
    sd = math.sqrt(0.4 * 0.6 / 39e6 + (1000 / 39e6) ** 2)
    assert r["mean"] == pytest.approx(0.4, abs=1e-7)
    assert r["ci95"][1] - r["ci95"][0] == pytest.approx(2 * 1.959964 * sd, rel=1e-3)

"""Every noisy measurement of a ``pl94-2020`` release has production's variance for its query.

Production (``programs/engine/primitives.py``, ``engine_utils.py``) draws discrete
Gaussian noise with ``sigma^2 = 1 / rho_q`` per query, ``rho_q`` the global rho times the
geolevel's share times the query's share, global rho ``1 / global_scale^2`` with
``global_scale = 339/542`` (``configs/production/pl94/person_default.ini``) and the
geolevel shares of ``configs/production/pl94/person_US.ini``. Those numbers are written out
here; the query shares are read from the preset file as data (not through censusdp's
budget code). The unit run uses rho ``(3379/12343)^2``.
"""

from __future__ import annotations

import tomllib
from fractions import Fraction
from importlib import resources

import numpy as np
import pytest

from censusdp.io.budget_files import load_preset
from censusdp.io.nmf_files import read_nmf_rows
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release.options import ReleaseOptions
from censusdp.release.pipeline import run_release
from synth import block_codes, make_cef, write_cef

GLOBAL_RHO = 1 / Fraction(339, 542) ** 2
# person_US.ini: geolevel_budget_prop, from the US down to the block
GEOLEVEL_PROP = dict(
    zip(
        ("US", "State", "County", "Tract", "BlockGroup", "Block"),
        (Fraction(n, 4099) for n in (104, 1440, 447, 687, 1256, 165)),
        strict=True,
    )
)
UNIT_RHO = Fraction(3379, 12343) ** 2


def _discrete_gaussian_variance(sigma2: float) -> float:
    """``sum_k k^2 exp(-k^2 / (2 sigma^2)) / sum_k exp(-k^2 / (2 sigma^2))``, by direct sum."""
    half = int(40 * np.sqrt(sigma2)) + 10
    k = np.arange(-half, half + 1, dtype=np.float64)
    w = np.exp(-(k * k) / (2 * sigma2))
    return float(np.sum(k * k * w) / np.sum(w))


def _query_shares(preset: str) -> dict[tuple[str, str], Fraction]:
    text = resources.files("censusdp.privacy.presets").joinpath(f"{preset}.toml").read_text()
    doc = tomllib.loads(text)
    return {
        (g["name"], q): Fraction(share)
        for g in doc["geolevels"]
        for q, share in g["queries"].items()
    } | {("_geolevel", g["name"]): Fraction(g["share"]) for g in doc["geolevels"]}


# the 50 states and DC, production's national run: with all of them the US is measured
# here too (an input of fewer leaves it to the nation, docs/spine.md)
NATION_FIPS = [1, 2, 4, 5, 6, 8, 9, 10, 11, 12, 13, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24]
NATION_FIPS += [25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 44]
NATION_FIPS += [45, 46, 47, 48, 49, 50, 51, 53, 54, 55, 56]


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    d = tmp_path_factory.mktemp("nmfvar")
    assert len(NATION_FIPS) == 51
    codes = [f"{s:02d}{c[2:]}" for s in NATION_FIPS for c in block_codes(1, 1, 1, 4)]
    persons, units = make_cef(np.random.default_rng(8), codes)
    assert len({g[:2] for g in units["geocode"].tolist()}) == 51  # every state has units
    write_cef(d / "cef", persons, units)
    run_release(
        d / "cef",
        d / "run",
        ReleaseBudget(load_preset("pl94-2020"), load_preset("pl94-2020-units")),
        ReleaseOptions(seed=2, postprocess="none"),
    )
    return d / "run"


def _variances(path) -> dict[tuple[str, str], np.ndarray]:
    t = read_nmf_rows(path, columns=["geolevel", "query", "variance"]).to_pydict()
    keys = list(zip(t["geolevel"], t["query"], strict=True))
    var = np.asarray(t["variance"], dtype=np.float64)
    out: dict[tuple[str, str], list[float]] = {}
    for k, v in zip(keys, var, strict=True):
        out.setdefault(k, []).append(v)
    return {k: np.asarray(v) for k, v in out.items()}


def test_every_person_measurement_has_variance_one_over_rho_q(measured):
    shares = _query_shares("pl94-2020")
    queries = {k for k in shares if k[0] != "_geolevel"}
    got = _variances(measured / "noisy_measurements.parquet")
    assert set(got) == queries and len(queries) == 65  # every level-query, none else
    for (level, query), var in got.items():
        rho_q = GLOBAL_RHO * GEOLEVEL_PROP[level] * shares[(level, query)]
        assert shares[("_geolevel", level)] == GEOLEVEL_PROP[level]
        sigma2 = float(1 / rho_q)
        # the NMF states the exact variance of the discrete Gaussian with sigma^2 = 1/rho_q
        want = _discrete_gaussian_variance(sigma2)
        np.testing.assert_allclose(var, want, rtol=1e-9, err_msg=f"{level} {query}")
        assert abs(want / sigma2 - 1) < 1e-7


def test_every_unit_measurement_has_variance_one_over_rho_q(measured):
    shares = _query_shares("pl94-2020-units")
    got = _variances(measured / "noisy_measurements_units.parquet")
    assert {k[0] for k in got} == set(GEOLEVEL_PROP) and {k[1] for k in got} == {"detailed"}
    for (level, query), var in got.items():
        rho_q = UNIT_RHO * shares[("_geolevel", level)] * shares[(level, query)]
        want = _discrete_gaussian_variance(float(1 / rho_q))
        np.testing.assert_allclose(var, want, rtol=1e-9, err_msg=level)

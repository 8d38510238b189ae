"""Disclosure risk of a release configuration for every person of a census (Kazan & Reiter (2022) sec. 4).

For a budget (e.g. the ``pl94-2020`` preset) this takes the zCDP parameter of the
detailed query (HHGQ x VOTINGAGE x HISPANIC x CENRACE) at the lowest geolevel
(``rho_1``, block) and at its parent (``rho_2``, block group), and for every person who
is unique in their block on the detailed cell computes:

* the one-level measures of :mod:`censusdp.risk.one_level` (the same for everyone:
  they depend only on ``rho_1`` and the prior);
* the exact two-level measures of :func:`censusdp.risk.hierarchical.two_level_risk`,
  which depend on the person's block-group count ``xi_2`` and on ``d``, the number of
  other blocks in the block group;
* the realised posterior and ``R'(x*)`` under one simulated release of the detailed
  query (seeded noise on every block and block-group cell involved), with and
  without the block-group information.

Blocks are those present in the input (with people or housing units). A census also
measures blocks with neither; leaving them out makes ``d`` smaller, which can only
help the intruder, so the two-level figures are conservative.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
from scipy.special import expit

from censusdp.data.schema import get_schema
from censusdp.errors import ConfigError
from censusdp.privacy.mechanisms import DiscreteGaussian
from censusdp.privacy.randomness import experiment_generator
from censusdp.progress import say, task
from censusdp.risk._noise import NoiseModel, check_probability, sum_of_discrete_gaussians
from censusdp.risk.hierarchical import (
    DecisionRule,
    HierarchicalModel,
    _sample_pmf,
    saturation_others,
    two_level_log_odds,
    two_level_risk,
)
from censusdp.risk.one_level import OneLevelRisk, one_level_risk, posterior

__all__ = [
    "DEFAULT_PRIORS",
    "Intruder",
    "ReleaseRisk",
    "check_noise_law",
    "detailed_rhos",
    "release_risk",
    "sweep_risk",
]

DEFAULT_PRIORS: tuple[float, ...] = (0.5, 0.2, 0.1, 0.02)
"""The four intruders of Kazan & Reiter (2022) sec. 4.2 (p = 1/2, 1/5, 1/10, 1/50)."""

_QUANTILES = (0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0)


@dataclass(frozen=True)
class Intruder:
    """Who attacks: the priors reported, the prior of the two-level and per-person
    results, and how the intruder decides (Kazan & Reiter (2022) sec. 4.2).

    Attributes:
        priors: one-level priors to report (each strictly between 0 and 1).
        primary_prior: the prior for the two-level and per-person results.
        rule: two-level decision rule (default exact posterior, strict ``> 1/2``).

    Raises:
        CensusDPError: on construction, for a prior outside ``(0, 1)``.
    """

    priors: Sequence[float] = DEFAULT_PRIORS
    primary_prior: float = 0.5
    rule: DecisionRule = field(default_factory=DecisionRule)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "primary_prior", check_probability(self.primary_prior, "primary_prior")
        )
        object.__setattr__(
            self, "priors", tuple(check_probability(p, "priors") for p in self.priors)
        )


def check_noise_law(noise_law: str) -> None:
    """Raise ``ConfigError`` unless ``noise_law`` is ``"release"`` or ``"paper"``."""
    if noise_law not in ("release", "paper"):
        raise ConfigError(f"noise_law must be 'release' or 'paper', got {noise_law!r}")


def detailed_rhos(
    budget: object, query: str = "detailed", *, noise_law: str = "release"
) -> tuple[str, str, Fraction, Fraction]:
    """``(block level, parent level, rho_1, rho_2)`` of ``query`` at the two lowest geolevels.

    The risk computations (Kazan & Reiter 2022) parameterise a discrete Gaussian by
    ``rho`` with ``sigma^2 = 1 / (2 rho)`` (a sensitivity-1 count). With
    ``noise_law="release"`` (the default) the returned ``rho`` is the one that gives
    the noise the release really adds: ``1 / (2 sigma^2)`` of the budget's planned
    mechanism, so under bounded neighbours (``sigma^2 = 1 / rho_q``) it is
    ``rho_q / 2``. ``noise_law="paper"`` returns the budget's ``rho_q`` itself, the
    paper's convention (its Tables 3 and 4 read ``rho_1 ~= 0.099`` off the 2020
    allocation this way).

    Args:
        budget: a :class:`censusdp.privacy.budget.Budget` (zCDP).
        query: the query measured at both levels.
        noise_law: ``"release"`` or ``"paper"``.

    Raises:
        ConfigError: if the budget is not zCDP or does not measure ``query`` at both levels.
    """
    check_noise_law(noise_law)
    if getattr(budget, "privacy_measure", None) != "zCDP":
        raise ConfigError(
            f"risk needs a zCDP (discrete Gaussian) budget; "
            f"{getattr(budget, 'name', budget)!r} is {getattr(budget, 'privacy_measure', '?')}"
        )
    levels = sorted(budget.geolevels, key=lambda g: g[1])  # type: ignore[attr-defined]
    if len(levels) < 2:
        raise ConfigError("the budget needs at least two geolevels")
    low, parent = levels[-1][0], levels[-2][0]
    found: dict[str, Fraction] = {}
    for m in budget.measurements():  # type: ignore[attr-defined]
        if m.query == query and m.geolevel in (low, parent):
            if noise_law == "paper":
                found[m.geolevel] = Fraction(m.rho)
            else:
                found[m.geolevel] = 1 / (2 * Fraction(m.mechanism.sigma_squared))
    for lvl in (low, parent):
        if lvl not in found:
            raise ConfigError(
                f"budget {getattr(budget, 'name', '?')!r} does not measure query {query!r} "
                f"at geolevel {lvl!r}"
            )
    return low, parent, found[low], found[parent]


@dataclass(frozen=True)
class ReleaseRisk:
    """Risk of one release configuration for every person unique in their block.

    Attributes:
        rho1: zCDP of the detailed query per block.
        rho2: zCDP of the detailed query per block group.
        priors: intruder priors evaluated at one level.
        primary_prior: the prior used for the two-level and per-person results.
        one_level: one-level risk per prior.
        persons: per-person columns for people unique in their block (see
            :func:`release_risk`).
        counts: population counts (persons, unique persons, blocks, block groups).
        two_level_table: the exact two-level results per distinct ``(others, d)``.
        seconds: timings.
    """

    rho1: Fraction
    rho2: Fraction
    priors: tuple[float, ...]
    primary_prior: float
    one_level: tuple[OneLevelRisk, ...]
    persons: dict[str, np.ndarray]
    counts: dict[str, int]
    two_level_table: list[dict[str, object]]
    seconds: dict[str, float] = field(default_factory=dict)

    def summary(self) -> dict[str, object]:
        """Distributions over unique people and the worst cases, JSON-ready."""
        p = self.persons
        out: dict[str, object] = {
            "rho1_block_detailed": float(self.rho1),
            "rho2_block_group_detailed": float(self.rho2),
            "counts": dict(self.counts),
            "one_level": [r.as_dict() for r in self.one_level],
            "primary_prior": self.primary_prior,
        }
        n = int(p["person_id"].size)
        if n == 0:
            out["unique_people"] = 0
            return out
        dist = {}
        for col in (
            "two_level_correct",
            "two_level_marginal_risk",
            "realised_posterior_one_level",
            "realised_risk_one_level",
            "realised_posterior_two_level",
            "realised_risk_two_level",
        ):
            v = p[col]
            dist[col] = {
                "mean": float(np.mean(v)),
                **{f"q{int(q * 100):02d}": float(np.quantile(v, q)) for q in _QUANTILES},
            }
        out["distribution_over_unique_people"] = dist
        one = next(r for r in self.one_level if r.prior == self.primary_prior)
        base = one.correct_decision.value
        out["share_two_level_correct_above_one_level"] = float(
            np.mean(p["two_level_correct"] > base + 1e-9)
        )
        order = np.argsort(-p["realised_risk_two_level"], kind="stable")[:10]
        worst_real = [_row(p, int(i)) for i in order]
        order2 = np.argsort(-p["two_level_correct"], kind="stable")[:10]
        worst_exp = [_row(p, int(i)) for i in order2]
        out["worst_realised"] = worst_real
        out["worst_expected"] = worst_exp
        return out


def _row(p: Mapping[str, np.ndarray], i: int) -> dict[str, object]:
    row: dict[str, object] = {}
    for k, v in p.items():
        x = v[i]
        row[k] = x.item() if hasattr(x, "item") else x
    return row


def _group_index(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    uniq, inv, cnt = np.unique(keys, return_inverse=True, return_counts=True)
    return uniq, inv.reshape(-1), cnt


def release_risk(
    persons: Mapping[str, np.ndarray],
    budget: object,
    *,
    block_geocodes: np.ndarray | None = None,
    intruder: Intruder | None = None,
    seed: int | None = 0,
    tol: float = 1e-12,
    progress: Callable[[str], None] | None = None,
    noise_law: str = "release",
) -> ReleaseRisk:
    """Risk of a release configuration for every person unique in their block (Kazan & Reiter (2022) sec. 4).

    Args:
        persons: person columns (``person_id``, ``geocode`` (16 chars), ``hhgq``,
            ``age``, ``hispanic``, ``cenrace``), e.g. ``censusdp.io.cef.read_cef(d).persons``.
        budget: a zCDP :class:`censusdp.privacy.budget.Budget`; see :func:`detailed_rhos`.
        block_geocodes: every block of the geography (e.g. the unit geocodes too), to
            count ``d``; defaults to the blocks with people.
        intruder: the priors and the decision rule (default :class:`Intruder`); the
            primary prior is reported among the one-level priors too.
        seed: seed of the simulated release used for realised posteriors.
        tol: probability mass left out of each exact sum.
        progress: called with a line per step.
        noise_law: ``"release"`` (the noise the budget's mechanisms add) or ``"paper"``
            (Kazan & Reiter's ``sigma^2 = 1/(2 rho)``); see :func:`detailed_rhos`.

    Returns:
        A :class:`ReleaseRisk`. ``persons`` columns: ``person_id``, ``geocode``, ``cell``
        (PL94 detailed cell), ``hhgq``, ``votingage``, ``hispanic``, ``cenrace``,
        ``xi2`` (block-group count of the cell), ``d``, ``x1_star``, ``x2_star``,
        ``y1_star`` (simulated release), ``realised_posterior_one_level``,
        ``realised_risk_one_level``, ``realised_posterior_two_level``,
        ``realised_risk_two_level``, ``two_level_correct``, ``two_level_marginal_posterior``,
        ``two_level_marginal_risk``.
    """
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    intruder = intruder or Intruder()
    p0, priors, rule = intruder.primary_prior, tuple(intruder.priors), intruder.rule
    if p0 not in priors:
        priors = (p0, *priors)
    _low, _parent, rho1, rho2 = detailed_rhos(budget, noise_law=noise_law)
    bc = _BlockCounts.of(persons, block_geocodes)
    timings["tabulate"] = time.perf_counter() - t0
    say(
        progress,
        f"{bc.n} persons, {int(bc.unique.sum())} unique in their block on the detailed cell",
    )

    noise1 = NoiseModel.discrete_gaussian(rho1)
    one = tuple(one_level_risk(prior=p, noise=noise1, tol=tol) for p in priors)
    t1 = time.perf_counter()
    u_idx = np.flatnonzero(bc.unique)
    others = (bc.xi2 - bc.xi1)[u_idx]
    du = bc.d[u_idx]
    pairs, pair_inv, table, correct, mpost = _two_level_by_pair(
        rho1, rho2, p0, others, du, rule, tol, progress
    )
    timings["two_level_exact"] = time.perf_counter() - t1

    t2 = time.perf_counter()
    out = _person_columns(persons, bc, u_idx)
    out.update(_realised(seed, rho1, rho2, p0, bc, u_idx, others))
    out.update(
        {
            "two_level_correct": correct[pair_inv],
            "two_level_marginal_posterior": mpost[pair_inv],
            "two_level_marginal_risk": mpost[pair_inv] / p0,
        }
    )
    timings["simulated_release"] = time.perf_counter() - t2
    timings["total"] = time.perf_counter() - t0
    return ReleaseRisk(
        rho1=rho1,
        rho2=rho2,
        priors=priors,
        primary_prior=p0,
        one_level=one,
        persons=out,
        counts=bc.counts(len(pairs)),
        two_level_table=table,
        seconds=timings,
    )


@dataclass(frozen=True)
class _BlockCounts:
    """Each person's PL94 detailed cell and its counts in the person's block and block group.

    Attributes:
        geocode: the persons' block geocodes (16 characters).
        cells: the persons' detailed cells.
        all_blocks: every block (sorted), with people or given in ``block_geocodes``.
        bg_names: every block group (sorted); ``bg_blocks`` its number of blocks.
        blk_id, bg_id: each person's index into ``all_blocks`` and ``bg_names``.
        xi1, xi2: the count of the person's cell in their block and block group.
        unique: ``xi1 == 1``.
        d: the number of other blocks in the person's block group.
        size: the number of detailed cells.
    """

    geocode: np.ndarray
    cells: np.ndarray
    all_blocks: np.ndarray
    bg_names: np.ndarray
    bg_blocks: np.ndarray
    blk_id: np.ndarray
    bg_id: np.ndarray
    xi1: np.ndarray
    xi2: np.ndarray
    unique: np.ndarray
    d: np.ndarray
    size: int

    @property
    def n(self) -> int:
        """Number of persons."""
        return int(self.cells.size)

    @classmethod
    def of(
        cls, persons: Mapping[str, np.ndarray], block_geocodes: np.ndarray | None
    ) -> _BlockCounts:
        """Tabulate ``persons`` (see :func:`release_risk` for the columns and blocks)."""
        schema = get_schema("pl94")
        geocode = np.asarray(persons["geocode"]).astype("U16")
        cells = schema.cells_of({c: np.asarray(persons[c]) for c in schema.input_columns})
        bgs = geocode.astype("U12")
        all_blocks = np.unique(
            geocode
            if block_geocodes is None
            else np.concatenate([geocode, np.asarray(block_geocodes).astype("U16")])
        )
        blk_bg = all_blocks.astype("U12")
        bg_names, bg_blocks = np.unique(blk_bg, return_counts=True)
        # counts per (block, cell) and (block group, cell), keyed by integers
        size = schema.size
        blk_id = np.searchsorted(all_blocks, geocode)
        bg_id = np.searchsorted(bg_names, bgs)
        _, blk_inv, blk_cnt = _group_index(blk_id.astype(np.int64) * size + cells)
        xi1 = blk_cnt[blk_inv]
        _, bgc_inv, bgc_cnt = _group_index(bg_id.astype(np.int64) * size + cells)
        xi2 = bgc_cnt[bgc_inv]
        return cls(
            geocode=geocode,
            cells=cells,
            all_blocks=all_blocks,
            bg_names=bg_names,
            bg_blocks=bg_blocks,
            blk_id=blk_id,
            bg_id=bg_id,
            xi1=xi1,
            xi2=xi2,
            unique=xi1 == 1,
            d=(bg_blocks - 1)[bg_id].astype(np.int64),
            size=size,
        )

    def counts(self, n_pairs: int) -> dict[str, int]:
        """The ``counts`` record of :class:`ReleaseRisk`."""
        n = self.n
        return {
            "persons": int(n),
            "unique_in_block": int(self.unique.sum()),
            "non_unique": int(n - self.unique.sum()),
            "blocks": int(self.all_blocks.size),
            "populated_blocks": int(np.unique(self.geocode).size),
            "block_groups": int(self.bg_names.size),
            "distinct_xi2_d_pairs": int(n_pairs),
        }


def _two_level_by_pair(
    rho1: Fraction,
    rho2: Fraction,
    p0: float,
    others: np.ndarray,
    du: np.ndarray,
    rule: DecisionRule,
    tol: float,
    progress: Callable[[str], None] | None,
) -> tuple[np.ndarray, np.ndarray, list[dict[str, object]], np.ndarray, np.ndarray]:
    """Exact two-level risk once per distinct (others, d) pair of the unique people.

    Beyond :func:`saturation_others` the exact result no longer depends on the number
    of others, so counts are capped there first.

    Returns:
        The distinct pairs, each person's pair index, the per-pair table, and the
        per-pair probability of a correct decision and marginal posterior.
    """
    capped = others.copy()
    for dd in np.unique(du):
        cap = saturation_others(HierarchicalModel.two_level(rho1, rho2, int(dd), p0), tol)
        sel = du == dd
        capped[sel] = np.minimum(others[sel], cap)
    pairs, pair_inv = np.unique(np.stack([capped, du], axis=1), axis=0, return_inverse=True)
    pair_inv = pair_inv.reshape(-1)
    bar = task(progress, "two-level exact risk", len(pairs), unit="(xi2, d) pairs")
    table: list[dict[str, object]] = []
    correct = np.empty(len(pairs))
    mpost = np.empty(len(pairs))
    for j, (o, dd) in enumerate(pairs.tolist()):
        m = HierarchicalModel.two_level(rho1, rho2, int(dd), p0)
        r = two_level_risk(m, int(o), rule=rule, tol=tol)
        correct[j], mpost[j] = r.correct_decision, r.marginal_posterior
        table.append(
            {
                "others": int(o),
                "others_at_least": bool(np.any((capped == o) & (others > o) & (du == dd))),
                "xi2": int(o) + 1,
                "d": int(dd),
                "unique_people": 0,
                **{
                    k: v
                    for k, v in r.as_dict().items()
                    if k not in ("rhos", "siblings", "others", "xi2")
                },
            }
        )
        bar.advance()
    bar.close()
    for j, c in zip(*np.unique(pair_inv, return_counts=True), strict=True):
        table[int(j)]["unique_people"] = int(c)
    return pairs, pair_inv, table, correct, mpost


def _person_columns(
    persons: Mapping[str, np.ndarray], bc: _BlockCounts, u_idx: np.ndarray
) -> dict[str, np.ndarray]:
    """The identifying and tabulated columns of the unique people ``u_idx``."""
    schema = get_schema("pl94")
    return {
        "person_id": np.asarray(persons["person_id"])[u_idx],
        "geocode": bc.geocode[u_idx],
        "cell": bc.cells[u_idx],
        "hhgq": np.asarray(persons["hhgq"])[u_idx],
        "votingage": schema.cell_levels("votingage", bc.cells[u_idx]),
        "hispanic": np.asarray(persons["hispanic"])[u_idx],
        "cenrace": np.asarray(persons["cenrace"])[u_idx],
        "xi2": bc.xi2[u_idx],
        "d": bc.d[u_idx],
    }


def _realised(
    seed: int | None,
    rho1: Fraction,
    rho2: Fraction,
    p0: float,
    bc: _BlockCounts,
    u_idx: np.ndarray,
    others: np.ndarray,
) -> dict[str, np.ndarray]:
    """One simulated release of the detailed query on the cells involved; realised risk.

    Returns the noisy counts ``x1_star``, ``x2_star``, ``y1_star`` of each unique person
    and the realised posterior and ``R'(x*)`` without and with the block group.
    """
    rng = experiment_generator(seed)
    x1_star, x2_star, y1_star = _simulate_release(rng, rho1, rho2, bc, u_idx, others)
    real1 = posterior(x1_star, prior=p0, noise=NoiseModel.discrete_gaussian(rho1), known=0)
    du = bc.d[u_idx]
    lo2 = np.empty(u_idx.size)
    for dd in np.unique(du):
        sel = du == dd
        m = HierarchicalModel.two_level(rho1, rho2, int(dd), p0)
        lo2[sel] = two_level_log_odds(m, x1_star[sel], x2_star[sel], y1_star[sel])
    real2 = expit(lo2)
    return {
        "x1_star": x1_star,
        "x2_star": x2_star,
        "y1_star": y1_star,
        "realised_posterior_one_level": real1,
        "realised_risk_one_level": real1 / p0,
        "realised_posterior_two_level": real2,
        "realised_risk_two_level": real2 / p0,
    }


def _simulate_release(
    rng: np.random.Generator,
    rho1: Fraction,
    rho2: Fraction,
    bc: _BlockCounts,
    u_idx: np.ndarray,
    others: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Noisy counts for each unique person ``u_idx``'s cell: block, block group, other blocks.

    One noise value per (block, cell) and per (block group, cell), shared by every
    person who sees it: ``x1* = 1 + eta_b``, ``x2* = xi2 + eta_g`` and
    ``y1* = others + sum_{b' != b} eta_b'`` over the blocks of the block group. Blocks
    without a unique person contribute their noise through the exact pmf of a sum of
    discrete Gaussians (the same distribution as drawing each).
    """
    block, bg, cell = bc.blk_id[u_idx], bc.bg_id[u_idx], bc.cells[u_idx]
    blocks_per_bg, size = bc.bg_blocks, bc.size
    K1 = math.ceil(math.sqrt(92.0 / float(rho1))) + 1
    k1 = np.arange(-K1, K1 + 1)
    lp1 = DiscreteGaussian.from_rho(rho1).log_pmf(k1)
    K2 = math.ceil(math.sqrt(92.0 / float(rho2))) + 1
    k2 = np.arange(-K2, K2 + 1)
    lp2 = DiscreteGaussian.from_rho(rho2).log_pmf(k2)
    gkey = bg.astype(np.int64) * size + cell
    groups, g_inv = np.unique(gkey, return_inverse=True)
    g_inv = g_inv.reshape(-1)
    n_groups = groups.size
    eta_g = _sample_pmf(k2, lp2, n_groups, rng)
    nblk = blocks_per_bg[groups // size]
    # every unique person has their own (block, cell): one explicit noise each
    eta_b = _sample_pmf(k1, lp1, block.size, rng)
    own_sum = np.bincount(g_inv, weights=eta_b, minlength=n_groups).astype(np.int64)
    own_count = np.bincount(g_inv, minlength=n_groups)
    rest = nblk - own_count
    rest_sum = np.zeros(n_groups, dtype=np.int64)
    for r in np.unique(rest):
        if r <= 0:
            continue
        sel = np.flatnonzero(rest == r)
        k, lp = sum_of_discrete_gaussians(rho1, int(r))
        rest_sum[sel] = _sample_pmf(k, lp, sel.size, rng)
    total = own_sum + rest_sum
    x1 = 1 + eta_b
    x2 = others + 1 + eta_g[g_inv]
    y1 = others + total[g_inv] - eta_b
    return x1.astype(np.int64), x2.astype(np.int64), y1.astype(np.int64)


def sweep_risk(
    budget: object,
    rhos: Sequence[float | Fraction | str],
    *,
    pairs: Sequence[tuple[int, int, int]] = (),
    intruder: Intruder | None = None,
    tol: float = 1e-12,
    noise_law: str = "release",
) -> list[dict[str, object]]:
    """One- and two-level risk as the global rho of ``budget`` varies (shares fixed).

    Args:
        budget: a zCDP budget with a ``scaled(rho=...)`` method.
        rhos: global rho values.
        pairs: ``(others, d, weight)`` triples (e.g. the distinct pairs of a random sample
            of unique people with their counts); the two-level correct-decision
            probability is averaged with these weights, and its standard error is
            reported as if the weights counted randomly sampled people.
        intruder: the one-level priors, the prior of the two-level results and the
            two-level decision rule (default :class:`Intruder`).
        tol: mass left out of each exact sum.
    """
    intruder = intruder or Intruder()
    priors, primary_prior, rule = intruder.priors, intruder.primary_prior, intruder.rule
    out = []
    for rho in rhos:
        b = budget.scaled(rho=rho)  # type: ignore[attr-defined]
        _l, _p, r1, r2 = detailed_rhos(b, noise_law=noise_law)
        noise = NoiseModel.discrete_gaussian(r1)
        row: dict[str, object] = {
            "global_rho": float(Fraction(b.rho)),
            "rho1": float(r1),
            "rho2": float(r2),
            "epsilon": b.epsilon(),
            "one_level": [one_level_risk(prior=p, noise=noise, tol=tol).as_dict() for p in priors],
        }
        if pairs:
            vals, ws = [], []
            for o, d, w in pairs:
                m = HierarchicalModel.two_level(r1, r2, int(d), primary_prior)
                vals.append(two_level_risk(m, int(o), rule=rule, tol=tol).correct_decision)
                ws.append(float(w))
            v, wt = np.asarray(vals), np.asarray(ws)
            mean = float(np.sum(v * wt) / np.sum(wt))
            row["two_level_mean_correct"] = mean
            # standard error if the weights count people sampled at random
            row["two_level_mean_correct_se"] = float(
                math.sqrt(np.sum(wt * (v - mean) ** 2) / np.sum(wt) / max(np.sum(wt) - 1, 1))
            )
            row["two_level_max_correct"] = float(v.max())
        out.append(row)
    return out

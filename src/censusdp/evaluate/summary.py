"""The numbers behind the plain-language summary of a release (no HTML, no files).

A reader who is not a statistician asks three things of a release: what was published,
how much privacy it spent, and how far off a published count typically is for a place
like theirs. This module answers them from an evaluation (truth and release on one
geography):

* :func:`typical_errors`: for the places of one geolevel grouped by true population
  (:data:`SIZE_CLASSES`), the median absolute error ("typically off by"), the 90th
  percentile of the absolute error ("9 in 10 within"), the mean signed error and the
  median absolute percentage error. Quantiles are of the observed integer errors
  (inverted empirical CDF: the smallest observed value with at least the stated share
  at or below it), so "9 in 10 within 12" is literally true of this release.
* :func:`budget_words`: the privacy-loss budget of the whole release (persons and
  housing units composed), its neighbouring relation and how the randomness was made.
* :func:`place_rows`: one record per state, county, tract and block group with its
  Census GEOID and NAME and its true and released key counts, for drill-down tables
  and maps.

The meaning of epsilon follows JASON, *Formal Privacy Methods for the 2020 Census*
(JSR-19-2F, 2020), sec. 5: with epsilon-differential privacy, any conclusion about one
person is at most ``e^epsilon`` times more likely with their record than without it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from censusdp.data.geography import Hierarchy
from censusdp.errors import InputError
from censusdp.tables.geoids import geo_identifiers

__all__ = [
    "KEY_COUNTS",
    "SIZE_CLASSES",
    "budget_words",
    "place_rows",
    "size_class_label",
    "typical_errors",
]

SIZE_CLASSES: tuple[tuple[int, float], ...] = (
    (0, 0),
    (1, 9),
    (10, 99),
    (100, 999),
    (1_000, 9_999),
    (10_000, 99_999),
    (100_000, math.inf),
)
"""True-population classes ``(low, high)`` (inclusive) of the summary table."""

KEY_COUNTS: tuple[tuple[str, str, int, str], ...] = (
    ("population", "P1", 0, "Total population"),
    ("adults", "P3", 0, "Population 18 years and over"),
    ("hispanic", "P2", 1, "Hispanic or Latino"),
    ("housing_units", "H1", 0, "Housing units"),
    ("occupied", "H1", 1, "Occupied housing units"),
    ("group_quarters", "P5", 0, "Population in group quarters"),
)
"""``(key, table, line index, label)`` of the counts shown for every place."""

_REPORTED_LEVELS = (2, 5, 11, 12)


def size_class_label(low: int, high: float) -> str:
    """``"no people"``, ``"1-9 people"``, ``"100,000 or more"``."""
    if high == 0:
        return "no people"
    if math.isinf(high):
        return f"{low:,} or more"
    return f"{low:,}-{int(high):,} people"


def _quantile(x: np.ndarray, q: float) -> int | float:
    v = np.quantile(x, q, method="inverted_cdf")
    return int(v) if np.issubdtype(x.dtype, np.integer) else float(v)


def typical_errors(
    truth: np.ndarray,
    released: np.ndarray,
    classes: Sequence[tuple[int, float]] = SIZE_CLASSES,
) -> list[dict[str, Any]]:
    """Error of a published count, by the true size of the place.

    For the places whose true count ``t`` lies in each class, with ``e = released - t``:
    ``median_abs = Q(|e|, 0.5)``, ``q90_abs = Q(|e|, 0.9)`` with ``Q`` the inverted
    empirical CDF (an observed value), ``mean_error = sum(e) / n`` (bias), and
    ``median_abs_pct = Q(100 |e| / t, 0.5)`` over places with ``t > 0``.

    Args:
        truth, released: one count per place (same length).
        classes: inclusive ``(low, high)`` true-count classes.

    Returns:
        One record per class with at least one place: ``label``, ``low``, ``high``
        (``None`` for no upper bound), ``n``, ``median_abs``, ``q90_abs``,
        ``mean_error``, ``median_abs_pct`` (``None`` for the class of empty places).
    """
    t = np.asarray(truth, dtype=np.int64)
    r = np.asarray(released, dtype=np.int64)
    if t.shape != r.shape:
        raise InputError(f"truth has shape {t.shape} but released has {r.shape}")
    out = []
    for low, high in classes:
        sel = (t >= low) & (t <= high)
        n = int(sel.sum())
        if n == 0:
            continue
        e = r[sel] - t[sel]
        a = np.abs(e)
        pos = t[sel] > 0
        pct = 100.0 * a[pos] / t[sel][pos]
        out.append(
            {
                "label": size_class_label(low, high),
                "low": int(low),
                "high": None if math.isinf(high) else int(high),
                "n": n,
                "median_abs": _quantile(a, 0.5),
                "q90_abs": _quantile(a, 0.9),
                "mean_error": float(e.mean()),
                "median_abs_pct": _quantile(pct, 0.5) if pct.size else None,
            }
        )
    return out


def _num(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def budget_words(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The privacy-loss budget of a release, as numbers and sentences.

    Reads the release manifest: ``epsilon``, ``delta`` and ``rho`` of the whole
    release, the ``persons`` and ``units`` runs, ``randomness`` and ``seed``. The
    neighbouring relation is the manifest's ``neighbouring`` entry when present, else
    bounded (change one person's record), the relation of the 2020 production system.

    Returns:
        ``epsilon``, ``delta``, ``rho``, ``parts`` (``[(name, epsilon, rho)]``),
        ``relation``, ``secure`` (bool or ``None`` when unknown), ``seed``,
        ``odds_factor`` (``e^epsilon``, ``None`` above 700), and ``sentences``: a list
        of plain-language sentences.
    """
    eps, delta, rho = (_num(manifest.get(k)) for k in ("epsilon", "delta", "rho"))
    parts = []
    for key, what in (("persons", "people"), ("units", "housing units")):
        run = manifest.get(key)
        if isinstance(run, Mapping):
            parts.append((what, _num(run.get("epsilon")), _num(run.get("rho_float"))))
    relation = str(manifest.get("neighbouring") or "bounded")
    rand = manifest.get("randomness")
    mode = rand.get("mode") if isinstance(rand, Mapping) else None
    secure = None if mode is None else mode == "secure"
    seed = manifest.get("seed")
    odds = math.exp(eps) if eps is not None and eps < 700 else None
    sentences: list[str] = []
    if eps is None:
        sentences.append(
            "This release states no privacy-loss budget: it was not made with a "
            "differentially private mechanism (or its manifest is missing)."
        )
    else:
        whole = f"epsilon = {eps:.3g}"
        if delta is not None:
            whole += f" at delta = {delta:.0e}"
        if rho is not None:
            whole += f" (rho = {rho:.3g} in zero-concentrated DP)"
        sentences.append(f"Total privacy-loss budget for everything published: {whole}.")
        if len(parts) > 1:
            split = "; ".join(f"{what}: epsilon {e:.3g}" for what, e, _ in parts if e is not None)
            sentences.append(
                f"It is spent on two separate runs ({split}); the total is their "
                "composition, computed in rho and converted once."
            )
        rel = (
            "changing one person's record (bounded neighbours)"
            if relation == "bounded"
            else "adding or removing one person (unbounded neighbours)"
            if relation == "unbounded"
            else relation
        )
        sentences.append(f"The guarantee protects against {rel}.")
        if odds is not None:
            factor = f"{odds:,.0f}" if odds >= 10 else f"{odds:.2f}"
            sentences.append(
                "In words: whatever anyone concludes about one person is at most "
                f"e^epsilon = {factor} times more likely with that person's record than "
                "without it (except with probability delta). Smaller is more private; "
                "the 2020 Census redistricting data used epsilon = 17.14 for people and "
                "2.47 for housing units, 17.44 for the whole release once the two are "
                "composed (the figure comparable with this one)."
            )
    if secure is False:
        sentences.append(
            f"The noise was drawn from a seeded generator (seed {seed}): reproducible, for "
            "testing and experiments, not private against someone who knows the seed."
        )
    elif secure:
        sentences.append("The noise was drawn from a cryptographically secure generator.")
    return {
        "epsilon": eps,
        "delta": delta,
        "rho": rho,
        "parts": parts,
        "relation": relation,
        "secure": secure,
        "seed": seed,
        "odds_factor": odds,
        "sentences": sentences,
    }


def place_rows(
    hierarchy: Hierarchy,
    truth_tables: Mapping[str, Sequence[np.ndarray]],
    release_tables: Mapping[str, Sequence[np.ndarray]],
    lengths: Sequence[int] = _REPORTED_LEVELS,
) -> list[dict[str, Any]]:
    """One record per place of the state, county, tract and block-group levels.

    Args:
        hierarchy: the evaluation geography.
        truth_tables, release_tables: per table, per level, ``(units x lines)`` arrays
            (:func:`censusdp.tables.table_arrays` layout).
        lengths: geocode lengths of the levels to include (levels of other lengths
            are skipped).

    Returns:
        Records ``{"level", "geocode", "GEOID", "NAME", "parent", "truth",
        "released"}`` where ``parent`` is the geocode of the nearest included
        enclosing place (``None`` at the top) and ``truth`` / ``released`` map each
        key of :data:`KEY_COUNTS` to a count.
    """
    rows: list[dict[str, Any]] = []
    included: list[int] = []
    for li, lv in enumerate(hierarchy.geolevels.levels):
        if lv.length not in lengths:
            continue
        codes = hierarchy.geocodes[li]
        ids = geo_identifiers(codes, lv.length, lv.name)
        parent_len = max((hierarchy.geolevels[k].length for k in included), default=None)
        t = {k: truth_tables[tab][li][:, j] for k, tab, j, _ in KEY_COUNTS}
        r = {k: release_tables[tab][li][:, j] for k, tab, j, _ in KEY_COUNTS}
        for i, code in enumerate(codes.tolist()):
            rows.append(
                {
                    "level": lv.name,
                    "geocode": code,
                    "GEOID": ids["GEOID"][i],
                    "NAME": ids["NAME"][i],
                    "parent": None if parent_len is None else code[:parent_len],
                    "truth": {k: int(v[i]) for k, v in t.items()},
                    "released": {k: int(v[i]) for k, v in r.items()},
                }
            )
        included.append(li)
    return rows

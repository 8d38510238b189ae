"""The 2020 DHC's unit columns ten, vacs and qgqtyp of units.parquet: written by the
generator in production's CEF codes, read and checked by both readers (one line per
broken rule, naming file, column, row and value), optional for every other run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from censusdp.data.geography import DEFAULT_GEOLEVELS
from censusdp.data.schema import PL94, get_schema
from censusdp.data.units_dhc import hhtenshort_3lev_of, tenvacgq_of
from censusdp.errors import InputError
from censusdp.generate import generate_state
from censusdp.io.cef import read_cef
from censusdp.io.cef_stream import read_cef_blocks

DHCP = get_schema("dhcp-2020")


@pytest.fixture(scope="module")
def vt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("vt-tenure-input") / "vt"
    generate_state("VT", 1, out, scale=0.01)
    return out


def _copy_with(src: Path, dst: Path, change, which: str = "units") -> Path:
    """``src``'s input in ``dst`` with ``change(columns)`` applied to one file."""
    dst.mkdir()
    for name in ("persons", "units"):
        table = pq.read_table(src / f"{name}.parquet")
        if name == which:
            cols = {n: table.column(n).to_numpy(zero_copy_only=False).copy()
                    for n in table.column_names}  # fmt: skip
            change(cols)
            table = pa.table(cols)
        pq.write_table(table, dst / f"{name}.parquet")
    return dst


def test_generated_units_carry_production_codes(vt: Path) -> None:
    u = read_cef(vt).units
    household = u["occupied"] & (u["gqtype"] == 0)
    vacant = ~u["occupied"] & (u["gqtype"] == 0)
    assert set(np.unique(u["ten"][household])) <= {1, 2, 3, 4} and (u["ten"][~household] == 0).all()
    assert set(np.unique(u["vacs"][vacant])) <= set(range(1, 8)) and (u["vacs"][~vacant] == 0).all()
    facility = u["gqtype"] > 0
    assert (u["qgqtyp"][~facility] == 0).all()
    assert np.array_equal(np.minimum(u["qgqtyp"][facility] // 100, 7), u["gqtype"][facility])
    level = tenvacgq_of(u["ten"], u["vacs"], u["qgqtyp"])
    assert (level >= 0).all()
    assert ((level < 4) == household).all() and (((level >= 4) & (level < 11)) == vacant).all()
    assert set(np.unique(hhtenshort_3lev_of(u["ten"][household]))) == {0, 1, 2}


def test_the_codes_follow_production_cef2das() -> None:
    # TenureVacancyGQAttr.cef2das: occupied ten - 1, vacant vacs + 3, GQ 11 + its index;
    # 702, 704, 706, 903 and 904 are GQ 997 (level 34)
    ten = np.array([1, 2, 3, 4, 0, 0, 0, 0, 0, 0])
    vacs = np.array([0, 0, 0, 0, 1, 7, 0, 0, 0, 0])
    q = np.array([0, 0, 0, 0, 0, 0, 101, 602, 704, 997])
    assert tenvacgq_of(ten, vacs, q).tolist() == [0, 1, 2, 3, 4, 10, 11, 28, 34, 34]
    assert tenvacgq_of(np.array([0]), np.array([0]), np.array([0])).tolist() == [-1]
    assert tenvacgq_of(np.array([0]), np.array([0]), np.array([103 + 5])).tolist() == [-1]
    assert hhtenshort_3lev_of(np.array([1, 2, 3, 4, 0])).tolist() == [0, 1, 2, 2, -1]


def test_the_stream_reader_counts_units_by_tenvacgq(vt: Path) -> None:
    cef = read_cef(vt)
    got = read_cef_blocks(vt, DEFAULT_GEOLEVELS, PL94)
    assert got.tenvacgq is not None and got.tenvacgq.shape[1] == 35
    u = cef.units
    want = np.bincount(tenvacgq_of(u["ten"], u["vacs"], u["qgqtyp"]), minlength=35)
    assert np.array_equal(got.tenvacgq.sum(axis=0), want)
    block = np.searchsorted(got.hierarchy.blocks, u["geocode"])
    assert np.array_equal(
        got.tenvacgq.sum(axis=1), np.bincount(block, minlength=got.tenvacgq.shape[0])
    )


def _first(cols: dict, mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _household(c: dict) -> np.ndarray:
    return c["occupied"] & (c["gqtype"] == 0)


BREAKS = {
    "ten outside its levels": (
        lambda c: c["ten"].__setitem__(_first(c, _household(c)), 5),
        "column 'ten', row {row}: value 5 is outside 0..4",
    ),
    "no tenure on a household": (
        lambda c: c["ten"].__setitem__(_first(c, _household(c)), 0),
        "value 0 is 0 (no tenure) but the unit is an occupied housing unit",
    ),
    "a tenure on a vacant unit": (
        lambda c: c["ten"].__setitem__(_first(c, ~c["occupied"]), 3),
        "value 3 is a tenure but the unit is not an occupied housing unit",
    ),
    "no status on a vacant unit": (
        lambda c: c["vacs"].__setitem__(_first(c, ~c["occupied"]), 0),
        "value 0 is 0 (not vacant) but the unit is a vacant housing unit",
    ),
    "a status on a household": (
        lambda c: c["vacs"].__setitem__(_first(c, _household(c)), 2),
        "value 2 is a vacancy status but the unit is not a vacant housing unit",
    ),
    "a GQ type on a housing unit": (
        lambda c: c["qgqtyp"].__setitem__(_first(c, c["gqtype"] == 0), 301),
        "value 301 is a GQ type but the unit is a housing unit",
    ),
    "an unknown GQ type": (
        lambda c: c["qgqtyp"].__setitem__(_first(c, c["gqtype"] > 0), 705),
        "value 705 is not a GQ type production reads",
    ),
}


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_a_bad_code_is_one_line_naming_file_row_column_and_value(
    vt: Path, tmp_path: Path, name: str
) -> None:
    change, message = BREAKS[name]
    rows: list[int] = []

    def tracked(c: dict) -> None:
        before = {k: v.copy() for k, v in c.items()}
        change(c)
        rows.extend(int(r) for k in c for r in np.flatnonzero(before[k] != c[k]))

    bad = _copy_with(vt, tmp_path / "bad", tracked)
    with pytest.raises(InputError) as whole:
        read_cef(bad)
    with pytest.raises(InputError) as streamed:
        read_cef_blocks(bad, DEFAULT_GEOLEVELS, PL94)
    for exc in (whole.value, streamed.value):
        assert len(exc.problems) == 1, exc.problems
        line = exc.problems[0]
        assert "units.parquet" in line and message.format(row=rows[0]) in line
        assert f"row {rows[0]}:" in line and "\n" not in line
    assert streamed.value.problems == whole.value.problems


def test_a_facility_type_its_residents_contradict_is_refused(vt: Path, tmp_path: Path) -> None:
    units = pq.read_table(vt / "units.parquet")
    q = units.column("qgqtyp").to_numpy()
    gqtype = units.column("gqtype").to_numpy()
    row = _first({}, (gqtype == 7) & (q != 997))
    other = 997 if q[row] != 997 else 701

    bad = _copy_with(vt, tmp_path / "bad", lambda c: c["qgqtyp"].__setitem__(row, other))
    for read in (read_cef, lambda d: read_cef_blocks(d, DEFAULT_GEOLEVELS, DHCP)):
        with pytest.raises(InputError) as exc:
            read(bad)
        assert exc.value.problems
        assert all("persons.parquet" in p and "column 'relgq'" in p for p in exc.value.problems)
        assert all("differs from the GQ type (qgqtyp)" in p for p in exc.value.problems)


def test_the_columns_are_optional_but_come_together(vt: Path, tmp_path: Path) -> None:
    plain = _copy_with(
        vt, tmp_path / "plain", lambda c: [c.pop(k) for k in ("ten", "vacs", "qgqtyp")]
    )
    assert "ten" not in read_cef(plain).units
    got = read_cef_blocks(plain, DEFAULT_GEOLEVELS, DHCP)  # no run but the DHC's needs them
    assert got.tenvacgq is None and int(got.persons.sum()) == read_cef(plain).n_persons
    half = _copy_with(vt, tmp_path / "half", lambda c: c.pop("vacs"))
    for read in (read_cef, lambda d: read_cef_blocks(d, DEFAULT_GEOLEVELS, PL94)):
        with pytest.raises(InputError) as exc:
            read(half)
        assert len(exc.value.problems) == 1
        line = exc.value.problems[0]
        assert "units.parquet: missing column 'vacs'" in line and "come together" in line

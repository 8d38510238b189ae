"""The 2020 DHC's relgq column of persons.parquet: written by the generator, read and
checked by both readers (one line per broken rule, naming file, column, row and value),
needed only by the dhcp-2020 schema (its absence one line naming the column)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from censusdp.data.geography import DEFAULT_GEOLEVELS
from censusdp.data.schema import PL94, get_schema
from censusdp.errors import InputError
from censusdp.generate import generate_state, relgq_rule_violations
from censusdp.io.cef import read_cef
from censusdp.io.cef_stream import read_cef_blocks

DHCP = get_schema("dhcp-2020")


@pytest.fixture(scope="module")
def vt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("vt-relgq-input") / "vt"
    generate_state("VT", 1, out, scale=0.01)
    return out


def _copy_with(src: Path, dst: Path, change) -> Path:
    """``src``'s input in ``dst`` with ``change(columns)`` applied to the persons."""
    dst.mkdir()
    table = pq.read_table(src / "persons.parquet")
    cols = {n: table.column(n).to_numpy(zero_copy_only=False).copy() for n in table.column_names}
    change(cols)
    pq.write_table(pa.table(cols), dst / "persons.parquet")
    pq.write_table(pq.read_table(src / "units.parquet"), dst / "units.parquet")
    return dst


def test_generated_relgq_is_read_and_obeys_the_age_rules(vt: Path) -> None:
    cef = read_cef(vt)
    p = cef.persons
    relgq = p["relgq"]
    assert ((relgq >= 18) == (p["hhgq"] > 0)).all()
    assert relgq_rule_violations(relgq, p["age"]).sum() == 0
    # householders living alone exactly where the unit holds one person
    row = np.searchsorted(cef.units["unit_id"], p["unit_id"])
    size = np.bincount(row, minlength=cef.n_units)[row]
    assert np.array_equal(relgq[p["rel"] == 0] == 0, size[p["rel"] == 0] == 1)
    streamed = read_cef_blocks(vt, DEFAULT_GEOLEVELS, DHCP, with_units=False)
    assert int(streamed.persons.sum()) == cef.n_persons
    assert not DHCP.structural_zero_mask[streamed.persons.indices].any()


def _first(cols: dict, mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


BREAKS = {
    "outside its levels": (
        lambda c: c["relgq"].__setitem__(0, 42),
        "column 'relgq', row 0: value 42 is outside 0..41",
    ),
    "a GQ type in a household": (
        lambda c: c["relgq"].__setitem__(_first(c, c["hhgq"] == 0), 20),
        "value 20 is a group-quarters type (18..41) but the person's hhgq is 0",
    ),
    "a relationship in group quarters": (
        lambda c: c["relgq"].__setitem__(_first(c, c["hhgq"] > 0), 3),
        "value 3 is not a GQ type of the person's hhgq",
    ),
    "another major type": (
        lambda c: c["relgq"].__setitem__(_first(c, c["hhgq"] == 7), 18),  # GQ 101: type 1
        "value 18 is not a GQ type of the person's hhgq",
    ),
    "living alone with others": (
        lambda c: c["relgq"].__setitem__(_first(c, c["relgq"] == 1), 0),
        "value 0 is a householder living alone but the person's unit holds several persons",
    ),
}


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_a_bad_relgq_is_one_line_naming_file_row_and_value(
    vt: Path, tmp_path: Path, name: str
) -> None:
    change, message = BREAKS[name]
    bad = _copy_with(vt, tmp_path / "bad", change)
    with pytest.raises(InputError) as whole:
        read_cef(bad)
    with pytest.raises(InputError) as streamed:
        read_cef_blocks(bad, DEFAULT_GEOLEVELS, DHCP)
    for exc in (whole.value, streamed.value):
        assert len(exc.problems) == 1, exc.problems
        line = exc.problems[0]
        assert "persons.parquet" in line and message in line and "\n" not in line
    assert streamed.value.problems == whole.value.problems


def test_a_facility_of_two_gq_types_is_refused(vt: Path, tmp_path: Path) -> None:
    def change(c: dict) -> None:
        residents = np.flatnonzero(c["hhgq"] == 7)
        one = residents[c["unit_id"][residents] == c["unit_id"][residents[0]]]
        assert one.size > 1
        c["relgq"][one[-1]] = 41 if c["relgq"][one[0]] != 41 else 40

    bad = _copy_with(vt, tmp_path / "bad", change)
    with pytest.raises(InputError) as exc:
        read_cef_blocks(bad, DEFAULT_GEOLEVELS, DHCP)
    assert any("another resident's relgq in the same facility" in p for p in exc.value.problems)


def test_relgq_is_needed_only_by_the_dhc_schema(vt: Path, tmp_path: Path) -> None:
    plain = _copy_with(vt, tmp_path / "plain", lambda c: c.pop("relgq"))
    got = read_cef_blocks(plain, DEFAULT_GEOLEVELS, PL94)  # other runs do not need it
    assert int(got.persons.sum()) == read_cef(plain).n_persons
    with pytest.raises(InputError) as exc:
        read_cef_blocks(plain, DEFAULT_GEOLEVELS, DHCP)
    line = str(exc.value)
    assert "\n" not in line and "missing column 'relgq'" in line and "dhcp-2020" in line
    assert "persons.parquet" in line

"""The 2020 DHC tables (censusdp.tables.dhc): P12, PCT12 and GQ1 of persons, P16, H9 and
the tables by the householder (H6, H7, H10-H12) of households, H3, H4 and H5 of housing units, each against hand-computed answers, each
table's lines adding up as the DHC publishes them (2020 Census Demographic and Housing
Characteristics File, DECENNIALDHC2020: P12 male + female = total, PCT12's single years
summing to P12's groups), and the household tables of a DHC unit MDF read back equal to
those of the histograms it was written from."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp

from censusdp.data.geography import DEFAULT_GEOLEVELS
from censusdp.data.histograms import pl94_map
from censusdp.data.schema import get_schema
from censusdp.data.schema_dhc import DHCH_2020, HHTYPE_DHCH_TYPES
from censusdp.errors import InputError, SchemaError
from censusdp.generate import generate_state
from censusdp.io.cef_stream import read_cef_blocks
from censusdp.io.mdf_households_dhc import decode_dhch_units, dhch_unit_records
from censusdp.tables import (
    codebook,
    level_identifiers,
    release_table_names,
    table_definition,
    tabulate_rows,
)
from censusdp.tables.dhc import (
    DHC_PERSON_CELLS,
    DHC_TABLE_NAMES,
    dhc_household_histograms,
    tabulate_dhc_household_rows,
    tabulate_dhc_households,
    tabulate_dhc_person_rows,
)

DHCP = get_schema("dhcp-2020")
IDS = level_identifiers([("Block", 16, np.asarray(["5000195000001000"]))])


def _values(table: pa.Table, name: str) -> np.ndarray:
    """``(rows x lines)`` of a wide table."""
    d = table_definition(name)
    return np.column_stack([table.column(v).to_numpy() for v in d.variables])


def _persons(*people: tuple[int, int, int]) -> sp.csr_matrix:
    """One row of ``dhcp-2020`` cells: (relgq, sex, age) each, Not Hispanic, White alone."""
    cells = [int(np.ravel_multi_index((r, s, a, 0, 0), DHCP.shape)) for r, s, a in people]
    return sp.csr_matrix(
        (np.ones(len(cells), dtype=np.int64), ([0] * len(cells), cells)), shape=(1, DHCP.size)
    )


def test_p12_and_pct12_of_a_handful_of_persons() -> None:
    # three boys (0, 4, 17), a man of 20, a woman of 85 and one of 115 (all householders
    # but the children, who are biological children: relgq 6)
    row = _persons((6, 0, 0), (6, 0, 4), (6, 0, 17), (1, 0, 20), (0, 1, 85), (0, 1, 115))
    t = tabulate_dhc_person_rows(row, IDS)
    p12, pct12 = _values(t["P12"], "P12")[0], _values(t["PCT12"], "PCT12")[0]
    assert p12[0] == 6 and p12[1] == 4 and p12[25] == 2  # Total, Male, Female
    assert p12[2] == 2 and p12[5] == 1 and p12[7] == 1  # under 5, 15 to 17, 20 years
    assert p12[48] == 2 and p12[3:25].sum() == 2  # female 85+; no other male line
    lab = table_definition("P12").labels
    assert lab[2] == "Total:!!Male:!!Under 5 years" and lab[6] == "Total:!!Male:!!18 and 19 years"
    assert lab[48] == "Total:!!Female:!!85 years and over"
    # PCT12: Under 1 year is line 3, age a of men line 3 + a, 110+ the 105th of each sex
    assert pct12[0] == 6 and pct12[1] == 4 and pct12[105] == 2
    assert pct12[2] == 1 and pct12[6] == 1 and pct12[19] == 1 and pct12[22] == 1
    assert pct12[105 + 1 + 85] == 1 and pct12[208] == 1
    lab = table_definition("PCT12").labels
    assert lab[2] == "Total:!!Male:!!Under 1 year" and lab[3] == "Total:!!Male:!!1 year"
    assert lab[101] == "Total:!!Male:!!99 years" and lab[102] == "Total:!!Male:!!100 to 104 years"
    assert lab[208] == "Total:!!Female:!!110 years and over"
    assert len(lab) == 209 and table_definition("P12").n_lines == 49
    assert _values(t["GQ1"], "GQ1")[0].sum() == 0  # no one in group quarters


def test_the_person_tables_add_up_as_published() -> None:
    rng = np.random.default_rng(7)
    rows = sp.csr_matrix(rng.poisson(0.02, size=(4, DHC_PERSON_CELLS)).astype(np.int64))
    t = tabulate_dhc_person_rows(rows, level_identifiers([("Block", 16, np.asarray(
        ["5000195000001000", "5000195000001001", "5000195000001002", "5000195000001003"]
    ))]))  # fmt: skip
    p12, pct12, gq = (_values(t[n], n) for n in ("P12", "PCT12", "GQ1"))
    total = np.asarray(rows.sum(axis=1)).ravel()
    assert (p12[:, 0] == total).all() and (pct12[:, 0] == total).all()
    assert (p12[:, 1] + p12[:, 25] == p12[:, 0]).all()  # male + female = total
    for sex, (p_head, c_head) in enumerate(((1, 1), (25, 105))):
        assert (p12[:, p_head + 1 : p_head + 24].sum(axis=1) == p12[:, p_head]).all()
        assert (pct12[:, c_head + 1 : c_head + 104].sum(axis=1) == pct12[:, c_head]).all()
        # PCT12's single years sum to P12's groups
        single = pct12[:, c_head + 1 : c_head + 101]  # ages 0..99
        bounds = (0, 5, 10, 15, 18, 20, 21, 22, 25, 30, 35, 40, 45, 50, 55, 60, 62, 65, 67, 70,
                  75, 80, 85)  # fmt: skip
        for g, (lo, hi) in enumerate(zip(bounds, [*bounds[1:], 116], strict=True)):
            got = p12[:, p_head + 1 + g]
            if hi <= 100:
                np.testing.assert_array_equal(got, single[:, lo:hi].sum(axis=1), err_msg=str(sex))
            else:  # 85 and over: 85..99 and the three top groups
                want = single[:, lo:].sum(axis=1) + pct12[:, c_head + 101 : c_head + 104].sum(1)
                np.testing.assert_array_equal(got, want)
    # GQ1: its leaves partition the group-quarters population, its heads add up
    d = table_definition("GQ1")
    assert (gq[:, list(d.leaves)].sum(axis=1) == gq[:, 0]).all()
    assert (gq[:, 1] + gq[:, 20] == gq[:, 0]).all()  # institutional + noninstitutional
    assert d.labels[3].endswith("Federal detention centers (101)")


ITERATIONS = tuple(f"P12{k}" for k in "ABCDEFGHI")


def test_the_race_iterations_of_p12_count_their_persons() -> None:
    """P12A-P12I: P12's lines for the persons of one race alone (A-F), of two or more
    races (G), Hispanic (H), White alone not Hispanic (I); the Census's names."""
    people = [  # (sex, age, hispanic, cenrace), all householders (relgq 0)
        (0, 30, 0, 0), (1, 2, 0, 0), (0, 30, 1, 0),  # White alone: two not Hispanic
        (1, 40, 0, 1), (0, 70, 1, 2), (1, 90, 0, 3), (0, 19, 0, 4), (1, 20, 1, 5),
        (0, 50, 0, 6), (1, 60, 1, 62),  # two or more races: the first and the last
    ]  # fmt: skip
    cells = [int(np.ravel_multi_index((0, s, a, h, r), DHCP.shape)) for s, a, h, r in people]
    row = sp.csr_matrix(
        (np.ones(len(cells), dtype=np.int64), ([0] * len(cells), cells)), shape=(1, DHCP.size)
    )
    t = tabulate_dhc_person_rows(row, IDS)
    p12 = _values(t["P12"], "P12")[0]
    it = {n: _values(t[n], n)[0] for n in ITERATIONS}
    assert [int(it[n][0]) for n in ITERATIONS] == [3, 1, 1, 1, 1, 1, 2, 4, 2]
    np.testing.assert_array_equal(sum(it[f"P12{k}"] for k in "ABCDEFG"), p12)  # a partition
    # lines: 2 + g for a man of age group g (0: under 5 ... 22: 85 and over), 26 + g a woman
    assert it["P12A"][26] == 1 and it["P12I"][26] == 1  # the White girl under 5
    assert it["P12A"][2 + 9] == 2 and it["P12I"][2 + 9] == 1  # White men 30 to 34, one Hispanic
    assert it["P12G"][2 + 13] == 1 and it["P12G"][26 + 15] == 1  # a man 50-54, a woman 60-61
    ages = [i for i in np.flatnonzero(it["P12H"]) if i not in (0, 1, 25)]  # not the heads
    assert ages == [2 + 9, 2 + 19, 26 + 5, 26 + 15]  # Hispanic: men 30, 70; women 20, 60
    assert it["P12D"][26 + 22] == 1 and it["P12E"][2 + 4] == 1  # 85 and over; 18 and 19
    for name in ITERATIONS:
        d = table_definition(name)
        assert d.labels == table_definition("P12").labels and d.variables[0] == f"{name}_001N"
    assert table_definition("P12D").title == "SEX BY AGE FOR SELECTED AGE CATEGORIES (ASIAN ALONE)"
    assert table_definition("P12I").universe == "People who are White alone, not Hispanic or Latino"
    assert table_definition("P12G").universe == "People who are Two or More Races"


def test_gq1_holds_the_major_types_of_the_pl_table_p5() -> None:
    rng = np.random.default_rng(3)
    full = sp.csr_matrix(rng.poisson(1e-4, size=(2, DHCP.size)).astype(np.int64))
    ids = level_identifiers([("Block", 16, np.asarray(["5000195000001000", "5000195000001001"]))])
    gq = _values(tabulate_dhc_person_rows(full, ids)["GQ1"], "GQ1")
    units = sp.csr_matrix((2, 16), dtype=np.int64)
    p5 = _values(tabulate_rows(full @ pl94_map(DHCP), units, ids, ("P5",))["P5"], "P5")
    assert gq[:, 0].sum() > 0
    # P5: Total, Institutionalized, its 4 major types, Noninstitutionalized, its 3
    major = {0: 0, 1: 1, 2: 2, 3: 9, 4: 13, 5: 14, 6: 20, 7: 21, 8: 22, 9: 25}
    for p5_line, gq_line in major.items():
        np.testing.assert_array_equal(p5[:, p5_line], gq[:, gq_line], err_msg=str(p5_line))


def _hh_cell(sex: int, test, hhage: int = 2, hisp: int = 0, race: int = 0, tenure: int = 0) -> int:
    """A ``dhch-2020`` cell that is no structural zero: a householder of ``sex``, 35-44
    (``hhage`` 2, or another level under 60), not Hispanic (``hisp``), White alone
    (``race``), no one 60+, owned with a mortgage (``tenure``), of the first type that
    meets ``test``."""
    for k, t in enumerate(HHTYPE_DHCH_TYPES):
        if test(t):
            cell = int(
                np.ravel_multi_index((sex, hhage, hisp, race, 0, tenure, k), DHCH_2020.shape)
            )
            assert not DHCH_2020.structural_zero_mask[cell]
            return cell
    raise AssertionError("no such household type")


def test_household_type_and_size_of_a_handful_of_households() -> None:
    cells = [
        _hh_cell(0, lambda t: t.married and t.size == 2),  # married couple
        _hh_cell(1, lambda t: t.couple == 0 and t.relatives and t.size == 2),  # mother, child
        _hh_cell(0, lambda t: t.couple == 0 and t.relatives and t.size == 4),  # father, 3
        _hh_cell(0, lambda t: t.size == 1),  # living alone
        _hh_cell(1, lambda t: t.couple == 3 and not t.relatives and t.size == 2),  # cohabiting
        _hh_cell(1, lambda t: t.couple == 0 and not t.relatives and t.size == 7),  # 7 roommates
    ]
    hh = sp.csr_matrix((np.ones(6, dtype=np.int64), ([0] * 6, cells)), shape=(1, DHCH_2020.size))
    units = np.zeros((1, 35), dtype=np.int64)
    units[0, :11] = (2, 1, 1, 2, 1, 0, 0, 0, 2, 0, 1)  # 6 occupied, 4 vacant
    units[0, 11 + 15] = 1  # a facility: college housing
    t = tabulate_dhc_household_rows(hh, units, IDS)
    #                                              tot fam mar oth M  F  non alone not
    np.testing.assert_array_equal(_values(t["P16"], "P16")[0], [6, 3, 1, 2, 1, 1, 3, 1, 2])
    np.testing.assert_array_equal(_values(t["H9"], "H9")[0], [6, 1, 3, 0, 1, 0, 0, 1])
    np.testing.assert_array_equal(_values(t["H3"], "H3")[0], [10, 6, 4])
    np.testing.assert_array_equal(_values(t["H4"], "H4")[0], [6, 2, 1, 3])
    np.testing.assert_array_equal(_values(t["H5"], "H5")[0], [4, 1, 0, 0, 0, 2, 0, 1])
    assert table_definition("H4").labels[1] == "Total:!!Owned with a mortgage or a loan"
    assert table_definition("P16").labels[4] == (
        "Total:!!Family households:!!Other family:!!Male householder, no spouse present"
    )


def test_the_tables_by_the_householder_of_a_handful_of_households() -> None:
    alone, couple = (lambda t: t.size == 1), (lambda t: t.married and t.size == 3)
    cells = [
        _hh_cell(0, alone, hhage=0, race=0, tenure=2),  # White renter living alone
        _hh_cell(1, couple, hhage=3, hisp=1, race=5, tenure=0),  # Hispanic SOR owner
        _hh_cell(1, couple, hhage=3, hisp=1, race=5, tenure=1),  # the same, free and clear
        _hh_cell(0, alone, hhage=4, hisp=0, race=1, tenure=2),  # Black renter alone
        _hh_cell(0, couple, hhage=1, hisp=1, race=6, tenure=2),  # Hispanic, 2+ races, renter
    ]
    hh = sp.csr_matrix((np.ones(5, dtype=np.int64), ([0] * 5, cells)), shape=(1, DHCH_2020.size))
    t = tabulate_dhc_household_rows(hh, np.zeros((1, 35), dtype=np.int64), IDS)
    #                                             tot W  B  AI A  NH SOR 2+
    np.testing.assert_array_equal(_values(t["H6"], "H6")[0], [5, 1, 1, 0, 0, 0, 2, 1])
    np.testing.assert_array_equal(
        _values(t["H7"], "H7")[0],
        # tot not-Hispanic: W B AI A NH SOR 2+; Hispanic: W B AI A NH SOR 2+
        [5, 2, 1, 1, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 2, 1],
    )
    np.testing.assert_array_equal(
        _values(t["H10"], "H10")[0],
        [5, 2, 0, 0, 0, 0, 0, 2, 0, 3, 1, 1, 0, 0, 0, 0, 1],  # owners: 2 SOR; renters: W B 2+
    )
    np.testing.assert_array_equal(_values(t["H11"], "H11")[0], [5, 2, 0, 2, 3, 2, 1])
    np.testing.assert_array_equal(
        _values(t["H12"], "H12")[0],
        [5, 2, 0, 0, 2, 0, 0, 0, 0, 3, 2, 0, 1, 0, 0, 0, 0],  # owners: two 3-person
    )
    assert table_definition("H7").labels[9] == "Total:!!Hispanic or Latino householder:"
    assert table_definition("H10").labels[-1] == (
        "Total:!!Renter occupied:!!Householder who is Two or More Races"
    )
    assert table_definition("H11").labels[2] == (
        "Total:!!Owner occupied:!!Not Hispanic or Latino householder"
    )


@pytest.fixture(scope="module")
def truth(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("vt-dhc-tables") / "vt"
    generate_state("VT", 5, out, scale=0.01)
    return read_cef_blocks(out, DEFAULT_GEOLEVELS, get_schema("dhcp-2020"), with_units="dhch")


def test_the_household_tables_of_an_mdf_read_back_are_those_of_its_histograms(truth) -> None:
    blocks = truth.hierarchy.blocks
    records = dhch_unit_records(blocks, truth.dhc_households, truth.tenvacgq)
    cell, level = decode_dhch_units(records, "mdf_units.parquet")
    geo = [
        "".join(r)
        for r in zip(
            *(records.column(c).to_pylist()
              for c in ("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLKGRPCE", "TABBLK")),
            strict=True,
        )
    ]  # fmt: skip
    households, units = dhc_household_histograms(
        np.searchsorted(blocks, geo), cell, level, blocks.size
    )
    got = tabulate_dhc_households(households, units, truth.hierarchy)
    want = tabulate_dhc_households(truth.dhc_households, truth.tenvacgq, truth.hierarchy)
    for name, table in want.items():
        assert got[name].equals(table), name
    p16, h9, h3, h4 = (_values(want[n], n) for n in ("P16", "H9", "H3", "H4"))
    n_households = int(truth.dhc_households.sum())
    assert p16[0, 0] == n_households > 0  # the top level: every household
    # households are occupied units: P16, H9 and H4 share their total, H3's occupied
    assert (p16[:, 0] == h9[:, 0]).all() and (h9[:, 0] == h4[:, 0]).all()
    assert (h3[:, 1] == h4[:, 0]).all()
    assert (h9[:, 1] == p16[:, 7]).all()  # 1-person households live alone
    assert want["P16"].column("GEOID").to_pylist() == want["H3"].column("GEOID").to_pylist()
    # the tables by the householder partition the same households; owners are H4's
    h6, h7, h10, h11, h12 = (_values(want[n], n) for n in ("H6", "H7", "H10", "H11", "H12"))
    for table in (h6, h7, h10, h11, h12):
        assert (table[:, 0] == h9[:, 0]).all()
    np.testing.assert_array_equal(h6[:, 1:], h7[:, 2:9] + h7[:, 10:17])  # race either origin
    np.testing.assert_array_equal(h10[:, 1], h4[:, 1] + h4[:, 2])  # owned, both ways
    np.testing.assert_array_equal(h10[:, 9], h4[:, 3])  # rented
    np.testing.assert_array_equal(h12[:, 2:9] + h12[:, 10:17], h9[:, 1:])  # size either tenure
    np.testing.assert_array_equal(h11[:, [1, 4]], h10[:, [1, 9]])


def test_bad_input_is_one_line() -> None:
    with pytest.raises(InputError, match="block row is out of"):
        dhc_household_histograms(np.array([3]), np.array([-1]), np.array([4]), 2)
    with pytest.raises(InputError, match="tenvacgq level"):
        dhc_household_histograms(np.array([0]), np.array([-1]), np.array([35]), 2)
    with pytest.raises(SchemaError, match="DHC person rows must have"):
        tabulate_dhc_person_rows(sp.csr_matrix((1, 7)), IDS)
    with pytest.raises(SchemaError, match="unit rows must have 35"):
        tabulate_dhc_household_rows(sp.csr_matrix((1, 1044)), np.zeros((1, 16)), IDS)


def test_the_tables_a_release_publishes_and_their_codebook() -> None:
    assert release_table_names("pl94") == ("P1", "P2", "P3", "P4", "P5", "H1")
    assert release_table_names("dhcp-2020")[6:] == ("P12", *ITERATIONS, "PCT12", "GQ1")
    assert release_table_names("ddp-2010", "household2010")[-4:] == ("P15", "P18", "P22", "H13")
    assert release_table_names("dhcp-2020", "dhch-2020")[6:] == DHC_TABLE_NAMES
    book = codebook(release_table_names("dhcp-2020")).to_pydict()
    rows = [
        (t, v, lab)
        for t, v, lab in zip(book["table"], book["variable"], book["label"], strict=True)
    ]
    assert ("PCT12", "PCT12_209N", "Total:!!Female:!!110 years and over") in rows
    assert ("P12", "P12_026N", "Total:!!Female:") in rows
    assert ("P12H", "P12H_049N", "Total:!!Female:!!85 years and over") in rows

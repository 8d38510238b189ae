"""The 2020 DHC household run's input read in parts: each block's households in the
dhch-2020 schema and its units by tenvacgq, the unit constraints (h1, gq_vect, owned,
the structural zeros) holding on them, and the one line naming a column it lacks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from censusdp.cli import main
from censusdp.data.geography import DEFAULT_GEOLEVELS
from censusdp.data.schema import PL94, get_schema
from censusdp.data.schema_dhc import DHCH_2020
from censusdp.data.units_dhc import dhch_marginal, unit_constraint_violations
from censusdp.errors import InputError
from censusdp.generate import generate_state
from censusdp.io.cef import read_cef
from censusdp.io.cef_households import dhch_household_cells
from censusdp.io.cef_stream import read_cef_blocks

DHCP = get_schema("dhcp-2020")


@pytest.fixture(scope="module")
def vt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("vt-dhch-input") / "vt"
    generate_state("VT", 2, out, scale=0.01)
    for name in ("persons", "units"):  # small row groups: the input is read in parts
        pq.write_table(pq.read_table(out / f"{name}.parquet"), out / f"{name}.parquet",
                       row_group_size=400)  # fmt: skip
    return out


@pytest.fixture(scope="module")
def blocks(vt: Path):
    return read_cef_blocks(vt, DEFAULT_GEOLEVELS, DHCP, with_units="dhch", part_rows=2000)


def _copy_with(src: Path, dst: Path, which: str, change) -> Path:
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


def test_every_household_is_in_its_block_and_cell(vt: Path, blocks) -> None:
    cef = read_cef(vt)
    assert blocks.parts > 1  # several parts, stacked
    row = np.searchsorted(cef.units["unit_id"], cef.persons["unit_id"])
    units, cells = dhch_household_cells(cef.persons, row, cef.n_units, cef.units["ten"])
    block = np.searchsorted(blocks.hierarchy.blocks, cef.units["geocode"][units])
    want = sp.csr_matrix(
        (np.ones(cells.size, dtype=np.int64), (block, cells)), shape=blocks.dhc_households.shape
    )
    assert (blocks.dhc_households != want).nnz == 0
    household = cef.units["occupied"] & (cef.units["gqtype"] == 0)
    assert blocks.dhc_households.sum() == household.sum() > 0
    assert not DHCH_2020.structural_zero_mask[blocks.dhc_households.indices].any()
    tenure = dhch_marginal(blocks.dhc_households, "hhtenshort_3lev").sum(axis=0)
    ten = cef.units["ten"][household]
    assert tenure.tolist() == [(ten == 1).sum(), (ten == 2).sum(), (ten >= 3).sum()]


def _truth_invariants(blocks) -> tuple[np.ndarray, np.ndarray]:
    units = blocks.tenvacgq
    gqhh = np.column_stack([units[:, :11].sum(axis=1), units[:, 11:]])
    return np.asarray(blocks.housing_units.toarray()), gqhh


def test_the_unit_constraints_hold_on_the_input_and_catch_a_change(blocks) -> None:
    h1, gqhh = _truth_invariants(blocks)
    households, units = blocks.dhc_households, blocks.tenvacgq
    assert not any(
        v.any() for v in unit_constraint_violations(households, units, h1, gqhh).values()
    )
    # one household moved from owned with a mortgage to rented: owned breaks in its block
    m = households.tolil()
    r, c = next((r, c) for r, c in zip(*households.nonzero(), strict=True)
                if np.unravel_index(c, DHCH_2020.shape)[5] == 0)  # fmt: skip
    idx = list(np.unravel_index(c, DHCH_2020.shape))
    idx[5] = 2
    m[r, c] -= 1
    m[r, int(np.ravel_multi_index(tuple(idx), DHCH_2020.shape))] += 1
    got = unit_constraint_violations(m.tocsr(), units, h1, gqhh)
    assert np.flatnonzero(got["owned"]).tolist() == [r] and not got["h1_occupied"].any()
    # a household in a structural zero, one too many, a vacant unit become a GQ facility
    zero = int(np.flatnonzero(DHCH_2020.structural_zero_mask)[0])
    extra = households.tolil()
    extra[r, zero] += 1
    got = unit_constraint_violations(extra.tocsr(), units, h1, gqhh)
    assert np.flatnonzero(got["structural_zeros"]).tolist() == [r]
    assert np.flatnonzero(got["h1_occupied"]).tolist() == [r]
    moved = units.copy()
    v = int(np.flatnonzero(units[:, 4:11].sum(axis=1))[0])
    moved[v, 4 + int(np.flatnonzero(units[v, 4:11])[0])] -= 1
    moved[v, 20] += 1
    got = unit_constraint_violations(households, moved, h1, gqhh)
    assert (
        np.flatnonzero(got["gq_vect"]).tolist() == [v] == np.flatnonzero(got["h1_vacant"]).tolist()
    )


@pytest.mark.parametrize(
    ("which", "column"),
    [("persons", "rel"), ("persons", "relgq"), ("units", "ten"), ("units", "qgqtyp")],
)
def test_a_dhc_household_read_without_a_column_is_one_line_naming_it(
    vt: Path, tmp_path: Path, which: str, column: str
) -> None:
    def drop(c: dict) -> None:
        for name in (column,) if which == "persons" else ("ten", "vacs", "qgqtyp"):
            c.pop(name)

    bad = _copy_with(vt, tmp_path / "bad", which, drop)
    if which == "units":  # every other run reads it
        assert read_cef_blocks(bad, DEFAULT_GEOLEVELS, PL94).tenvacgq is None
    with pytest.raises(InputError) as exc:
        read_cef_blocks(bad, DEFAULT_GEOLEVELS, PL94, with_units="dhch")
    line = str(exc.value)
    first = column if which == "persons" else "ten"
    assert "\n" not in line and f"{which}.parquet: missing column {first!r}" in line
    assert "the 2020 DHC's household run reads" in line


def test_a_relgq_householder_that_is_not_rels_is_named(vt: Path, tmp_path: Path) -> None:
    def change(c: dict) -> None:
        r = int(np.flatnonzero((c["rel"] == 0) & (c["relgq"] == 1))[0])
        c["relgq"][r] = 2  # the householder made a spouse in relgq only

    bad = _copy_with(vt, tmp_path / "bad", "persons", change)
    with pytest.raises(InputError) as whole:
        read_cef(bad)
    with pytest.raises(InputError) as streamed:
        read_cef_blocks(bad, DEFAULT_GEOLEVELS, DHCP, with_units="dhch")
    for exc in (whole.value, streamed.value):
        assert len(exc.problems) == 1, exc.problems
        assert "column 'relgq'" in exc.problems[0] and "names a householder" in exc.problems[0]
    assert whole.value.problems == streamed.value.problems


def test_a_dhc_release_on_an_input_without_tenure_is_one_line_naming_it(
    vt: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = _copy_with(
        vt, tmp_path / "plain", "units", lambda c: [c.pop(k) for k in ("ten", "vacs", "qgqtyp")]
    )
    out = tmp_path / "run"
    argv = ["run", "--input", str(plain), "--out", str(out), "--preset", "dhc-2020", "--seed", "1"]
    assert main([*argv, "--quiet"]) == 1  # an invalid input, as every reader refuses one
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "units.parquet: missing column 'ten'" in err
    assert not out.exists()
    # with the columns, the household run is released:
    # tests/release/pipeline/test_dhc_household_run.py

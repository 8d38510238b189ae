"""The 2020 DHC presets (dhc-2020, dhc-2020-units, dhc-2020-pr, dhc-2020-pr-units) against
production's allocation, measurement by measurement.

Production's values (DAS_2020_DHC_Production_Code, ``programs/strategies/dhcp_strategies.py``
and ``dhch_strategies.py``, the ``*_20220922_exp_iteration_23_1`` strategies the
``configs/production/dhc/*.ini`` name) are each measurement's rho, in ten-thousandths,
in the strategy's query order; :data:`PRODUCTION` transcribes them, and where the
production mirror is on this machine they are also read from the strategy files. The
presets store shares (geolevel, then query); each measurement's rho and noise variance
are recomputed here from production's numbers alone: ``rho_q`` as written, the global
rho their sum (``programs/engine/budget.py``, ``QueryBudget`` with no
``geolevel_names``), variance ``1 / rho_q`` (``global_scale_sq / dftot``).
"""

from __future__ import annotations

import ast
import json
import math
import re
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest

from censusdp.cli import main
from censusdp.errors import ConfigError
from censusdp.io.budget_files import load_preset, preset_names, resolve_release_budget
from censusdp.privacy import accounting
from censusdp.privacy.budget_report import budget_report

PERSON_QUERIES = (
    "age_18_64_116 * relgq_4_groups", "age_18_64_116 * sex", "age_38_groups * sex",
    "hispanic * sex", "sex * relgq_4_groups", "gq_constr_groups * age_10_groups",
    "popSehsdTargetsRelship",
    "hispanic * sex * age_40_groups * relship_and_eight_level_GQ * cenrace",
    "relgq * age_40_groups * hispanic * cenrace * sex", "detailed",
)  # fmt: skip
UNIT_QUERIES = (
    "multig * hisp * hhtenshort_2lev", "hisp * hhtenshort_2lev", "hisp * hhtenshort_2lev * race",
    "partner_type_detailed_own_child_status * sex * hhtenshort_2lev",
    "coupled_hh_type * hisp * hhtenshort_2lev",
    "sex * hisp * hhtenshort_3lev * race * DetailedCoupleTypeMultGenDetOwnChildSize",
    "sex * hisp * hhtenshort_3lev * race * hhage * DetailedCoupleTypeMultGenDetOwnChildSize",
    "hhtenshort_3lev * hhage * DetailedCoupleTypeMultGenDetOwnChildSize", "detailed",
    "tenvacgq",  # the unit histogram's query (UNITDPQUERIES)
)  # fmt: skip

PRODUCTION: dict[str, dict[str, tuple[int, ...]]] = {
    "dhc-2020": {
        "Block": (11, 11, 11, 11, 11, 11, 11, 11, 11, 11),
        "Block_Group": (430, 430, 430, 430, 430, 430, 430, 430, 430, 430),
        "Tract_Subset": (868, 868, 868, 868, 868, 3472, 3472, 868, 868, 868),
        "Tract_Subset_Group": (478, 478, 478, 478, 478, 1912, 478, 478, 478, 478),
        "Prim": (478, 478, 478, 478, 478, 1912, 478, 478, 478, 478),
        "County": (310, 310, 310, 310, 310, 1240, 1240, 310, 310, 310),
        "State": (999, 999, 999, 999, 999, 3996, 999, 999, 999, 999),
        "US": (73, 73, 73, 73, 73, 292, 73, 73, 73, 73),
    },
    "dhc-2020-pr": {
        "Block": (11, 11, 11, 11, 11, 11, 11, 11, 11, 11),
        "Block_Group": (446, 446, 446, 446, 446, 446, 446, 446, 446, 446),
        "Tract_Subset": (878, 878, 878, 878, 878, 3512, 3512, 878, 878, 878),
        "Tract_Subset_Group": (490, 490, 490, 490, 490, 1961, 490, 490, 490, 490),
        "Prim": (490, 490, 490, 490, 490, 1961, 490, 490, 490, 490),
        "County": (320, 320, 320, 320, 320, 1280, 1280, 320, 320, 320),
        "State": (1009, 1011, 1011, 1011, 1011, 4045, 1011, 1011, 1011, 1011),
    },
    "dhc-2020-units": {
        "Block": (11, 3, 17, 22, 44, 15, 15, 3, 15, 15),
        "Block_Group": (291, 78, 442, 581, 1162, 407, 407, 78, 407, 407),
        "Tract_Subset": (1150, 310, 1750, 2300, 4601, 1610, 1610, 310, 1610, 1610),
        "Tract_Subset_Group": (973, 214, 1500, 1946, 973, 973, 973, 214, 973, 973),
        "Prim": (973, 214, 1500, 1946, 973, 973, 973, 214, 973, 973),
        "County": (986, 266, 1500, 1972, 3944, 1380, 1380, 266, 1380, 1380),
        "State": (714, 193, 191, 1428, 714, 3216, 3216, 193, 3931, 3216),
        "US": (792, 212, 212, 792, 792, 257, 257, 212, 1049, 259),
    },
    "dhc-2020-pr-units": {
        "Block": (11, 3, 17, 22, 44, 15, 15, 3, 15, 15),
        "Block_Group": (346, 93, 526, 691, 1382, 484, 484, 93, 484, 484),
        "Tract_Subset": (1205, 325, 1833, 2410, 4820, 1687, 1687, 325, 1687, 1687),
        "Tract_Subset_Group": (1054, 232, 1624, 2107, 1054, 1054, 1054, 232, 1054, 1054),
        "Prim": (1054, 232, 1624, 2107, 1054, 1054, 1054, 232, 1054, 1054),
        "County": (1041, 281, 1584, 2082, 4164, 1457, 1457, 281, 1457, 1457),
        "State": (748, 202, 200, 1496, 748, 3368, 3368, 202, 4117, 3364),
    },
}
STRATEGIES = {
    "dhc-2020": ("dhcp_strategies.py", "DecompTestStrategyDHCP_20220922_exp_iteration_23_1"),
    "dhc-2020-pr": ("dhcp_strategies.py", "DecompTestStrategyDHCP_PR_20220922_exp_iteration_23_1"),
    "dhc-2020-units": ("dhch_strategies.py", "DecompTestStrategyDHCH_20220922_exp_iteration_23_1"),
    "dhc-2020-pr-units": (
        "dhch_strategies.py",
        "DecompTestStrategyDHCH_PR_20220922_exp_iteration_23_1",
    ),
}
# production's geolevels (top first) and their names here
LEVELS = {
    "US": "US", "State": "State", "County": "County", "Prim": "Prim",
    "Tract_Subset_Group": "TractSubsetGroup", "Tract_Subset": "TractSubset",
    "Block_Group": "BlockGroup", "Block": "Block",
}  # fmt: skip
MIRROR = Path("/work/.mirror/uscensusbureau+DAS_2020_DHC_Production_Code/repo")


def _canonical(query: str) -> str:
    return "*".join(part.strip().lower() for part in query.split("*"))


def _expected(preset: str) -> dict[tuple[str, str], Fraction]:
    queries = UNIT_QUERIES if preset.endswith("-units") else PERSON_QUERIES
    return {
        (LEVELS[level], _canonical(q)): Fraction(v, 10_000)
        for level, values in PRODUCTION[preset].items()
        for q, v in zip(queries, values, strict=True)
    }


@pytest.mark.parametrize("preset", sorted(PRODUCTION))
def test_every_measurement_has_productions_rho_and_variance(preset: str) -> None:
    budget = load_preset(preset)
    expected = _expected(preset)
    got = {(m.geolevel, m.query): m for m in budget.measurements()}
    assert set(got) == set(expected)
    for key, rho in expected.items():
        m = got[key]
        assert m.rho == rho, key
        assert m.mechanism.sigma_squared == 1 / rho, key  # production: global_scale_sq / dftot
    assert budget.rho == sum(expected.values())
    assert budget.schema == ("dhch-2020" if preset.endswith("-units") else "dhcp-2020")
    tops = [LEVELS[n] for n in LEVELS if n in PRODUCTION[preset]]
    assert budget.geolevel_names == tuple(tops)


def test_global_rho_as_production_states_it() -> None:
    persons, units = load_preset("dhc-2020"), load_preset("dhc-2020-units")
    assert persons.rho == Fraction(49_622, 10_000) and units.rho == Fraction(77_005, 10_000)
    # Puerto Rico spends the same totals over seven geolevels
    assert load_preset("dhc-2020-pr").rho == persons.rho
    assert load_preset("dhc-2020-pr-units").rho == units.rho
    # not the configuration's global_scale = 254/485, which this path does not read
    assert persons.rho != 1 / Fraction(254, 485) ** 2


@pytest.mark.parametrize("preset", sorted(PRODUCTION))
def test_epsilons_in_the_notes_are_productions_and_ours(preset: str) -> None:
    budget = load_preset(preset)
    rho = float(budget.rho)
    bun_steinke = rho + 2 * math.sqrt(rho * math.log(1e10))  # budget.py getTotalzCDPEpsilon
    cks = accounting.epsilon_from_rho(budget.rho, Fraction(1, 10**10))
    notes = " ".join(budget.notes)
    assert f"{bun_steinke:.2f}" in notes and f"{cks:.2f}" in notes
    assert cks < bun_steinke
    assert budget.epsilon() == pytest.approx(cks)


def test_the_release_composes_persons_and_units() -> None:
    assert {"dhc-2020", "dhc-2020-units", "dhc-2020-pr", "dhc-2020-pr-units"} <= set(preset_names())
    for persons in ("dhc-2020", "dhc-2020-pr"):
        release = resolve_release_budget(preset=persons)
        assert release.units is not None and release.units.name == f"{persons}-units"
        rho = Fraction(49_622 + 77_005, 10_000)
        assert release.to_dict()["rho_exact"] == str(rho)
        assert release.to_dict()["epsilon"] == pytest.approx(
            accounting.epsilon_from_rho(rho, Fraction(1, 10**10))
        )


def test_budget_report_shows_the_unit_histogram_query() -> None:
    report = budget_report(resolve_release_budget(preset="dhc-2020-units", units="none"))
    rows = [r for r in report.rows if r["query"] == "tenvacgq"]
    assert len(rows) == 8 and {r["cells"] for r in rows} == {35}
    assert [r["rho"] for r in rows if r["geolevel"] == "US"] == ["259/10000"]
    attributes = {a["attribute"] for a in report.attributes}
    assert {"tenvacgq", "hhtype_dhch", "hhtenshort_3lev"} <= attributes
    detailed = next(r for r in report.rows if r["query"] == "detailed")
    assert detailed["cells"] == 1_578_528


def _production_values(preset: str) -> dict[tuple[str, str], Fraction]:
    if not MIRROR.exists():
        pytest.skip("the DHC production mirror is not on this machine")
    path, cls = STRATEGIES[preset]
    text = subprocess.run(
        ["git", "-C", str(MIRROR), "show", f"HEAD:das_decennial/programs/strategies/{path}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    start = text.index(f"class {cls}:")
    body = text[start : text.find("\nclass ", start + 1)]
    names: dict[str, tuple[str, ...]] = {}
    values: dict[str, tuple[Fraction, ...]] = {}
    for kind in ("", "UNIT"):
        for m in re.finditer(rf'\[CC\.{kind}DPQUERIES\]\["(\w+)"\] = (\(.*\))', body):
            names[m.group(1)] = names.get(m.group(1), ()) + tuple(ast.literal_eval(m.group(2)))
        for m in re.finditer(rf'\[CC\.{kind}QUERIESPROP\]\["(\w+)"\] = (\(.*\))', body):
            fracs = tuple(
                Fraction(int(a), int(b)) for a, b in re.findall(r"Fr\((\d+), (\d+)\)", m.group(2))
            )
            values[m.group(1)] = values.get(m.group(1), ()) + fracs
    return {
        (LEVELS[level], _canonical(q)): v
        for level in names
        for q, v in zip(names[level], values[level], strict=True)
    }


@pytest.mark.parametrize("preset", sorted(PRODUCTION))
def test_the_transcription_is_the_production_strategy(preset: str) -> None:
    assert _production_values(preset) == _expected(preset)


def test_run_refuses_a_dhc_budget_on_the_other_run_in_one_line(tmp_path: Path) -> None:
    # the whole DHC release runs (tests/release/pipeline/test_dhc_household_run.py); a
    # DHC budget given as the other run's is refused before anything is read
    from censusdp.privacy.release_budget import ReleaseBudget
    from censusdp.release.pipeline import run_release

    for persons, units, run in (
        ("dhc-2020-units", None, "unit"),
        ("dhc-2020", "dhc-2020", "person"),
    ):
        budget = ReleaseBudget(load_preset(persons), None if units is None else load_preset(units))
        with pytest.raises(ConfigError) as info:
            run_release(tmp_path / "no-input", tmp_path / "run", budget)
        message = str(info.value)
        assert "\n" not in message and f"the {run} run's" in message, message
        assert not (tmp_path / "run").exists()


@pytest.mark.slow  # 160 measurements' epsilons (CKS), about 10 s
def test_cli_budget_reports_the_dhc_allocation(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["budget", "--preset", "dhc-2020", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["totals"]["rho"] == "24811/5000"
    assert len(report["measurements"]) == 80
    prim = [m for m in report["measurements"] if m["geolevel"] == "Prim"]
    assert [m["rho"] for m in prim][5] == "239/1250"  # gq_constr_groups * age_10_groups: 1912
    assert report["release"]["rho_exact"] == "126627/10000"
    assert main(["budget", "--preset", "dhc-2020-pr-units"]) == 0
    out = capsys.readouterr().out
    assert "tenvacgq" in out and "global rho = 15401/2000" in out
    assert main(["budget", "--preset", "dhc-2020-pr"]) == 0
    out = capsys.readouterr().out
    assert "people and households with their units (dhc-2020-pr-units)" in out
    assert "P1-P5" not in out

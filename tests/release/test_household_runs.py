"""What re-measures or re-estimates a release with a household run: the error bars
re-release the household run with its persons and cover every table; infer's GLS reads
its person run and leaves out the lines the household run makes, saying so
(docs/households.md, "Outputs"); the others read it as any release."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from censusdp.cli import main
from censusdp.evaluate import EvaluateOptions
from censusdp.evaluate.core import _trial_budget
from censusdp.evaluate.errorbars import release_measures
from censusdp.infer.release import household_lines
from censusdp.io.budget_files import load_preset
from censusdp.release.household_runs import (
    has_household_run,
    household_run_tables,
    household_schema,
)


def _manifest(units: str | None) -> dict:
    # a manifest names its person schema at the top, its unit run's under ``units``
    m = {"kind": "release", "schema": "dhc-lite", "persons": load_preset("ddp-2010").to_dict()}
    if units is not None:
        m["units"] = load_preset(units).to_dict()
    return m


def test_a_household_run_is_told_from_its_unit_budget() -> None:
    assert has_household_run(_manifest("ddp-2010-households")["units"])
    assert has_household_run(load_preset("ddp-2010-households"))
    assert not has_household_run(_manifest("ddp-2010-units")["units"])
    assert not has_household_run(load_preset("ddp-2010-units"))
    assert not has_household_run(None)
    assert household_schema(_manifest("ddp-2010-households")) == "household2010"
    assert household_schema(_manifest("ddp-2010-units")) is None


def _run(tmp_path: Path, units: str | None) -> Path:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "manifest.json").write_text(json.dumps(_manifest(units)))
    return tmp_path


DHC = ("P12", *(f"P12{k}" for k in "ABCDEFGHI"), "PCT12", "GQ1")
DHCH = ("P16", "H3", "H4", "H5", "H6", "H7", "H9", "H10", "H11", "H12")


@pytest.mark.parametrize(
    ("person", "units", "unit_run", "measured"),
    [
        ("pl94", "household2010", ("H1", "P15", "P18", "P22", "H13"),
         ("P1", "P2", "P3", "P4", "P5", "H1", "P15", "P18", "P22", "H13")),
        ("dhcp-2020", "dhch-2020", ("H1", *DHCH),
         ("P1", "P2", "P3", "P4", "P5", "H1", *DHC, *DHCH)),
        ("pl94", "units", (), ("P1", "P2", "P3", "P4", "P5", "H1")),
        ("dhcp-2020", None, (), ("P1", "P2", "P3", "P4", "P5", "H1", *DHC)),
    ],
    ids=["ddp-households", "dhc-households", "occupancy", "dhc-persons-alone"],
)  # fmt: skip
def test_the_error_bars_cover_every_table_and_infer_leaves_out_the_household_lines(
    person: str, units: str | None, unit_run: tuple, measured: tuple
) -> None:
    """The error bars cover every table the release publishes, a household run's too
    (its tables, H1 first, are those it makes); infer's GLS leaves out H1's occupied and
    vacant lines, H1_001N is invariant."""
    manifest = {"schema": person, **({"units": {"schema": units}} if units else {})}
    assert household_run_tables(manifest) == unit_run
    assert release_measures(manifest) == ("total_population", *measured)
    lines = household_lines(manifest)
    assert list(lines) == (["H1_002N", "H1_003N"] if unit_run else [])
    assert all(
        why == f"infer has no GLS of a household run ({units}); their moe90 and moe95 come "
        "from --simulations"
        for why in lines.values()
    )


def test_a_simulation_too_large_to_hold_is_refused_in_one_line() -> None:
    """One re-release of a ``dhcp-2020`` person run holds its 905,184 live ``detailed``
    rows at every geounit: with 2 GiB, 100 blocks are over the bound, 10 are not (nor
    with half this machine's memory, the default). A household run's values count too:
    its ``dhch-2020`` households and, measured beside them, its units by ``tenvacgq``."""
    from types import SimpleNamespace

    import numpy as np

    from censusdp.data.geography import Hierarchy
    from censusdp.data.schema import get_schema
    from censusdp.errors import ConfigError
    from censusdp.infer.amc import require_affordable, rerelease_values, simulation_memory
    from synth import block_codes

    def plan(blocks: int, units: list | None = None) -> SimpleNamespace:
        h = Hierarchy.from_blocks(np.array(block_codes(1, 1, 1, blocks)))
        levels = h.geolevels.names
        persons = [(levels[-1], "detailed", None), (levels[0], "sex", None)]
        if units is not None:
            units = [(levels[-1], q, None) for q in units]
        return SimpleNamespace(
            schema=get_schema("dhcp-2020"),
            geo=SimpleNamespace(estimation=h, units=SimpleNamespace(estimation=h)),
            plans=(persons, units),
            unit_schema="dhch-2020",
        )

    small = plan(10)
    detailed = rerelease_values(
        SimpleNamespace(**{**vars(small), "plans": (small.plans[0][:1], None)})
    )["persons"]
    assert 10 * 900_000 < detailed <= 10 * get_schema("dhcp-2020").size  # live rows
    assert rerelease_values(small) == {"persons": detailed + 2}  # the top level's two sexes
    limit = 2 * 1024**3
    assert 10 * detailed * 24 > limit > detailed * 24  # detailed: of 10 blocks
    require_affordable(small, "RUN", limit)  # no error
    require_affordable(small, "RUN")
    with pytest.raises(ConfigError, match=r"^RUN: one re-release of its dhcp-2020 person run") as e:
        require_affordable(plan(100), "RUN", limit)
    assert "\n" not in str(e.value) and "(2.0 GB)" in str(e.value)
    assert "--simulations" in str(e.value) and simulation_memory() > detailed * 24
    # the household run: its households' detailed rows and the 35 tenvacgq levels beside
    households = rerelease_values(plan(10, ["detailed", "tenvacgq"]))
    assert households["persons"] == detailed + 2
    live = households["units"] - 10 * 35
    assert 10 * 100_000 < live <= 10 * get_schema("dhch-2020").size
    assert rerelease_values(plan(10, ["tenvacgq"]))["units"] == 10 * 35
    # 10 blocks of persons fit in 400 MiB; their households on top do not
    limit = 400 * 1024**2
    assert (detailed + 2) * 24 < limit < (detailed + 2 + households["units"]) * 24
    with pytest.raises(
        ConfigError, match=r"^RUN: one re-release of its dhcp-2020 person run \("
    ) as e:
        require_affordable(plan(10, ["detailed", "tenvacgq"]), "RUN", limit)
    assert f"and dhch-2020 household run ({households['units']:,})" in str(e.value)
    assert "\n" not in str(e.value)


def test_trials_rerun_a_household_run_with_its_budget(tmp_path) -> None:
    """``evaluate --trials`` re-runs the release: its household budget, rebuilt from the
    manifest, measures what the preset measures, with the same mechanisms."""
    run = _run(tmp_path, "ddp-2010-households")
    budget = _trial_budget(EvaluateOptions(), json.loads((run / "manifest.json").read_text()), run)
    preset = load_preset("ddp-2010-households")
    assert budget.units is not None and has_household_run(budget.units)

    def plan(b):
        return [(m.geolevel, m.query, m.mechanism.variance) for m in b.measurements()]

    assert plan(budget.units) == plan(preset)
    assert budget.units.epsilon() == preset.epsilon() == 2


def test_infer_refuses_a_schema_it_cannot_read_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``infer`` of a release whose person schema the GLS cannot read (here ``dhc-lite``,
    with a household run) is one line, exit 2, before any long work: the release here is
    a manifest alone, so validating or reading would fail otherwise; nothing is written."""
    run = _run(tmp_path / "run", "ddp-2010-households")
    assert main(["infer", str(run), "--out", str(tmp_path / "gls"), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "pl94 schema only" in err and "'dhc-lite'" in err, err
    assert "missing" not in err and "valid" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_a_household_run_on_a_spine_is_refused_before_measuring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the optimized spine the unit run would have its own spine, which a household
    run (estimated on the persons' hierarchy) cannot use: one line, after reading and
    before any noise is drawn; nothing is left behind."""
    from censusdp.errors import ConfigError
    from censusdp.generate import generate_state
    from censusdp.privacy.budget_config import budget_from_toml
    from censusdp.privacy.release_budget import ReleaseBudget
    from censusdp.release import pipeline
    from censusdp.release.options import ReleaseOptions

    generate_state("VT", 2, tmp_path / "cef", scale=0.002)
    persons = load_preset("pl94-2020")
    levels = [(n, k) for n, k in persons.geolevels]
    households = budget_from_toml(
        'name = "hh"\ndescription = "households on the spine levels"\n'
        'schema = "household2010"\nmechanism = "discrete_gaussian"\nrho = "1"\n'
        'delta = "1e-10"\nneighbours = "bounded"\n'
        + "".join(
            f'[[geolevels]]\nname = "{n}"\nlength = {k}\nshare = "1/{len(levels)}"\n'
            '[geolevels.queries]\ndetailed = "1"\n'
            for n, k in levels
        ),
        origin="test",
    )

    def no_noise(*args, **kwargs):
        raise AssertionError("measured before refusing")

    monkeypatch.setattr(pipeline, "measure_runs", no_noise)
    with pytest.raises(ConfigError, match="household run .* --spine tabulation"):
        pipeline.run_release(
            tmp_path / "cef",
            tmp_path / "run",
            ReleaseBudget(persons, households),
            ReleaseOptions(seed=1, spine="optimized"),
        )
    assert not (tmp_path / "run").exists()

"""censusdp's errors survive the pickling a pool or Spark task's error goes through."""

from __future__ import annotations

import pickle

from censusdp.errors import InputError, InternalError


def test_an_internal_error_from_a_task_is_prefixed_once() -> None:
    err = pickle.loads(pickle.dumps(InternalError("OR-Tools returned status 3")))
    assert str(err) == "internal error (this is a bug in censusdp): OR-Tools returned status 3"


def test_an_input_error_from_a_task_keeps_its_problems() -> None:
    sent = InputError("persons.parquet fails its checks", ["row 3: age -1", "row 9: sex 7"])
    err = pickle.loads(pickle.dumps(sent))
    assert str(err) == str(sent) and err.problems == sent.problems
    assert err.details() == "row 3: age -1\nrow 9: sex 7"


def test_the_command_line_prints_a_failed_runs_note_on_its_one_line(
    tmp_path, monkeypatch, capsys
) -> None:
    from censusdp import cli
    from censusdp.release import pipeline

    def failing(*args, **kwargs):
        err = InternalError("OR-Tools returned status 3")
        err.add_note("its finished steps are kept in .run.partial-1; rerun with --resume")
        raise err

    monkeypatch.setattr(pipeline, "run_release", failing)
    (tmp_path / "cef").mkdir()
    code = cli.main(["run", "--input", str(tmp_path / "cef"), "--out", str(tmp_path / "run")])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 1 and last.startswith("censusdp run: internal error")
    assert last.endswith(
        "OR-Tools returned status 3; its finished steps are kept in .run.partial-1; "
        "rerun with --resume"
    )

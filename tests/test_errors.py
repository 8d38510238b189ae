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


def test_a_failed_directory_copy_is_one_line_of_its_first_failure(
    tmp_path, monkeypatch, capsys
) -> None:
    """shutil.Error lists one failure per file (a full disk fails them all): the line
    names the first and counts the rest, instead of printing the whole list."""
    import shutil

    from censusdp import cli
    from censusdp.release import pipeline

    failures = [
        (f"run/nmf/part-{i:05d}.parquet", f"out/nmf/part-{i:05d}.parquet", "[Errno 28] No space")
        for i in range(1200)
    ]

    def failing(*args, **kwargs):
        raise shutil.Error(failures)

    monkeypatch.setattr(pipeline, "run_release", failing)
    (tmp_path / "cef").mkdir()
    code = cli.main(["run", "--input", str(tmp_path / "cef"), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err[-1]) < 200
    assert err[-1] == (
        "censusdp run: error: copying run/nmf/part-00000.parquet to "
        "out/nmf/part-00000.parquet: [Errno 28] No space (and 1,199 more files)"
    )

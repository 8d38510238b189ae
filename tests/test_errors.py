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

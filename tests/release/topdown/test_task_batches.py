"""Small TopDown tasks travel to the executor in batches: order kept, caps respected."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from censusdp.release.topdown import tasks as topdown_tasks
from censusdp.release.topdown.tasks import BATCH_MAX_TASKS, BATCH_VARIABLES, batched, run_tasks


def _task(i: int, k: int, c: int) -> SimpleNamespace:
    return SimpleNamespace(i=i, sub=SimpleNamespace(k=k, c=c))


@given(st.lists(st.tuples(st.integers(1, 300), st.integers(0, 40)), max_size=300))
def test_batches_keep_order_and_caps(shapes):
    tasks = [_task(i, k, c) for i, (k, c) in enumerate(shapes)]
    batches = list(batched(iter(tasks)))
    assert [t.i for b in batches for t in b] == list(range(len(tasks)))  # all, in order
    for b in batches:
        assert 1 <= len(b) <= BATCH_MAX_TASKS
        size = sum(t.sub.k * max(t.sub.c, 1) for t in b)
        assert len(b) == 1 or size <= BATCH_VARIABLES  # a large task goes alone
    # greedy: a batch is closed only when the next task would not fit
    for a, b in zip(batches, batches[1:], strict=False):
        if len(a) < BATCH_MAX_TASKS:
            nxt = b[0].sub.k * max(b[0].sub.c, 1)
            assert sum(t.sub.k * max(t.sub.c, 1) for t in a) + nxt > BATCH_VARIABLES


def test_run_tasks_solves_each_task_in_order(monkeypatch):
    monkeypatch.setattr(topdown_tasks, "run_task", lambda t: t.i * 10)
    assert run_tasks(tuple(_task(i, 1, 1) for i in range(5))) == [0, 10, 20, 30, 40]

"""Trial engine of the Dinur-Nissim laboratory: one trial = one secret, one query stream.

A trial draws a secret bit vector ``d``, streams query rows block by block, adds
experiment noise (one independent stream per noise setting), and accumulates the
Gram matrix ``G = Q'Q`` (float32 products, exact for 0/1 rows up to 2^24 queries, summed
in float64), ``Q'b`` and ``b'b``. At every requested query count it solves the bounded
least-squares problem for all noise settings at once and records the fraction of bits
recovered and the residual norm ``||Q x - b||`` (computed from the Gram matrix).

Random draws are made in fixed chunks so a trial's queries and noise do not depend on
which other query counts were requested: with ``nested=True`` the result at ``m`` is the
same whether ``m`` is computed alone or inside a grid (common random numbers).

Trials run in-process or in a spawn-started process pool whose workers use one BLAS
thread each.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import get_context
from typing import Any

import numpy as np

from censusdp.attacks.dinur_nissim._bounded_ls import (
    BoxLSResult,
    FistaSettings,
    gram_fista,
    lp_solve,
    lsq_linear_solve,
    round_bits,
)
from censusdp.attacks.dinur_nissim._query_families import make_source
from censusdp.errors import CensusDPError
from censusdp.privacy.randomness import experiment_generator
from censusdp.progress import Progress, task

__all__ = ["NoiseDraw", "TrialResult", "TrialTask", "run_tasks", "run_trial"]

_CHUNK = 256
_BLAS_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass(frozen=True)
class NoiseDraw:
    """What a worker needs to draw one noise setting: kind and parameter."""

    kind: str
    variance: float = 0.0
    epsilon: float = 0.0

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """Draw ``size`` experiment-noise values (never release noise)."""
        if self.kind == "none":
            return np.zeros(size)
        if self.kind == "gaussian":
            return rng.normal(0.0, np.sqrt(self.variance), size)
        if self.kind == "laplace":
            return rng.laplace(0.0, 1.0 / self.epsilon, size)
        if self.kind == "geometric":
            # Two-sided geometric P(k) = (1-q)/(1+q) q^|k|, q = exp(-epsilon), as the
            # difference of two i.i.d. geometric variables with success 1 - q.
            p = -np.expm1(-self.epsilon)
            return (rng.geometric(p, size) - rng.geometric(p, size)).astype(np.float64)
        raise CensusDPError(
            f"noise kind must be none, gaussian, laplace or geometric; got {self.kind!r}"
        )


@dataclass(frozen=True)
class TrialTask:
    """One trial's configuration (picklable)."""

    n: int
    query_counts: tuple[int, ...]
    noises: tuple[NoiseDraw, ...]
    family: str
    solver: str
    nested: bool
    tol: float
    seed: np.random.SeedSequence
    matrix: np.ndarray | None = None
    lp_objective: str = "linf"
    block_rows: int = 2048
    warm_start: bool = True


@dataclass(frozen=True)
class TrialResult:
    """Per trial: ``fractions`` and ``residual_norms`` of shape (noises, query_counts)."""

    fractions: np.ndarray
    residual_norms: np.ndarray
    converged: np.ndarray
    iterations: np.ndarray
    gram_seconds: float
    solve_seconds: float


class _Chunked:
    """Serve consecutive row ranges from draws made in fixed chunks of ``_CHUNK`` rows."""

    def __init__(self, noise: NoiseDraw, rng: np.random.Generator) -> None:
        self._noise = noise
        self._rng = rng
        self._buf: np.ndarray | None = None
        self._start = 0

    def take(self, count: int) -> np.ndarray:
        parts = []
        while count > 0:
            if self._buf is None or self._start >= self._buf.shape[0]:
                self._buf = self._noise.sample(self._rng, _CHUNK)
                self._start = 0
            k = min(count, self._buf.shape[0] - self._start)
            parts.append(self._buf[self._start : self._start + k])
            self._start += k
            count -= k
        return np.concatenate(parts) if len(parts) != 1 else parts[0]


def _segments(counts: Sequence[int], block: int) -> Iterator[tuple[int, int, int | None]]:
    """Row ranges ``(start, stop, checkpoint index or None)`` covering 0..max(counts)."""
    start = 0
    for j, stop in enumerate(counts):
        while start < stop:
            end = min(stop, start + block)
            yield start, end, (j if end == stop else None)
            start = end


def _solve(
    task: TrialTask,
    G: np.ndarray,
    qtb: np.ndarray,
    rows: list[np.ndarray],
    answers: list[np.ndarray],
    x0: np.ndarray | None,
) -> BoxLSResult:
    if task.solver == "fista":
        return gram_fista(G, qtb, x0=x0, settings=FistaSettings(tol=task.tol))
    Q = np.concatenate(rows)
    B = np.concatenate(answers)
    if task.solver == "lsq_linear":
        return lsq_linear_solve(Q, B)
    if task.solver == "lp":
        return lp_solve(Q, B, objective=task.lp_objective)  # type: ignore[arg-type]
    raise CensusDPError(f"solver must be fista, lsq_linear or lp; got {task.solver!r}")


def _child(seed: np.random.SeedSequence, *key: int) -> np.random.SeedSequence:
    """A child seed identified by ``key`` (no mutable spawn counter: reruns are identical)."""
    return np.random.SeedSequence(
        seed.entropy, spawn_key=(*seed.spawn_key, *key), pool_size=seed.pool_size
    )


def run_trial(task: TrialTask) -> TrialResult:
    """Run one trial (see the module docstring)."""
    n, k_noise, j_count = task.n, len(task.noises), len(task.query_counts)
    rng_d = experiment_generator(_child(task.seed, 0))
    rng_q = experiment_generator(_child(task.seed, 1))
    secret = rng_d.integers(0, 2, n).astype(np.float64)
    keep_rows = task.solver != "fista"
    fractions = np.zeros((k_noise, j_count))
    residuals = np.zeros((k_noise, j_count))
    converged = np.zeros((k_noise, j_count), dtype=bool)
    iterations = np.zeros(j_count, dtype=np.int64)
    gram_s = solve_s = 0.0

    passes = [tuple(task.query_counts)] if task.nested else [(m,) for m in task.query_counts]
    j_global = 0
    for p, counts in enumerate(passes):
        source = make_source(task.family, n, rng_q, task.matrix)
        streams = [
            _Chunked(nd, experiment_generator(_child(task.seed, 2, p, i)))
            for i, nd in enumerate(task.noises)
        ]
        G = np.zeros((n, n))
        qtb = np.zeros((n, k_noise))
        bb = np.zeros(k_noise)
        rows: list[np.ndarray] = []
        answers: list[np.ndarray] = []
        x_prev: np.ndarray | None = None
        for start, stop, checkpoint in _segments(counts, task.block_rows):
            t0 = time.perf_counter()
            qb = source.rows(start, stop)
            exact = qb.astype(np.float64) @ secret
            z = np.column_stack([s.take(stop - start) for s in streams])
            b = exact[:, None] + z
            G += (qb.T @ qb).astype(np.float64)
            qtb += qb.T.astype(np.float64) @ b
            bb += (b * b).sum(axis=0)
            if keep_rows:
                rows.append(qb)
                answers.append(b)
            gram_s += time.perf_counter() - t0
            if checkpoint is None:
                continue
            t0 = time.perf_counter()
            res = _solve(task, G, qtb, rows, answers, x_prev if task.warm_start else None)
            x_prev = res.x
            solve_s += time.perf_counter() - t0
            X = res.x
            fractions[:, j_global] = (round_bits(X) == secret[:, None]).mean(axis=0)
            sq = (X * (G @ X)).sum(axis=0) - 2.0 * (X * qtb).sum(axis=0) + bb
            residuals[:, j_global] = np.sqrt(np.maximum(sq, 0.0))
            converged[:, j_global] = res.converged
            iterations[j_global] = res.iterations
            j_global += 1
    return TrialResult(fractions, residuals, converged, iterations, gram_s, solve_s)


@contextlib.contextmanager
def _single_blas_thread_env() -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in _BLAS_ENV}
    for k in _BLAS_ENV:
        os.environ[k] = "1"
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_tasks(
    func: Callable[[Any], Any],
    tasks: Sequence[Any],
    workers: int = 1,
    progress: Progress = None,
    label: str = "attack trials",
) -> list[Any]:
    """Run ``func`` on every task, in-process (``workers <= 1``) or in a process pool.

    Results are returned in task order, so they do not depend on ``workers``.
    ``progress`` (``None``: silent) sees tasks done out of the total, with an ETA.
    """
    if workers < 1:
        raise CensusDPError(f"workers must be >= 1; got {workers}")
    total = len(tasks)
    out: list[Any] = [None] * total
    with task(progress, label, total, unit="trials") as bar:
        if workers == 1 or total <= 1:
            for i, item in enumerate(tasks):
                out[i] = func(item)
                bar.advance()
            return out
        with _single_blas_thread_env():
            ctx = get_context("spawn")
            with ProcessPoolExecutor(max_workers=min(workers, total), mp_context=ctx) as pool:
                futures = {pool.submit(func, item): i for i, item in enumerate(tasks)}
                for fut in as_completed(futures):
                    out[futures[fut]] = fut.result()
                    bar.advance()
    return out

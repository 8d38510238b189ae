"""Measurement tasks that write their own part of the noisy measurement file.

A :class:`PartTask` is a :class:`~censusdp.release.measure.MeasureTask` with the path
of the part file it writes (``RUN/noisy_measurements.parquet/part-00012.parquet``, the
task's place in the plan). :func:`run_part_task` measures, writes the part
(:func:`censusdp.io.nmf.write_nmf_part`: atomically, flushed, checksummed) and returns
only its small record, so the driver never receives, holds or writes the noisy values:
whichever executor runs the tasks (in-process, a pool, Spark), the NMF is written in
parallel, and the same seed gives the same bytes in every part (noise is keyed per
geounit, the part boundaries are the plan's family chunks, not the executor's).

The part path must be reachable from where the task runs: any path on one machine;
on a cluster, a file system the driver and executors share (see docs/scaling.md).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

from censusdp.io.nmf import write_nmf_part
from censusdp.release.measure import MeasureTask, run_measure_task

__all__ = ["PartTask", "run_part_task"]


@dataclass(frozen=True, eq=False)
class PartTask:
    """Measure ``task`` and write its answers to the part file ``path`` (absolute)."""

    task: MeasureTask
    path: str


def run_part_task(part: PartTask) -> dict[str, Any]:
    """Run one :class:`PartTask`; return the part's record plus the task's costs.

    The record is :func:`censusdp.io.nmf.write_nmf_part`'s (file, level, unit range,
    rows, SHA-256, write seconds) with ``n_values`` and ``cpu_seconds`` (measuring) and
    ``writer`` (host/PID of the process that wrote it) added: a few hundred bytes,
    whatever the size of the part.
    """
    chunk = run_measure_task(part.task)
    rec = write_nmf_part(chunk, part.path)
    rec["n_values"] = chunk.n_values
    rec["cpu_seconds"] = chunk.cpu_seconds
    rec["writer"] = f"{socket.gethostname()}/{os.getpid()}"
    return rec

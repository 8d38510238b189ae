"""A run's noisy measurements checked as soon as they are written, beside its estimation.

The self-check of a release (:func:`~censusdp.release.validate.run.validate_run`) reads
every NMF part again after the estimation: for a DHC person run of full Vermont 46 GB,
about 4.5 minutes of a 2-core machine. The NMF is final once it is measured, and the
estimation leaves a core idle while a one-task level or a level's longest family runs
(the DHC's County family, its Prim level's largest county). :class:`MeasurementsCheck`
checks the NMF then, as tasks on the run's executor beside the estimation's, in a
thread of the driver. The self-check takes its verdict when the finished release gives
the same proof (:func:`~censusdp.release.validate.run.nmf_proof`: the same SHA-256 of
every NMF file, budget record, measured geounits and shares), and the SHA-256 its tasks
computed of each part instead of reading the part again, as it takes a re-estimate's
source's verdict (docs/file-formats.md). A failed or unfinished check hands over
nothing: the self-check then checks that NMF itself, and a bad NMF fails the release
there, as before.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from censusdp.errors import InternalError
from censusdp.io.atomic import strict_json
from censusdp.io.layout import NMF_FILES
from censusdp.io.parts import indexed_checksums
from censusdp.privacy.budget import Budget
from censusdp.privacy.release_budget import release_privacy
from censusdp.progress import Progress, say
from censusdp.release.manifest import file_checksums
from censusdp.release.validate._entries import Hashed
from censusdp.release.validate._nmf import check_nmf
from censusdp.release.validate.run import nmf_proof

__all__ = ["CHECKED_WHEN_MEASURED", "CheckedMeasurements", "MeasurementsCheck"]

CHECKED_WHEN_MEASURED = (
    "checked as soon as it was measured, beside the estimation (the same SHA-256 of every "
    "file, budget and geounits)"
)
"""How the self-check states a verdict it took from :class:`MeasurementsCheck`."""


@dataclass
class CheckedMeasurements:
    """What a check of a run's NMFs hands to its self-check.

    Attributes:
        proofs: by run (``persons``, ``units``), the proof and verdict detail of each NMF
            that passed (``validate_run``'s ``checked_nmf``).
        digests: the SHA-256 of every NMF part the check's tasks read, by path in the run
            (``validate_run``'s ``part_digests``).
        task_cpu_seconds: the CPU seconds of those tasks.
        seconds: the check's wall time.
    """

    proofs: dict[str, tuple[str, str]] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)
    task_cpu_seconds: float = 0.0
    seconds: float = 0.0


class MeasurementsCheck:
    """The NMF check of each run of ``budgets`` in ``run_dir``, in a thread of its own.

    Args:
        run_dir: the run's (staging) directory, its NMFs written.
        budgets: by run (``persons``, ``units``), the budget its NMF was measured with
            (``None``: no such run).
        geography: the run's :class:`~censusdp.release.spine.ReleaseGeography`.
        executor: where the check's tasks run (the run's: they queue beside the
            estimation's).
        progress: one line when the check starts and one when it ends.
    """

    def __init__(
        self,
        run_dir: Path,
        budgets: Mapping[str, Budget | None],
        geography: Any,
        executor: Any,
        progress: Progress = None,
    ) -> None:
        self.run_dir, self.budgets, self.geography = Path(run_dir), dict(budgets), geography
        self.executor, self.progress = executor, progress
        self._out = CheckedMeasurements()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="censusdp-nmf-check", daemon=True)

    def start(self) -> MeasurementsCheck:
        """Start checking; returns ``self``."""
        say(self.progress, "checking the noisy measurements beside the estimation")
        self._thread.start()
        return self

    def result(self) -> CheckedMeasurements:
        """Wait for the check; what it hands to the self-check.

        Raises:
            InternalError: when the check itself failed (a bug, not a bad NMF: a bad NMF
                is only left out of :attr:`CheckedMeasurements.proofs`).
        """
        self._thread.join()
        if self._error is not None:
            raise InternalError(f"the check of the noisy measurements failed: {self._error}")
        return self._out

    def _run(self) -> None:
        t = time.perf_counter()
        try:
            self._check()
        except BaseException as exc:  # noqa: BLE001 - handed to result(), in the driver
            self._error = exc
            return
        self._out.seconds = time.perf_counter() - t
        say(
            self.progress,
            f"checked the noisy measurements in {self._out.seconds:.1f}s "
            f"({', '.join(sorted(self._out.proofs)) or 'none passed'})",
        )

    def _check(self) -> None:
        known = indexed_checksums(self.run_dir)
        privacy = release_privacy(self.budgets["persons"], self.budgets.get("units"))  # type: ignore[arg-type]
        for run_name, budget in self.budgets.items():
            path = self.run_dir / NMF_FILES[run_name]
            if budget is None or not path.exists():
                continue
            name = NMF_FILES[run_name]
            files = file_checksums(self.run_dir, known, under=name)
            geo = self.geography.for_run(run_name)
            measured, shares = geo.estimation, geo.unit_shares(budget)
            hashed = Hashed()
            # the parts written last first: they are still in the page cache
            ok, detail = check_nmf(
                path, budget, measured, shares, self.executor, hashed, newest_first=True
            )
            self._out.digests.update(hashed)
            self._out.task_cpu_seconds += hashed.task_cpu_seconds
            if ok:
                # the record as the manifest will hold it (strict JSON, read back)
                record = json.loads(json.dumps(strict_json(privacy[run_name]), default=str))
                proof = nmf_proof(files, record, measured, shares)
                self._out.proofs[run_name] = (proof, f"{detail}; {CHECKED_WHEN_MEASURED}")

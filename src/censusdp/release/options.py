"""What a release is made with, beside its input and budget, checked once; and how it runs.

:class:`ReleaseOptions` holds every choice the released files depend on (the seed, the
post-processing, the estimator and its least-squares method, the unit run's
consistency with the persons, the spine, the splitting of wide families); the run's
fingerprint (:func:`censusdp.release.checkpoint.run_fingerprint`, what ``--resume``
compares) derives from it. :class:`Execution` holds what the files do not depend on:
where the tasks run and where progress goes.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any

from censusdp.errors import ConfigError
from censusdp.execution.base import Executor
from censusdp.progress import Progress
from censusdp.release.spine import SPINE_CHOICES
from censusdp.release.topdown.maxent import ESTIMATORS, default_estimator
from censusdp.release.topdown.solvers.chain import METHODS
from censusdp.release.topdown.split import DEFAULT_MAX_CHILDREN

__all__ = [
    "POSTPROCESS_CHOICES",
    "UNIT_CONSISTENCY_CHOICES",
    "Execution",
    "ReleaseOptions",
    "Runtime",
]

POSTPROCESS_CHOICES = ("topdown", "bottomup", "none")
"""``topdown`` (the 2020 system), ``bottomup`` (each block alone), ``none`` (measure only)."""

UNIT_CONSISTENCY_CHOICES = ("consistent", "independent")
"""``consistent``: the unit run is held to the released persons per block
(:mod:`censusdp.release.consistency`); ``independent``: as 2020 production."""


@dataclass(frozen=True)
class ReleaseOptions:
    """Every choice beside the input and the budget that the released files depend on.

    Attributes:
        seed: ``None`` for a release (secure randomness); an integer for a
            reproducible, non-secure run.
        postprocess: one of :data:`POSTPROCESS_CHOICES`.
        unit_consistency: one of :data:`UNIT_CONSISTENCY_CHOICES` (``--units``).
        method: the least-squares method (``auto``, or one backend by name).
        estimator: ``ls``, ``maxent`` or ``auto``; ``None``: the schema's default
            (:func:`~censusdp.release.topdown.maxent.default_estimator`).
        spine: ``optimized``, ``tabulation``, or ``None`` for the budget's choice.
        max_children: families with more children are estimated in chunks
            (:mod:`censusdp.release.topdown.split`); ``None`` never splits.

    Raises:
        ConfigError: on construction, naming the option and the value.
    """

    seed: int | None = None
    postprocess: str = "topdown"
    unit_consistency: str = "consistent"
    method: str = "auto"
    estimator: str | None = None
    spine: str | None = None
    max_children: int | None = DEFAULT_MAX_CHILDREN

    def __post_init__(self) -> None:
        _choose("--postprocess", self.postprocess, POSTPROCESS_CHOICES)
        _choose("--units", self.unit_consistency, UNIT_CONSISTENCY_CHOICES)
        _choose("--method", self.method, METHODS)
        if self.estimator is not None:
            _choose("--estimator", self.estimator, ESTIMATORS)
        if self.spine is not None and self.spine not in SPINE_CHOICES:
            raise ConfigError(f"--spine must be one of {list(SPINE_CHOICES)}, got {self.spine!r}")
        if self.max_children is not None and (
            isinstance(self.max_children, bool)
            or not isinstance(self.max_children, int)
            or self.max_children < 1
        ):
            raise ConfigError(
                f"--max-children must be a positive integer or None, got {self.max_children!r}"
            )
        if self.seed is not None and (
            isinstance(self.seed, bool) or not isinstance(self.seed, numbers.Integral)
        ):
            raise ConfigError(f"--seed must be an integer, got {self.seed!r}")

    @classmethod
    def from_mapping(cls, options: dict[str, Any]) -> ReleaseOptions:
        """Options by name (the Python API's keywords; ``units`` for ``unit_consistency``).

        Raises:
            ConfigError: naming an option that does not exist.
        """
        names = {"units": "unit_consistency"}
        fields = set(cls.__dataclass_fields__)
        given = {names.get(k, k): v for k, v in options.items()}
        unknown = sorted(k for k in given if k not in fields)
        if unknown:
            raise ConfigError(
                f"unknown release option {unknown[0]!r}; the options are "
                f"{sorted(fields - {'unit_consistency'} | {'units'})}"
            )
        return cls(**given)

    def estimator_for(self, schema_name: str) -> str:
        """The estimator of a run of ``schema_name``: the one chosen, else the schema's."""
        return default_estimator(schema_name) if self.estimator is None else self.estimator


@dataclass(frozen=True)
class Execution:
    """How a run's tasks run; a release does not depend on it.

    Attributes:
        executor: ``auto``, ``inprocess``, ``pool`` or ``spark``
            (:func:`censusdp.execution.make_executor`).
        workers: worker processes (``auto`` uses a pool when more than one).
        spark_master: the Spark master URL for ``executor="spark"`` (default ``local[*]``).
        progress: where progress lines go (:mod:`censusdp.progress`; ``None`` is silent).
    """

    executor: str = "auto"
    workers: int = 1
    spark_master: str | None = None
    progress: Progress = None


@dataclass
class Runtime:
    """A running release's live executor, where its progress goes, and its step timings
    (seconds by step, recorded in the manifest)."""

    executor: Executor
    workers: int = 1
    progress: Progress = None
    timings: dict[str, float] = field(default_factory=dict)


def _choose(option: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{option} must be one of {choices}, got {value!r}")

"""What a release is made with, beside its input and budget, checked once; and how it runs.

:class:`ReleaseOptions` holds every choice the released files depend on (the seed, the
post-processing, the estimator and its least-squares method, the unit run's
consistency with the persons, the spine, the splitting of wide families, and the
fidelity: censusdp's improvements on the 2020 production system, or none); the run's
fingerprint (:func:`censusdp.release.checkpoint.run_fingerprint`, what ``--resume``
compares) derives from it. :class:`Execution` holds what the files do not depend on:
where the tasks run and where progress goes.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from os import PathLike
from typing import Any

from censusdp.errors import ConfigError
from censusdp.execution.base import Executor
from censusdp.progress import Progress
from censusdp.release.spine import SPINE_CHOICES
from censusdp.release.topdown.maxent import ESTIMATORS, default_estimator
from censusdp.release.topdown.passes import PASS_MODES
from censusdp.release.topdown.pooling import POOL_VARIANCE_TOLERANCE
from censusdp.release.topdown.solvers.chain import METHODS
from censusdp.release.topdown.split import DEFAULT_MAX_CHILDREN

__all__ = [
    "FIDELITY_CHOICES",
    "POSTPROCESS_CHOICES",
    "UNIT_CONSISTENCY_CHOICES",
    "Execution",
    "ReleaseOptions",
    "Runtime",
    "refuse_with_production",
]

POSTPROCESS_CHOICES = ("topdown", "bottomup", "none")
"""``topdown`` (the 2020 system), ``bottomup`` (each block alone), ``none`` (measure only)."""

UNIT_CONSISTENCY_CHOICES = ("consistent", "independent")
"""``consistent``: the unit run is held to the released persons per block
(:mod:`censusdp.release.consistency`); ``independent``: as 2020 production."""


FIDELITY_CHOICES = ("default", "production")
"""``default``: censusdp's improvements on the 2020 production system, each stated in
the run's output and manifest (:meth:`ReleaseOptions.differences`); ``production``:
every deliberate difference off at once (docs/production-fidelity.md)."""


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
        fidelity: one of :data:`FIDELITY_CHOICES` (``--fidelity``). ``production``
            sets ``estimator="ls"`` (another is refused),
            ``unit_consistency="independent"`` and ``max_children=None`` on
            construction, and turns off root pooling, the failsafe and censusdp's
            rounder (:attr:`production_mode` and the properties below are the one
            place that decides what the fidelity changes).
        passes: one of :data:`~censusdp.release.topdown.passes.PASS_MODES`
            (``--passes``): ``production`` estimates and rounds in production's query
            orderings where the schema has them; ``single`` in one pass everywhere
            (refused with fidelity ``production``).
        h1_from: a censusdp P.L. 94 release of the same input whose H1 (occupied and
            vacant units per block) a DHC household run is held to, as production's
            ``h1`` (``--h1-from``; :mod:`censusdp.release.h1_source`), or ``None``:
            occupied against vacant from the run's own noise.

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
    fidelity: str = "default"
    passes: str = "production"
    h1_from: str | None = None

    def __post_init__(self) -> None:
        _choose("--fidelity", self.fidelity, FIDELITY_CHOICES)
        _choose("--passes", self.passes, PASS_MODES)
        if self.production_mode:
            if self.passes != "production":
                raise ConfigError(
                    f"--passes {self.passes} contradicts --fidelity production "
                    "(production estimates in its query orderings)"
                )
            if self.estimator not in (None, "ls"):
                raise ConfigError(
                    f"--estimator {self.estimator} contradicts --fidelity production "
                    "(production estimates by least squares)"
                )
            object.__setattr__(self, "estimator", "ls")
            object.__setattr__(self, "unit_consistency", "independent")
            object.__setattr__(self, "max_children", None)
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
        if self.h1_from is not None:
            if not isinstance(self.h1_from, str | PathLike) or not str(self.h1_from).strip():
                raise ConfigError(f"--h1-from must be a release directory, got {self.h1_from!r}")
            object.__setattr__(self, "h1_from", str(self.h1_from))
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
        if given.get("fidelity") == "production":
            refuse_with_production(
                units=given.get("unit_consistency"), max_children=given.get("max_children")
            )
        return cls(**given)

    # -- what the fidelity decides (the one place; docs/production-fidelity.md) ----------

    @property
    def production_mode(self) -> bool:
        """Whether every deliberate difference from the 2020 production system is off."""
        return self.fidelity == "production"

    @property
    def pool_root(self) -> bool:
        """Estimate the root from every level's measurements (off: the root's own, as
        production; :func:`censusdp.release.topdown.pooling.pooled_root`)."""
        return not self.production_mode

    @property
    def failsafe(self) -> bool:
        """Relax an infeasible subproblem's least binding constraints (off: raise, as
        production 2020, which had no failsafe)."""
        return not self.production_mode

    @property
    def rounder(self) -> str:
        """``censusdp`` (a cell-wise cost in the ``detailed`` pass, fractional cells in
        the box, an unbounded fallback) or ``production`` (production's multipass
        rounder exactly: :func:`censusdp.release.topdown.multipass.round_in_passes`)."""
        return "production" if self.production_mode else "censusdp"

    @property
    def nmf_structural_zeros(self) -> bool:
        """Whether the NMF measures the structural-zero rows of a query (production
        measures ``detailed`` over all 2,016 ``pl94`` cells, censusdp the 1,890 live
        ones: a structural zero's noisy answer says nothing about the data)."""
        return self.production_mode

    def differences(self) -> dict[str, str]:
        """Each deliberate difference from production and what this release does (the
        manifest's ``fidelity.differences``; the run's summary states them)."""
        prod = self.production_mode
        return {
            "estimator": "ls (production)" if prod else self.estimator or "the schema's",
            "passes": "production's query orderings (production)"
            if self.passes == "production"
            else "one pass: every query at once, then one rounding",
            "root_pooling": "off (production)"
            if prod
            else "on: the root from every level that moves its variance by more than "
            f"{POOL_VARIANCE_TOLERANCE:.1%}",
            "units": "independent of persons (production)"
            if self.unit_consistency == "independent"
            else "consistent: occupied units held to household persons",
            "failsafe": "none: an infeasible subproblem raises (production)"
            if prod
            else "relaxes group and total bounds, never the parent or an invariant",
            "rounder": "production's multipass rounder"
            if prod
            else "censusdp's: cell-wise cost in the detailed pass, fallback outside the box",
            "family_splitting": "never (production)"
            if self.max_children is None
            else f"families of more than {self.max_children} children in chunks",
            "nmf_structural_zeros": "measured (production)"
            if self.nmf_structural_zeros
            else "not measured (no information)",
        }

    def fidelity_record(self) -> dict[str, Any]:
        """The manifest's ``fidelity`` entry: the mode and :meth:`differences`."""
        return {"mode": self.fidelity, "differences": self.differences()}

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
    """A running release's live executor, where its progress goes, its step timings
    (seconds by step, recorded in the manifest), and the NMF parts it wrote.

    ``written``: per run (``persons``, ``units``), each NMF part this release's own
    measurement tasks wrote in this process's run, by path, with the SHA-256 the task
    recorded; held in memory only, never read back from a file. Estimation reads those
    parts' values without checking their layout once their bytes are proven to be that
    SHA-256's (:class:`censusdp.io.nmf_read.NMFReader`); a re-estimate, and the parts
    of an interrupted run that a resumed one reuses, are not in it and are checked."""

    executor: Executor
    workers: int = 1
    progress: Progress = None
    timings: dict[str, float] = field(default_factory=dict)
    written: dict[str, dict[str, str]] = field(default_factory=dict)


def refuse_with_production(*, units: str | None, max_children: int | None) -> None:
    """Refuse explicit choices that fidelity ``production`` overrides (``--units
    consistent``, ``--max-children N``), naming the option.

    Raises:
        ConfigError: for the first such choice.
    """
    if units not in (None, "independent"):
        raise ConfigError(
            f"--units {units} contradicts --fidelity production (production estimates "
            "housing units independently of persons)"
        )
    if max_children is not None:
        raise ConfigError(
            f"--max-children {max_children} contradicts --fidelity production (production "
            "solves every family whole)"
        )


def _choose(option: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{option} must be one of {choices}, got {value!r}")

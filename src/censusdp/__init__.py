"""censusdp: an open Disclosure Avoidance System for hierarchical census count data.

The package layout follows the pipeline (see ``docs/ARCHITECTURE.md``): ``data``
describes records, geography and queries, ``privacy`` owns budgets, accounting,
mechanisms and randomness, ``release`` measures once and estimates a consistent release
(``release.topdown``), ``io`` reads and writes the files of the contract, and
``evaluate``, ``attacks``, ``risk``, ``infer``, ``design`` and ``tradeoff`` judge a
release. The names exported here are the Python API (:mod:`censusdp.api`): the same
verbs as the ``censusdp`` command.
"""

from __future__ import annotations

from typing import Any

from censusdp.version import __version__

__all__ = [
    "Evaluation",
    "Release",
    "__version__",
    "evaluate_release",
    "generate_state",
    "infer_margins",
    "infer_release",
    "load_budget",
    "posterior",
    "reconstruct",
    "reestimate",
    "reidentify",
    "run_release",
    "assess_risk",
    "make_signing_key",
    "sign_release",
    "validate",
    "verify_release",
]


def __getattr__(name: str) -> Any:
    # The API loads the library on first use, so ``import censusdp`` (and the CLI's
    # start) stays light.
    if name in __all__:
        from censusdp import api

        return getattr(api, name)
    raise AttributeError(f"module 'censusdp' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)

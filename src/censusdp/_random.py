"""All randomness in censusdp comes from this module.

Experiments and synthetic data use :func:`experiment_generator`, a seeded NumPy
generator. Privacy-relevant noise uses :class:`RandomSource` (see its docstring):
a cryptographically secure stream in release runs, a seeded one only on request.
"""

from __future__ import annotations

import numpy as np

__all__ = ["experiment_generator"]


def experiment_generator(seed: int | np.random.SeedSequence | None) -> np.random.Generator:
    """A NumPy generator for experiments and synthetic data (never for release noise).

    Args:
        seed: an integer seed, a ``SeedSequence`` (for spawning independent trial
            streams), or ``None`` for fresh OS entropy.
    """
    if isinstance(seed, np.random.SeedSequence):
        return np.random.Generator(np.random.PCG64(seed))
    return np.random.default_rng(seed)

"""censusdp: an open Disclosure Avoidance System for hierarchical census count data.

The package layout follows the pipeline (see ``docs/ARCHITECTURE.md``):
``schema`` and ``geography`` describe the data, ``io`` reads and validates it,
``mechanisms`` and ``accounting`` add exact noise and track its privacy cost,
``measure`` produces the noisy measurements, ``topdown`` estimates a consistent
release from them, and ``evaluate``, ``attacks`` and ``risk`` judge a release.
"""

from censusdp.version import __version__

__all__ = ["__version__"]

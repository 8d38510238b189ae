"""All randomness in censusdp comes from this module.

Experiments and synthetic data use :func:`experiment_generator`, a seeded NumPy
generator. Privacy-relevant noise uses :class:`RandomSource` only: a
cryptographically secure stream in release runs, a seeded one only on request, and
the run manifest records which (:meth:`RandomSource.describe`).

Construction of :class:`RandomSource`
-------------------------------------

A stream is the AES-256 keystream in counter mode (AES-256-CTR encrypting zero
bytes, initial counter block 0) under a 256-bit *stream key*; :meth:`uint64` reads
the next ``8 n`` bytes of that keystream as little-endian 64-bit words.

* ``RandomSource.secure()`` draws the master key from ``os.urandom(32)`` (the OS
  CSPRNG). Nothing about it is written anywhere; a secure run cannot be replayed.
* ``RandomSource.seeded(seed)`` derives the master key as
  ``SHA-256(b"censusdp/seeded/v1\\0" + decimal(seed))``. The stream is still a
  CSPRNG output, but anyone who knows the seed can reproduce it: seeded sources are
  for tests and reproducible experiments, never for a release.
* ``source.child(*key)`` derives the child stream key as
  ``HMAC-SHA256(parent_key, b"censusdp/child/v1" + encode(key))`` where ``encode``
  writes each component with a type tag and a length prefix (so ``("ab", "c")`` and
  ``("a", "bc")`` differ). HMAC-SHA256 is a PRF, so children of a secret key are
  independent pseudorandom keys, and children of a seeded key are reproducible.
  The TopDown engine keys noise by ``child(geolevel, geocode, query)``, so the noise
  of a measurement does not depend on execution order, process or machine.

Why AES-256-CTR: it is a standard, analysed PRF-based stream (NIST SP 800-38A;
a CTR keystream is indistinguishable from uniform if AES is a PRP), it runs at GB/s
with AES-NI (about 3 GB/s on the project's machine through ``cryptography``), and
its output is defined bit-for-bit, so a seeded run gives identical noise on every
platform, in every process and on Spark. NumPy's bit generators (PCG64, Philox)
are fast but not cryptographically secure, and Python's ``secrets`` is secure but
not seedable and about 100x slower for bulk words.

A ``RandomSource`` pickles as (mode, seed, key, child path, stream position), so a
process pool or a Spark executor continues exactly the same stream. The pickle of a
secure source contains its secret key: send it to workers, never store it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from censusdp.errors import ConfigError

__all__ = ["RandomSource", "experiment_generator"]

_SEED_DOMAIN = b"censusdp/seeded/v1\x00"
_CHILD_DOMAIN = b"censusdp/child/v1"
_BLOCK = 16  # AES block size in bytes
_MAX_SEED_BITS = 4096


def experiment_generator(seed: int | np.random.SeedSequence | None) -> np.random.Generator:
    """A NumPy generator for experiments and synthetic data (never for release noise).

    Args:
        seed: an integer seed, a ``SeedSequence`` (for spawning independent trial
            streams), or ``None`` for fresh OS entropy.
    """
    if isinstance(seed, np.random.SeedSequence):
        return np.random.Generator(np.random.PCG64(seed))
    return np.random.default_rng(seed)


def _encode_key(key: tuple[str | int, ...]) -> bytes:
    """Unambiguous byte encoding of a child key path (type tag, length, bytes)."""
    parts = [len(key).to_bytes(8, "big")]
    for component in key:
        kind = type(component)
        if kind is str:
            raw = component.encode("utf-8")  # type: ignore[union-attr]
            parts.append(b"s" + len(raw).to_bytes(8, "big") + raw)
        elif kind is int or (kind is not bool and isinstance(component, (int, np.integer))):
            raw = str(int(component)).encode("ascii")
            parts.append(b"i" + len(raw).to_bytes(8, "big") + raw)
        elif isinstance(component, str):
            raw = str(component).encode("utf-8")
            parts.append(b"s" + len(raw).to_bytes(8, "big") + raw)
        else:
            raise ConfigError(
                f"RandomSource.child key components must be str or int, got "
                f"{type(component).__name__} {component!r}"
            )
    return b"".join(parts)


class RandomSource:
    """A cryptographically secure, optionally seeded, splittable stream of random words.

    Use :meth:`secure` for releases and :meth:`seeded` for tests and reproducible
    experiments; do not call the constructor directly. See the module docstring for
    the construction and the argument that it is a CSPRNG in both modes.

    Attributes:
        mode: ``"secure"`` or ``"seeded"``.
        seed: the integer seed, or ``None`` in secure mode.
        path: the child key path from the master stream (``()`` for the master).
    """

    __slots__ = ("_cipher", "_key", "_position", "mode", "path", "seed")

    def __init__(
        self, *, mode: str, seed: int | None, key: bytes, path: tuple[str | int, ...] = ()
    ) -> None:
        if mode not in ("secure", "seeded"):
            raise ConfigError(f"RandomSource mode must be 'secure' or 'seeded', got {mode!r}")
        if len(key) != 32:
            raise ConfigError(f"RandomSource key must be 32 bytes, got {len(key)}")
        self.mode = mode
        self.seed = seed
        self.path = tuple(path)
        self._key = bytes(key)
        self._position = 0  # bytes of keystream consumed
        self._cipher: Any = None

    # -- construction ------------------------------------------------------------------

    @classmethod
    def secure(cls) -> RandomSource:
        """A stream keyed by 32 bytes from ``os.urandom`` (for releases)."""
        return cls(mode="secure", seed=None, key=os.urandom(32))

    @classmethod
    def seeded(cls, seed: int) -> RandomSource:
        """A reproducible stream keyed by ``SHA-256(domain || decimal(seed))``.

        Args:
            seed: any integer (negative allowed), at most 4096 bits.

        Raises:
            ConfigError: if ``seed`` is not an integer.
        """
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise ConfigError(f"seed must be an integer, got {type(seed).__name__} {seed!r}")
        seed = int(seed)
        if seed.bit_length() > _MAX_SEED_BITS:
            raise ConfigError(f"seed must have at most {_MAX_SEED_BITS} bits, got {seed}")
        key = hashlib.sha256(_SEED_DOMAIN + str(seed).encode("ascii")).digest()
        return cls(mode="seeded", seed=seed, key=key)

    def child(self, *key: str | int) -> RandomSource:
        """An independent stream derived from this stream's key and ``key``.

        The derivation is ``HMAC-SHA256(this key, domain || encode(key))``; it does not
        depend on how much of this stream has been read, so ``child`` is a pure
        function of (master key, full key path).

        Args:
            *key: one or more str/int components, e.g. ``("County", "50001", "total")``.
        """
        if not key:
            raise ConfigError("RandomSource.child needs at least one key component")
        derived = hmac.digest(self._key, _CHILD_DOMAIN + _encode_key(key), "sha256")
        child = RandomSource.__new__(RandomSource)
        child.mode = self.mode
        child.seed = self.seed
        child.path = self.path + key
        child._key = derived
        child._position = 0
        child._cipher = None
        return child

    # -- output ------------------------------------------------------------------------

    def _encryptor(self) -> Any:
        if self._cipher is None:
            block, skip = divmod(self._position, _BLOCK)
            nonce = block.to_bytes(_BLOCK, "big")
            self._cipher = Cipher(algorithms.AES(self._key), modes.CTR(nonce)).encryptor()
            if skip:
                self._cipher.update(bytes(skip))
        return self._cipher

    def random_bytes(self, n: int) -> bytes:
        """The next ``n`` bytes of the keystream."""
        if n < 0:
            raise ConfigError(f"number of bytes must be >= 0, got {n}")
        if n == 0:
            return b""
        out = self._encryptor().update(bytes(n))
        self._position += n
        return out

    def uint64(self, n: int) -> np.ndarray:
        """The next ``n`` uniform 64-bit words (little-endian from the keystream).

        Args:
            n: number of words, ``n >= 0``.

        Returns:
            A writable ``uint64`` array of length ``n``.
        """
        n = int(n)
        if n < 0:
            raise ConfigError(f"number of words must be >= 0, got {n}")
        if n == 0:
            return np.zeros(0, dtype=np.uint64)
        if n <= 8192:  # small requests: less overhead than update_into
            raw = self._encryptor().update(bytes(8 * n))
            self._position += 8 * n
            return np.frombuffer(raw, dtype="<u8").astype(np.uint64)
        zeros = np.zeros(8 * n, dtype=np.uint8)
        buf = bytearray(8 * n + _BLOCK - 1)
        written = self._encryptor().update_into(zeros, buf)
        if written != 8 * n:  # pragma: no cover - CTR is a stream mode
            raise RuntimeError("AES-CTR returned a short keystream")
        self._position += 8 * n
        return np.frombuffer(buf, dtype="<u8", count=n).astype(np.uint64, copy=False)

    def uniform(self, n: int) -> np.ndarray:
        """``n`` floats uniform on the grid ``{k / 2**53}`` in ``[0, 1)`` (experiments only)."""
        return (self.uint64(n) >> np.uint64(11)).astype(np.float64) * (2.0**-53)

    def integers(self, n: int, bound: int) -> np.ndarray:
        """``n`` integers exactly uniform on ``0 .. bound-1`` (rejection sampling).

        Args:
            n: number of integers.
            bound: exclusive upper bound, ``1 <= bound <= 2**63``.
        """
        if not 1 <= bound <= 2**63:
            raise ConfigError(f"bound must be in 1..2**63, got {bound}")
        bits = max(1, (bound - 1).bit_length())
        shift = np.uint64(64 - bits)
        out = np.empty(n, dtype=np.int64)
        filled = 0
        while filled < n:
            need = n - filled
            draw = self.uint64(need + need // 2 + 8) >> shift
            draw = draw[draw < np.uint64(bound)][:need]
            out[filled : filled + draw.size] = draw.astype(np.int64)
            filled += draw.size
        return out

    # -- bookkeeping -------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """What a run manifest records: mode, seed (``None`` when secure) and generator."""
        return {
            "mode": self.mode,
            "seed": self.seed,
            "generator": "AES-256-CTR keystream; child keys by HMAC-SHA256",
        }

    def __getstate__(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "seed": self.seed,
            "key": self._key,
            "path": self.path,
            "position": self._position,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.mode = state["mode"]
        self.seed = state["seed"]
        self.path = tuple(state["path"])
        self._key = state["key"]
        self._position = int(state["position"])
        self._cipher = None

    def __repr__(self) -> str:
        seed = "" if self.seed is None else f", seed={self.seed}"
        path = f", path={self.path!r}" if self.path else ""
        return f"RandomSource(mode={self.mode!r}{seed}{path})"

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
* ``source.unit_streams(*key, codes=codes)`` gives many geounits a stream each at
  once (the measurements of a level: ``key = (geolevel, query)``, ``codes`` the units'
  geocodes), without a key or a cipher per unit. A code ``g`` is cut into a prefix
  ``p`` and its longest suffix ``d`` of at most 28 ASCII digits (``g = p + d``, ``l``
  the length of ``d``); the *window key* is
  ``K = HMAC-SHA256(parent_key, b"censusdp/units/v1" + encode(key + (p, l)))``, and the
  unit's stream is ``AES-256_K(B_0) || AES-256_K(B_1) || ...`` with the 128-bit block
  ``B_j = hi || lo || j``: ``hi`` and ``lo`` the first and last 14 digits of ``d``
  left-padded with zeros to 28 (each a 48-bit big-endian integer) and ``j`` the block's
  number (32-bit big-endian, so a window holds ``2**33`` words). Words are read from
  the stream as from a CTR keystream (little-endian 64-bit, two per block).

  Why it is sound. ``(p, l, d)`` determines ``g`` and back, so distinct units of one
  ``key`` either have different window keys or the same key and different
  ``(hi, lo)``: no two units, and no two positions of one unit, share an AES input
  under one key. Window keys are HMAC-SHA256 (a PRF) outputs of distinct messages
  (their domain string differs from that of ``child`` keys, so they never coincide
  with one), so they are independent pseudorandom keys; under one such key AES-256 evaluated on
  distinct inputs is a pseudorandom permutation, which an adversary making ``q``
  queries cannot tell from a random function with advantage above ``q**2 / 2**129``
  (the PRP/PRF switching lemma; the same argument that makes a CTR keystream of ``q``
  blocks pseudorandom, here with the counter blocks of many units under one key).
  A California block level draws about ``2**30`` blocks under one window key,
  advantage below ``2**-68``. Each unit's words therefore look independent and uniform,
  exactly as the per-unit CTR streams of ``child`` do, and a unit's window is a pure
  function of (master key, key, its own code): it does not depend on which other
  units are in the call, their order, the process or the machine. This is "AES as a
  PRF on a structured counter" (counter mode with the nonce in the block), with one
  HMAC and one AES key schedule per (geolevel, query, code prefix) instead of one per
  unit; :class:`UnitStreams` evaluates the windows of many units in one AES-ECB call
  (ECB here is only the batch interface to the block function), and a long window of
  one unit as the AES-CTR keystream whose initial counter block is ``hi || lo || j``
  (CTR encrypts exactly the blocks ``B_j, B_(j+1), ...``: ``j`` is the block's last 32
  bits and never passes ``2**32 - 1`` in a window, so the counter never carries into
  ``lo``). Both give the same words; CTR builds no input blocks in memory.
* The TopDown engine keys noise per (geolevel, query, geounit) through
  ``unit_streams``, so the noise of a measurement does not depend on execution order,
  chunking, process or machine. (Before version ``units/v1`` of this construction the
  engine used ``child(geolevel, query, geocode)`` per unit: the same guarantees, several
  times the CPU (benchmarks/bench_measure.py); seeded noise changed with the switch.)

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
from collections.abc import Iterator
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from censusdp.errors import ConfigError

__all__ = ["GENERATOR", "RandomSource", "UnitStreams", "experiment_generator"]

_SEED_DOMAIN = b"censusdp/seeded/v1\x00"
_CHILD_DOMAIN = b"censusdp/child/v1"
_BLOCK = 16  # AES block size in bytes
_MAX_SEED_BITS = 4096
_UNITS_DOMAIN = b"censusdp/units/v1"
_SUFFIX_DIGITS = 28  # digits of a unit code carried in its AES blocks (2 x 14)
_HALF_DIGITS = 14
_WINDOW_BLOCKS = 1 << 32  # blocks in one unit's window (32-bit block numbers)
_POW10 = 10 ** np.arange(_HALF_DIGITS - 1, -1, -1, dtype=np.int64)

GENERATOR = (
    "AES-256-CTR keystream; child keys by HMAC-SHA256; per-geounit measurement "
    "streams units/v1 (AES-256 on (code digits, block) windows under HMAC-SHA256 "
    "keys per geolevel, query and code prefix)"
)
"""What manifests record as the generator (and what a resumed run must match)."""


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

    def unit_streams(self, *key: str | int, codes: Any) -> UnitStreams:
        """One stream per geounit of ``codes`` under ``key`` (see the module docstring).

        The stream of ``codes[u]`` depends only on this source's key, ``key`` and that
        code: not on the other codes, their order or how many there are.

        Args:
            *key: one or more str/int components, e.g. ``("Block", "detailed")``.
            codes: the units' codes (geocodes; a sequence or array of str).
        """
        if not key:
            raise ConfigError("RandomSource.unit_streams needs at least one key component")
        _encode_key(key)  # checks the components' types
        return UnitStreams(self._key, key, codes)

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
        buf = np.empty(8 * n + _BLOCK, dtype=np.uint8)  # update_into wants slack
        written = self._encryptor().update_into(_zero_bytes(8 * n), buf)
        if written != 8 * n:  # pragma: no cover - CTR is a stream mode
            raise RuntimeError("AES-CTR returned a short keystream")
        self._position += 8 * n
        return buf[: 8 * n].view("<u8")

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
            "generator": GENERATOR,
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


def _split_code(code: str) -> tuple[str, int, int, int]:
    """``(prefix, digits, hi, lo)`` of one code: its longest ASCII-digit suffix of at
    most 28 characters, as two 14-digit halves (left-padded with zeros)."""
    n = 0
    while n < min(len(code), _SUFFIX_DIGITS) and "0" <= code[len(code) - 1 - n] <= "9":
        n += 1
    suffix = code[len(code) - n :].rjust(_SUFFIX_DIGITS, "0")
    return code[: len(code) - n], n, int(suffix[:_HALF_DIGITS]), int(suffix[_HALF_DIGITS:])


def _parse_codes(codes: Any) -> tuple[list[tuple[str, int]], np.ndarray, np.ndarray]:
    """The window groups ``(prefix, digits)``, each code's group and its 12 id bytes.

    Codes of one length made of ASCII digits only (every geocode and spine code) are
    parsed as arrays; anything else code by code (:func:`_split_code`), with the same
    result for the same code.
    """
    arr = np.asarray(codes)
    if arr.ndim != 1:
        arr = arr.reshape(-1)
    if arr.dtype.kind != "U":
        if arr.size and not all(isinstance(c, str) for c in arr.tolist()):
            bad = next(c for c in arr.tolist() if not isinstance(c, str))
            raise ConfigError(f"unit codes must be strings, got {type(bad).__name__} {bad!r}")
        arr = arr.astype(str) if arr.size else np.zeros(0, dtype="U1")
    n = arr.size
    width = arr.dtype.itemsize // 4
    ids = np.zeros((n, 16), dtype=np.uint8)
    if n and width:
        points = np.ascontiguousarray(arr).view(np.uint32).reshape(n, width)
        if ((points >= 48) & (points <= 57)).all():  # one length, digits only
            digits = min(width, _SUFFIX_DIGITS)
            if width > digits:
                prefixes, group = np.unique(arr.astype(f"U{width - digits}"), return_inverse=True)
                groups = [(str(p), digits) for p in prefixes]
            else:
                group = np.zeros(n, dtype=np.intp)
                groups = [("", digits)]
            full = np.zeros((n, _SUFFIX_DIGITS), dtype=np.int64)
            full[:, _SUFFIX_DIGITS - digits :] = points[:, width - digits :] - 48
            _put_halves(ids, full[:, :_HALF_DIGITS] @ _POW10, full[:, _HALF_DIGITS:] @ _POW10)
            return groups, np.asarray(group, dtype=np.intp).reshape(n), ids
    parsed = [_split_code(str(c)) for c in arr.tolist()]
    index: dict[tuple[str, int], int] = {}
    group = np.array([index.setdefault((p, d), len(index)) for p, d, _, _ in parsed], dtype=np.intp)
    hi = np.array([h for _, _, h, _ in parsed], dtype=np.int64)
    lo = np.array([low for _, _, _, low in parsed], dtype=np.int64)
    _put_halves(ids, hi, lo)
    return list(index), group, ids


def _put_halves(ids: np.ndarray, hi: np.ndarray, lo: np.ndarray) -> None:
    """Bytes 0-5 and 6-11 of each block: ``hi`` and ``lo`` as 48-bit big-endian."""
    n = ids.shape[0]
    ids[:, 0:6] = hi.astype(">u8").view(np.uint8).reshape(n, 8)[:, 2:]
    ids[:, 6:12] = lo.astype(">u8").view(np.uint8).reshape(n, 8)[:, 2:]


class UnitStreams:
    """The streams of many geounits under one key (:meth:`RandomSource.unit_streams`).

    Unit ``u``'s stream is addressable: :meth:`words` returns any window of it, for
    many units at once, by one AES-ECB call per window key, and :meth:`pieces` a long
    window of one unit piece by piece, from one AES-CTR keystream (the module docstring
    has the construction and why it is sound). Nothing is drawn ahead: reading words
    ``a..b`` of a unit never changes words ``c..d``.
    """

    __slots__ = ("_ciphers", "_group", "_groups", "_ids", "_key", "_keys", "_parent", "n_units")

    def __init__(self, parent_key: bytes, key: tuple[str | int, ...], codes: Any) -> None:
        self._parent = parent_key
        self._key = tuple(key)
        self._groups, self._group, ids = _parse_codes(codes)
        self._ids = ids.view("<u8")  # (units, 2): the blocks with block number 0
        self.n_units = int(self._group.size)
        self._keys: dict[int, Any] = {}
        self._ciphers: dict[int, Any] = {}

    def _window_key(self, group: int) -> Any:
        """The AES-256 key of window group ``group`` (HMAC-SHA256, made once)."""
        aes = self._keys.get(group)
        if aes is None:
            message = _UNITS_DOMAIN + _encode_key(self._key + self._groups[group])
            aes = algorithms.AES(hmac.digest(self._parent, message, "sha256"))
            self._keys[group] = aes
        return aes

    def _cipher(self, group: int) -> Any:
        enc = self._ciphers.get(group)
        if enc is None:
            # ECB is the batch interface to the block function: every input block is
            # distinct (unit digits, block number), see the module docstring
            enc = Cipher(self._window_key(group), modes.ECB()).encryptor()
            self._ciphers[group] = enc
        return enc

    def words(self, rows: Any, start: int, count: int) -> np.ndarray:
        """Words ``start .. start + count - 1`` of the streams of units ``rows``.

        Args:
            rows: indices into the codes the streams were made for.
            start: first word (``>= 0``).
            count: how many words per unit (``>= 0``).

        Returns:
            A ``(len(rows), count)`` ``uint64`` array.
        """
        rows = np.asarray(rows, dtype=np.intp).reshape(-1)
        start, count = int(start), int(count)
        _check_window(start, count)
        if not rows.size or not count:
            return np.empty((rows.size, count), dtype=np.uint64)
        first, stop = start // 2, (start + count + 1) // 2
        n_blocks = stop - first
        # the second word of block j (little-endian): bytes 8-11 of the code's digits,
        # then j's 4 big-endian bytes, which read little-endian are j byte-swapped
        tail = np.arange(first, stop, dtype=np.uint32).byteswap().astype(np.uint64)
        tail <<= np.uint64(32)
        skip = start - 2 * first
        groups = self._group[rows]
        lone = groups[0] if (groups == groups[0]).all() else None
        out = np.empty((rows.size, count), dtype=np.uint64) if lone is None else None
        for g in [int(lone)] if lone is not None else np.unique(groups).tolist():
            sel = slice(None) if lone is not None else np.flatnonzero(groups == g)
            ids = self._ids[rows[sel]]
            blocks = np.empty((ids.shape[0], n_blocks, 2), dtype="<u8")
            blocks[:, :, 0] = ids[:, 0:1]
            np.bitwise_or(ids[:, 1:2], tail[None, :], out=blocks[:, :, 1])
            data = blocks.reshape(-1).view(np.uint8)
            raw = np.empty(data.size + _BLOCK, dtype=np.uint8)  # update_into wants slack
            if self._cipher(g).update_into(data, raw) != data.size:  # pragma: no cover
                raise RuntimeError("AES-ECB returned a short output")
            words = raw[: data.size].view("<u8").reshape(ids.shape[0], 2 * n_blocks)
            if out is None:  # one window key: the words as decrypted, without a copy
                return words[:, skip : skip + count]
            out[sel] = words[:, skip : skip + count]
        return out

    def pieces(self, row: int, start: int, count: int, step: int) -> Iterator[np.ndarray]:
        """Words ``start .. start + count - 1`` of unit ``row``'s stream, ``step`` at a time.

        The same words as :meth:`words` (``words([row], start, count)[0]``, cut into
        pieces of ``step`` words, the last one shorter), from one AES-CTR keystream: the
        window's blocks ``B_j`` are ``hi || lo || j`` with ``j`` in the last 32 bits, and
        CTR mode encrypts exactly the counter blocks ``B_first, B_first + 1, ...``; the
        counter never carries out of ``j``, whose last block is ``2**32 - 1`` at most.
        No block is built in memory, so a long window costs the cipher alone.

        Each piece is a view of one buffer that the next piece overwrites: use it
        before asking for the next.

        Args:
            row: an index into the codes the streams were made for.
            start: first word (``>= 0``).
            count: how many words (``>= 0``).
            step: words per piece (``>= 1``).
        """
        row, start, count, step = int(row), int(start), int(count), int(step)
        _check_window(start, count)
        if step < 1:
            raise ConfigError(f"unit stream pieces need step >= 1, got {step}")
        if not count:
            return
        first = start // 2
        counter = self._ids[row].tobytes()[:12] + first.to_bytes(4, "big")
        aes = Cipher(self._window_key(int(self._group[row])), modes.CTR(counter)).encryptor()
        if start - 2 * first:  # the window begins with a block's second word
            aes.update(bytes(8))
        size = 8 * min(step, count)
        zeros = _zero_bytes(size)
        raw = np.empty(size + _BLOCK, dtype=np.uint8)  # update_into wants slack
        words = raw[:size].view("<u8")
        for at in range(0, count, step):
            k = min(step, count - at)
            if aes.update_into(zeros[: 8 * k], raw) != 8 * k:  # pragma: no cover
                raise RuntimeError("AES-CTR returned a short keystream")
            yield words[:k]


_ZEROS = np.zeros(0, dtype=np.uint8)


def _zero_bytes(size: int) -> np.ndarray:
    """``size`` zero bytes, the plaintext of a keystream: one read-only array shared by
    every call (grown when a longer one is asked for), so that no call zeroes its own."""
    global _ZEROS
    if _ZEROS.size < size:
        zeros = np.zeros(size, dtype=np.uint8)
        zeros.flags.writeable = False
        _ZEROS = zeros
    return _ZEROS[:size]


def _check_window(start: int, count: int) -> None:
    """Refuse a window of a unit stream outside its ``2**33`` words."""
    if start < 0 or count < 0 or start + count > 2 * _WINDOW_BLOCKS:
        raise ConfigError(
            f"unit stream words {start}..{start + count} are outside 0..{2 * _WINDOW_BLOCKS}"
        )

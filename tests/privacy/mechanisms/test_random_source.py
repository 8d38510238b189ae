"""RandomSource: the AES-256-CTR construction, determinism, children, pickling."""

from __future__ import annotations

import hashlib
import hmac
import pickle

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from censusdp.errors import ConfigError
from censusdp.privacy.randomness import GENERATOR, RandomSource, experiment_generator
from profiles import examples


def _reference_words(key: bytes, n: int, start_block: int = 0) -> np.ndarray:
    """Independent AES-CTR: encrypt big-endian counter blocks with AES-ECB."""
    ecb = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    blocks = b"".join((start_block + i).to_bytes(16, "big") for i in range((8 * n + 15) // 16))
    stream = ecb.update(blocks)
    return np.frombuffer(stream[: 8 * n], dtype="<u8").astype(np.uint64)


def test_seeded_stream_is_aes256_ctr_of_sha256_key() -> None:
    key = hashlib.sha256(b"censusdp/seeded/v1\x00" + b"42").digest()
    got = RandomSource.seeded(42).uint64(9)
    np.testing.assert_array_equal(got, _reference_words(key, 9))


def test_child_key_is_hmac_of_encoded_path() -> None:
    parent = hashlib.sha256(b"censusdp/seeded/v1\x00" + b"7").digest()
    enc = (2).to_bytes(8, "big")
    enc += b"s" + (6).to_bytes(8, "big") + b"County"
    enc += b"i" + (3).to_bytes(8, "big") + b"-12"
    key = hmac.new(parent, b"censusdp/child/v1" + enc, hashlib.sha256).digest()
    got = RandomSource.seeded(7).child("County", -12).uint64(5)
    np.testing.assert_array_equal(got, _reference_words(key, 5))


def test_known_answer_vectors() -> None:
    # Frozen outputs: a change here changes every seeded release (stream format v1).
    assert [int(x) for x in RandomSource.seeded(0).uint64(2)] == [
        0x5474A7C29C91DEA9,
        0xF112B9359E399A53,
    ]
    assert int(RandomSource.seeded(0).child("US", "0", "total").uint64(1)[0]) == 0x815DAE881D2A66AD


def test_stream_continues_across_calls_of_odd_sizes() -> None:
    a = RandomSource.seeded(3)
    parts = [a.uint64(k) for k in (1, 3, 0, 5, 2)]
    b = RandomSource.seeded(3).uint64(11)
    np.testing.assert_array_equal(np.concatenate(parts), b)


def test_pickle_continues_the_same_stream() -> None:
    a = RandomSource.seeded(5).child("x")
    a.uint64(3)
    b = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(a.uint64(7), b.uint64(7))
    assert b.mode == "seeded" and b.seed == 5 and b.path == ("x",)


def test_children_are_keyed_not_ordered() -> None:
    root = RandomSource.seeded(11)
    root.uint64(100)  # reading the parent does not change its children
    x = root.child("State", "50").uint64(4)
    y = RandomSource.seeded(11).child("State", "50").uint64(4)
    np.testing.assert_array_equal(x, y)
    # nested path differs from flat path, and components are not concatenated
    assert not np.array_equal(RandomSource.seeded(11).child("State").child("50").uint64(4), x)
    assert not np.array_equal(
        RandomSource.seeded(11).child("ab", "c").uint64(2),
        RandomSource.seeded(11).child("a", "bc").uint64(2),
    )
    assert not np.array_equal(
        RandomSource.seeded(11).child("1").uint64(2), RandomSource.seeded(11).child(1).uint64(2)
    )


def test_secure_mode() -> None:
    a, b = RandomSource.secure(), RandomSource.secure()
    assert a.mode == "secure" and a.seed is None
    assert a.describe()["mode"] == "secure" and a.describe()["seed"] is None
    assert not np.array_equal(a.uint64(4), b.uint64(4))
    c = a.child("US")
    assert c.mode == "secure" and c.seed is None
    assert RandomSource.seeded(1).describe() == {
        "mode": "seeded",
        "seed": 1,
        "generator": GENERATOR,
    }
    assert "units/v1" in GENERATOR  # the measurement streams' format is named


def test_words_are_uniform_bits() -> None:
    words = RandomSource.seeded(2024).uint64(200_000)
    bits = np.unpackbits(words.view(np.uint8)).reshape(-1, 64).mean(axis=0)
    # each bit frequency within 5 standard errors of 1/2
    assert np.all(np.abs(bits - 0.5) < 5 * 0.5 / np.sqrt(words.size))
    top = (words >> np.uint64(56)).astype(np.int64)
    assert stats.chisquare(np.bincount(top, minlength=256)).pvalue > 1e-4


@pytest.mark.parametrize("bound", [1, 2, 3, 7, 1000, 2**40 + 5])
def test_integers_are_in_range_and_uniform(bound: int) -> None:
    x = RandomSource.seeded(bound).integers(60_000, bound)
    assert x.min() >= 0 and x.max() < bound
    if 1 < bound <= 1000:
        counts = np.bincount(x, minlength=bound)
        assert stats.chisquare(counts).pvalue > 1e-4


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: RandomSource.seeded("1"), "seed must be an integer"),  # type: ignore[arg-type]
        (lambda: RandomSource.seeded(True), "seed must be an integer"),
        (lambda: RandomSource.seeded(1).child(), "at least one key"),
        (lambda: RandomSource.seeded(1).child(1.5), "must be str or int"),  # type: ignore[arg-type]
        (lambda: RandomSource.seeded(1).uint64(-1), "must be >= 0"),
        (lambda: RandomSource.seeded(1).integers(3, 0), "bound must be"),
    ],
)
def test_invalid_arguments(call, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        call()


def test_experiment_generator_is_seeded() -> None:
    a = experiment_generator(5).integers(0, 100, 5)
    b = experiment_generator(np.random.SeedSequence(5)).integers(0, 100, 5)
    np.testing.assert_array_equal(a, experiment_generator(5).integers(0, 100, 5))
    assert a.shape == b.shape


# -- per-unit streams (RandomSource.unit_streams) ------------------------------------------


def _encode(*components: str | int) -> bytes:
    out = len(components).to_bytes(8, "big")
    for c in components:
        raw = (c if isinstance(c, str) else str(c)).encode()
        out += (b"s" if isinstance(c, str) else b"i") + len(raw).to_bytes(8, "big") + raw
    return out


def _reference_unit_words(seed: int, key: tuple, code: str, start: int, count: int) -> list[int]:
    """The documented construction, written independently: the longest digit suffix
    (at most 28) of the code, a window key by HMAC, AES on (hi, lo, block) blocks."""
    n = 0
    while n < min(len(code), 28) and code[len(code) - 1 - n] in "0123456789":
        n += 1
    prefix, digits = code[: len(code) - n], code[len(code) - n :].rjust(28, "0")
    parent = hashlib.sha256(b"censusdp/seeded/v1\x00" + str(seed).encode()).digest()
    window = hmac.new(parent, b"censusdp/units/v1" + _encode(*key, prefix, n), "sha256").digest()
    ecb = Cipher(algorithms.AES(window), modes.ECB()).encryptor()
    head = int(digits[:14]).to_bytes(6, "big") + int(digits[14:]).to_bytes(6, "big")
    stream = ecb.update(b"".join(head + j.to_bytes(4, "big") for j in range(start // 2 + count)))
    words = np.frombuffer(stream, dtype="<u8")
    return [int(w) for w in words[start : start + count]]


CODES = [
    "056001962700015600196270011000",  # a 30-digit spine block code: prefix "05"
    "56",
    "",  # the US
    "0056",  # differs from "56" by its length only
    "1AB0123",  # not all digits: prefix "1AB", suffix "0123"
    "12345678901234567890123456789",  # 29 digits: prefix "1"
]


@pytest.mark.parametrize("code", CODES)
@pytest.mark.parametrize(("start", "count"), [(0, 5), (3, 4), (7, 1)])
def test_unit_stream_is_the_documented_construction(code: str, start: int, count: int) -> None:
    key = ("Block", "detailed")
    streams = RandomSource.seeded(17).unit_streams(*key, codes=[code])
    got = [int(w) for w in streams.words([0], start, count)[0]]
    assert got == _reference_unit_words(17, key, code, start, count)


def test_unit_streams_known_answer() -> None:
    # Frozen outputs: a change here changes every seeded release's noise (units/v1).
    streams = RandomSource.seeded(0).unit_streams("Block", "total", codes=["0560019627000156"])
    assert [hex(int(w)) for w in streams.words([0], 0, 2)[0]] == [
        "0x2474732b7064fdbe",
        "0x5703c4aaea6595fc",
    ]


def test_each_code_has_its_own_stream() -> None:
    streams = RandomSource.seeded(4).unit_streams("Tract", "total", codes=CODES)
    words = streams.words(np.arange(len(CODES)), 0, 4)
    assert len({tuple(w) for w in words.tolist()}) == len(CODES)
    other = RandomSource.seeded(4).unit_streams("Tract", "hhgq", codes=CODES)
    assert not (other.words(np.arange(len(CODES)), 0, 4) == words).any()
    seeded5 = RandomSource.seeded(5).unit_streams("Tract", "total", codes=CODES)
    assert not (seeded5.words(np.arange(len(CODES)), 0, 4) == words).any()
    # the parent's position does not matter, a child's key does
    moved = RandomSource.seeded(4)
    moved.uint64(3)
    np.testing.assert_array_equal(
        moved.unit_streams("Tract", "total", codes=CODES).words(np.arange(len(CODES)), 0, 4),
        words,
    )
    child = RandomSource.seeded(4).child("persons").unit_streams("Tract", "total", codes=CODES)
    assert not (child.words(np.arange(len(CODES)), 0, 4) == words).any()


@settings(max_examples=examples(25), deadline=None)
@given(
    codes=st.lists(
        st.one_of(
            st.text("0123456789", min_size=1, max_size=31),
            st.from_regex(r"[0-9A-Z]{0,6}", fullmatch=True),
        ),
        min_size=1,
        max_size=12,
        unique=True,
    ),
    start=st.integers(0, 9),
    count=st.integers(1, 9),
    data=st.data(),
)
def test_a_units_words_do_not_depend_on_the_other_units(codes, start, count, data) -> None:
    """Words of a unit are the same alone, among any other codes, in any order, and as
    any window of a longer read (what makes chunking, resume and Spark agree)."""
    src = RandomSource.seeded(99)
    order = data.draw(st.permutations(range(len(codes))))
    together = src.unit_streams("Block", "q", codes=[codes[i] for i in order])
    wide = together.words(np.arange(len(codes)), 0, start + count)
    window = together.words(np.arange(len(codes)), start, count)
    np.testing.assert_array_equal(window, wide[:, start:])
    for row, i in enumerate(order):
        alone = src.unit_streams("Block", "q", codes=np.array([codes[i]])).words([0], start, count)
        np.testing.assert_array_equal(window[row], alone[0])
    # same-length digit codes take the array path: it agrees with the code-by-code one
    digits = [c for c in codes if c.isdigit() and len(c) == len(codes[0])]
    if codes[0].isdigit() and len(digits) > 1:
        fast = src.unit_streams("Block", "q", codes=digits).words(np.arange(len(digits)), 0, 3)
        mixed = src.unit_streams("Block", "q", codes=[*digits, "X"])
        np.testing.assert_array_equal(fast, mixed.words(np.arange(len(digits)), 0, 3))


def test_secure_unit_streams_are_keyed_by_the_secret_key() -> None:
    a, b = RandomSource.secure(), RandomSource.secure()
    codes = ["0560019627000156", "0560019627000157"]
    wa = a.unit_streams("Block", "q", codes=codes).words([0, 1], 0, 4)
    np.testing.assert_array_equal(wa, a.unit_streams("Block", "q", codes=codes).words([0, 1], 0, 4))
    assert not (b.unit_streams("Block", "q", codes=codes).words([0, 1], 0, 4) == wa).any()
    moved = pickle.loads(pickle.dumps(a))  # what a worker receives
    np.testing.assert_array_equal(
        moved.unit_streams("Block", "q", codes=codes).words([0, 1], 0, 4), wa
    )


@settings(max_examples=examples(25), deadline=None)
@given(
    code=st.sampled_from(CODES),
    start=st.one_of(st.integers(0, 40), st.integers(2**33 - 40, 2**33)),
    count=st.integers(0, 40),
    step=st.integers(1, 12),
)
def test_pieces_are_the_words_of_the_window(code: str, start: int, count: int, step: int) -> None:
    """``pieces`` (one AES-CTR keystream) reads exactly the words that ``words`` (AES-ECB
    on the window's blocks) does: from an odd start, up to the window's last word, in
    pieces of any size."""
    start = min(start, 2**33 - count)
    streams = RandomSource.seeded(8).unit_streams("Block", "q", codes=["17", code])
    want = streams.words([1], start, count)[0]
    pieces = [p.copy() for p in streams.pieces(1, start, count, step)]
    assert [p.size for p in pieces] == [min(step, count - a) for a in range(0, count, step)]
    got = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.uint64)
    np.testing.assert_array_equal(got, want)


def test_pieces_refuse_a_bad_window_or_step() -> None:
    streams = RandomSource.seeded(1).unit_streams("B", codes=["1"])
    with pytest.raises(ConfigError, match="^unit stream words 8589934590..8589934593 are outside"):
        next(streams.pieces(0, 2**33 - 2, 3, 1))
    with pytest.raises(ConfigError, match="^unit stream pieces need step >= 1, got 0$"):
        next(streams.pieces(0, 0, 3, 0))


def test_unit_stream_words_are_uniform_bits() -> None:
    codes = [f"{i:016d}" for i in range(2000)]
    words = RandomSource.seeded(2025).unit_streams("Block", "detailed", codes=codes)
    w = words.words(np.arange(2000), 0, 101)  # odd: windows end inside a block
    bits = np.unpackbits(w.reshape(-1).view(np.uint8)).reshape(-1, 64).mean(axis=0)
    assert np.all(np.abs(bits - 0.5) < 5 * 0.5 / np.sqrt(w.size))
    top = (w[:, 0] >> np.uint64(56)).astype(np.int64)  # the first word across units
    assert stats.chisquare(np.bincount(top, minlength=256)).pvalue > 1e-4


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: RandomSource.seeded(1).unit_streams(codes=["1"]), "at least one key"),
        (lambda: RandomSource.seeded(1).unit_streams(1.5, codes=["1"]), "must be str or int"),
        (
            lambda: RandomSource.seeded(1).unit_streams("B", codes=np.array([1, 2], dtype=object)),
            "^unit codes must be strings, got int 1$",
        ),
        (
            lambda: RandomSource.seeded(1).unit_streams("B", codes=["1"]).words([0], 2**33, 1),
            "outside 0..8589934592",
        ),
        (
            lambda: RandomSource.seeded(1).unit_streams("B", codes=["1"]).words([0], -1, 1),
            "outside",
        ),
    ],
)
def test_unit_streams_invalid_arguments(call, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        call()

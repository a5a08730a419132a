"""Random signs of ``numpy.random.Generator.integers(0, 2, dtype=np.int8)`` taken from PCG64's raw 64-bit numbers:
the same values, in the same order, leaving the generator in the same state, ~7x cheaper.

numpy draws a bounded 8-bit integer from 32-bit draws, and PCG64 gives its 32-bit draws as the low then the high
half of one 64-bit number, keeping the high half (``has_uint32``, ``uinteger`` of its state) for the next 32-bit
draw, also across calls. ``integers(0, 2, dtype=int8)`` takes four values from each 32-bit draw, one a byte, low
byte first, each the byte's top bit (Lemire's method on 8 bits, which never rejects for two values). Reading the
raw numbers' bytes as an array does that without a call a value. (Bounded draws of 32 bits, as the bootstrap's
indices, gain nothing so: numpy's own loop is as fast as the array passes.) Whether numpy here draws so is
checked once against ``integers`` itself (:func:`raw_draws_hold`); where it does not, or for another bit
generator, :func:`coin_flips` calls ``integers``.
"""

from __future__ import annotations

import functools
import sys

import numpy as np


def _words(gen: np.random.Generator, count: int) -> np.ndarray:
    """The next ``count`` 32-bit draws of ``gen`` (a PCG64), as numpy's 32-bit draws take them, state kept."""
    bits = gen.bit_generator
    state = bits.state
    head = None
    if count > 0 and state["has_uint32"]:  # a high half kept by an earlier 32-bit draw comes first
        head = np.array([state["uinteger"]], dtype=np.uint32)
        count -= 1
        bits.state = {**state, "has_uint32": 0}
    raw = bits.random_raw((count + 1) // 2) if count > 0 else np.empty(0, dtype=np.uint64)
    if len(raw):  # numpy keeps the last 64-bit draw's high half: for the next 32-bit draw when it took only the low
        bits.state = {**bits.state, "has_uint32": count % 2, "uinteger": int(raw[-1]) >> 32}
    words = raw.view(np.uint32)[:count]
    return words if head is None else np.concatenate([head, words])


def _fast(gen: np.random.Generator) -> bool:
    return type(gen.bit_generator) is np.random.PCG64 and raw_draws_hold()


def coin_flips(gen: np.random.Generator, size: int, n: int) -> np.ndarray:
    """``gen.integers(0, 2, (size, n), dtype=np.int8)``: the same values, ``gen`` left in the same state."""
    if size * n == 0 or not _fast(gen):
        return gen.integers(0, 2, size=(size, n), dtype=np.int8)
    return _coin_flips_fast(gen, size, n)


def _coin_flips_fast(gen: np.random.Generator, size: int, n: int) -> np.ndarray:
    """``coin_flips`` from the raw 32-bit draws (what ``raw_draws_hold`` checks)."""
    cells = size * n
    flips = _words(gen, -(-cells // 4)).view(np.uint8)[:cells]
    flips >>= 7
    return flips.view(np.int8).reshape(size, n)


@functools.cache  # a fact of this process's numpy: checked once
def raw_draws_hold() -> bool:
    """Whether numpy here draws as the module docstring reads it: checked once, against ``integers`` itself, on
    calls that start and end with a kept high half and without."""
    if sys.byteorder != "little":
        return False
    a, b = np.random.default_rng(7), np.random.default_rng(7)
    ok = True
    try:
        for size, n in ((3, 5), (1, 4), (2, 9), (5, 8), (1, 1), (4, 7), (3, 3), (1, 3)):
            ok = ok and np.array_equal(_coin_flips_fast(b, size, n), a.integers(0, 2, (size, n), dtype=np.int8))
            ok = ok and a.bit_generator.state == b.bit_generator.state
            ok = ok and a.integers(0, 1000, dtype=np.int32) == b.integers(0, 1000, dtype=np.int32)
    except Exception:  # any surprise: draw through integers
        ok = False
    return ok

"""The simulated device rounds to bf16 like the hardware (round to nearest even on the bits), for
every float32 bit pattern: NaNs, infinities, the largest finite values and the denormals."""

from __future__ import annotations

import numpy as np

from engine.backends.sim import round_to


def _bf16_reference(x: np.ndarray) -> np.ndarray:
    """The rounding written out in 64-bit integers, where no sum can wrap."""
    u = x.view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


def test_bf16_rounding_matches_the_reference_on_every_kind_of_bits():
    rng = np.random.default_rng(7)
    edges = np.array([0, 1, 0x7FFF, 0x8000, 0x18000, 0x7F7FFFFF, 0x7F800000, 0x7FC00000, 0x7FFFFFFF,
                      0x80000000, 0xFF7FFFFF, 0xFF800000, 0xFFFF7FFF, 0xFFFF8000, 0xFFFFFFFF], dtype=np.uint32)
    bits = np.concatenate([edges, rng.integers(0, 2**32, size=200_000, dtype=np.uint64).astype(np.uint32)])
    x = bits.view(np.float32)
    got = round_to(x, "bf16")
    assert np.array_equal(got.view(np.uint32), _bf16_reference(x).view(np.uint32))
    assert np.array_equal(x.view(np.uint32), bits)  # the input is left alone
    assert not np.shares_memory(got, x)


def test_fp16_and_fp32_rounding():
    x = np.array([1.0, 1.0 + 2**-12, 1.0 + 2**-10, 65504.0], dtype=np.float32)
    assert round_to(x, "fp16").tolist() == [1.0, 1.0, 1.0 + 2**-10, 65504.0]
    assert round_to(x, "fp32").tolist() == x.tolist()

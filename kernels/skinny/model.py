"""Predicted times of a decode plan (``cost_us``, ``bulk_cost_us``): a tuner's search-order prior,
not what the defaults pick, and resident CTAs per SM."""

from __future__ import annotations

import math

from kernels.skinny.tiles import (
    BULK_STATIC_SMEM,
    CHUNK,
    REGISTERS_PER_SM,
    SkinnyPlan,
    _cdiv,
    bulk_smem,
    register_estimate,
    warp_layout,
)
from kernels.spec import DeviceLimits

BULK_LATENCY_S = 1.0e-6
"""DRAM latency under load that the bulk ring's bytes in flight must cover (``bulk_cost_us``)."""
BULK_SM_SHARE = 1.0
"""The most one SM streams in ``bulk_cost_us``, as a multiple of its even share of the DRAM
bandwidth: a grid on fewer than 1 / BULK_SM_SHARE of the SMs cannot reach the bandwidth (on the
H200 every fastest bulk build ran >= 2 CTAs per SM: ADR-0003)."""
L2_RATIO = 1.8
"""L2 -> SM bandwidth over the DRAM bandwidth ``cost_us`` is given: on the H200 the a_smem 0 build
at M = 32, N = K = 5120 (32x16) moved ~157 MB through L2 in 26.4 us (~6 TB/s) against ~3.2 TB/s
streamed from DRAM by the decode-sized runs."""


def _resident_ctas(registers: int, warps: int) -> int:
    """Resident CTAs per SM by registers (the estimate rounded up to 8) and a 64-warp SM."""
    regs = 8 * math.ceil(registers / 8)
    return max(1, min(REGISTERS_PER_SM // (regs * 32 * warps), 64 // warps, 32))


def _ctas_per_sm(plan: SkinnyPlan) -> int:
    """Resident CTAs per SM of a plan (``_resident_ctas`` of its register estimate)."""
    return _resident_ctas(register_estimate(plan.bm, plan.bn, plan.stages, plan.warps, plan.a_smem), plan.warps)


def _bulk_resident(bm: int, bn: int, warps: int, stages: int, bulk_k: int, limits: DeviceLimits,
                   mode: int = 1) -> int:
    """Resident w_bulk CTAs per SM: by shared memory (1 KB reserved per CTA) and by warps."""
    smem = bulk_smem(bm, bn, warps, stages, bulk_k, mode) + BULK_STATIC_SMEM + 1024
    return max(1, min(limits.shared_memory_per_sm_bytes // smem, 64 // (warps + 1), 32))


def bulk_cost_us(m: int, n: int, k: int, bm: int, bn: int, stages: int, warps: int, split_k: int,
                 bulk_k: int, limits: DeviceLimits, bandwidth_bytes_per_s: float, mode: int = 1) -> float:
    """A predicted time in microseconds for a w_bulk ring (the tuner's prior, not a measurement, and
    not what picks the default: ``tma_schedule`` does): W, A, R and out
    from DRAM in waves of resident CTAs, each wave at the bandwidth or at what its bytes in flight
    (``stages`` slots of BN rows of bulk_k elements per CTA) carry over ``BULK_LATENCY_S`` or what
    its SMs can stream (``BULK_SM_SHARE``), whichever is lowest; A's reads from L2 once per CTA; the split-K partials written and read back plus the
    reduction's fixed cost; the launch."""
    item = 2
    ctas = _cdiv(n, bn) * _cdiv(m, bm) * split_k
    slots = limits.sm_count * _bulk_resident(bm, bn, warps, stages, bulk_k, limits, mode)
    per_cta = (n * k + _cdiv(n, bn) * m * k / L2_RATIO) * item / ctas
    t = 0.0
    left = ctas
    while left > 0:
        c = min(left, slots)
        in_flight = c * stages * (bn + bm) * bulk_k * item
        sm_rate = min(c, limits.sm_count) * BULK_SM_SHARE * bandwidth_bytes_per_s / limits.sm_count
        t += c * per_cta / min(bandwidth_bytes_per_s, in_flight / BULK_LATENCY_S, sm_rate)
        left -= c
    partials = 2 * split_k * m * n * 4 if split_k > 1 else 0
    t += (2 * m * n * item + partials) / bandwidth_bytes_per_s
    return t * 1e6 + 2.0 + (1.0 if split_k > 1 else 0.0)


def cost_us(plan: SkinnyPlan, m: int, n: int, k: int, dtype: str, bandwidth_bytes_per_s: float,
            sm_count: int) -> float:
    """A predicted time in microseconds (a search-order prior for a tuner, not a measurement): the
    slower of DRAM bytes (W once, A, R and out, the split-K partials written and read back) over
    the bandwidth and L2 -> SM bytes (W, A once per CTA with a_smem 1 or once per row-group slot
    of each CTA with a_smem 0, the partials) over ``L2_RATIO`` x the bandwidth, divided by an
    efficiency that falls where the grid leaves SMs idle or holds too few bytes in flight for the
    memory latency, plus the launch and the reduction's tail."""
    if plan.w_bulk:
        raise ValueError("cost_us: a w_bulk plan's model is bulk_cost_us (it needs the device's limits)")
    item = 2
    partials = 2 * plan.split_k * m * n * 4 if plan.split_k > 1 else 0
    dram = (n * k + m * k + 2 * m * n) * item + partials
    slots, rpw, _ = warp_layout(plan.bn, plan.warps)
    a_l2 = plan.grid[0] * m * k * item * (1 if plan.a_smem else slots)
    l2 = n * k * item + a_l2 + partials + 2 * m * n * item
    ctas = plan.grid[0] * plan.grid[1] * plan.grid[2]
    fill = min(1.0, ctas / sm_count)
    per_sm = _ctas_per_sm(plan)
    resident = min(ctas, sm_count * per_sm)
    in_flight = resident * plan.warps * plan.stages * rpw * 16 * CHUNK * item
    latency_s = 1.0e-6
    depth = min(1.0, in_flight / (bandwidth_bytes_per_s * latency_s))
    waves = _cdiv(ctas, sm_count * per_sm)
    t = max(dram, l2 / L2_RATIO) / bandwidth_bytes_per_s / max(1e-3, fill * depth) * 1e6
    t *= 1.0 + 0.05 * (waves - 1)
    return t + 2.0 + (1.0 if plan.split_k > 1 else 0.0)

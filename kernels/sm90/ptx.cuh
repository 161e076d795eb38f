// Hopper GEMM + residual: PTX wrappers of the pipeline (sm_90a): tensor-map parameters, mbarriers,
// TMA loads (multicast in a cluster), cluster rank and barrier, and a consumer's release of a ring
// slot to the producer (in every CTA of its cluster, which all write into it).

#ifndef SM90_PTX_CUH
#define SM90_PTX_CUH

#include "config.cuh"

struct __align__(64) TmaDesc {
    unsigned long long v[16];
};

// A tensor map is a kernel parameter passed by value (engine.backends.tensormap.as_kernel_arg).
#define TMAP_PARAM(name) const __grid_constant__ TmaDesc name
#define TMAP_ADDR(name) ((unsigned long long)(&name))

#include "../mbarrier.cuh"

// Has the phase of `parity` completed? (no waiting)
__device__ __forceinline__ bool mbar_test(unsigned bar, unsigned parity) {
    unsigned done;
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
    return done != 0;
}

__device__ __forceinline__ void tma_load_2d(unsigned dst, unsigned long long tmap, int c0, int c1,
                                            unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
        "l"(tmap), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}

// The same TMA load with an L2 cache policy (createpolicy): EVICT_FIRST for an operand streamed once.
__device__ __forceinline__ void tma_load_2d_hint(unsigned dst, unsigned long long tmap, int c0, int c1,
                                                 unsigned bar, unsigned long long policy) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
        " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst),
        "l"(tmap), "r"(c0), "r"(c1), "r"(bar), "l"(policy)
        : "memory");
}
__device__ __forceinline__ unsigned long long l2_evict_first() {
    unsigned long long p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}

// The same TMA load, written to the same shared-memory offset of every CTA in `mask` and
// completing bytes on each one's mbarrier at `bar`'s offset.
__device__ __forceinline__ void tma_load_2d_mc(unsigned dst, unsigned long long tmap, int c0, int c1,
                                               unsigned bar, unsigned short mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst),
        "l"(tmap), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
        : "memory");
}

// Arrive on the mbarrier at local address `bar` of the cluster's CTA `rank` (itself included).
// Default semantics (release, CTA scope), as CUTLASS's ClusterBarrier: the slot's readers are the
// wgmma that wgmma.wait_group has already retired, so no cluster-scope fence is needed (the
// .release.cluster form made every k-block 0.2-0.4 us slower on the H200).
__device__ __forceinline__ void mbar_arrive_cluster(unsigned bar, unsigned rank) {
    asm volatile(
        "{\n.reg .b32 ra;\n"
        "mapa.shared::cluster.u32 ra, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n" ::"r"(bar),
        "r"(rank)
        : "memory");
}

__device__ __forceinline__ unsigned cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}

// A consumer warp frees a pipeline slot: lane 0 arrives; with a cluster, lane r for CTA r (every
// CTA of the cluster writes its share of W into this CTA's slots).
__device__ __forceinline__ void release_slot(unsigned bar, int lane) {
    if constexpr (CL > 1) {
        if (lane < CL) mbar_arrive_cluster(bar, (unsigned)lane);
    } else {
        if (lane == 0) mbar_arrive(bar);
    }
}

// (EPI_RING_REUSE) One thread frees a pipeline slot for all the tile's consumer warps: an arrival count of
// TILE_THREADS / 32 on the slot's empty barrier in this CTA and, with a cluster, in every CTA of
// the cluster, as release_slot's warps would.
__device__ __forceinline__ void release_slot_all(unsigned bar) {
    if constexpr (CL > 1) {
#pragma unroll
        for (unsigned r = 0; r < CL; ++r) {
            asm volatile(
                "{\n.reg .b32 ra;\n"
                "mapa.shared::cluster.u32 ra, %0, %1;\n"
                "mbarrier.arrive.shared::cluster.b64 _, [ra], %2;\n}\n" ::"r"(bar),
                "r"(r), "n"(TILE_THREADS / 32)
                : "memory");
        }
    } else {
        asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "n"(TILE_THREADS / 32)
                     : "memory");
    }
}

#endif  // SM90_PTX_CUH

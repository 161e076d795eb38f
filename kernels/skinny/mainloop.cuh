// Decode GEMM + residual: a warp's main loop over its share of the CTA's K range in the variants that
// stage data in shared memory: A_SMEM (A's fragments from the CTA's shared A tiles, W in the register
// ring) and W_BULK (W and A through the shared-memory ring filled by bulk copies). Each leaves the warp's
// fragments of out^T in acc. The register ring's own loop (A and W loaded per warp) stays in the
// kernel's body: as a function, NVVM ordered the accumulators' phis the other way round and ptxas
// allocated other registers (ADR-0012).

#ifndef SKINNY_MAINLOOP_CUH
#define SKINNY_MAINLOOP_CUH

#include "config.cuh"
#include "a_tile.cuh"
#include "bulk.cuh"
#include "loads.cuh"
#include "mma.cuh"

// A_SMEM: tiles of KT chunks of the CTA's chunks [cb, ce) and tokens from m0, copied into sa's two
// buffers; iteration i of every warp is chunk A_TILE_J(i) of tile i / A_TILE (the same count for
// all warps, so the per-tile barrier is uniform). STAGES chunks of W in flight per warp, as in the
// register ring; tile t + 1 is copied while tile t is multiplied. The buffers are free on return
// (they become the partial tiles).
__device__ __forceinline__ void mainloop_a_smem(float (&acc)[RPW][NF][4], unsigned short* sa, const unsigned short* a,
                                                const unsigned short* const (&wp)[RPW][2], int m0, int cb, int ce,
                                                int kw, int g, int c, int M, int K) {
    const int kend = min(K, 32 * ce), mva = min(BM, M - m0);
    const int ntile = (ce - cb + KT - 1) / KT;
    const int nit = ntile * A_TILE;
#define A_TILE_J(i) (((i) % A_TILE) * KW + kw)
#define A_CHUNK(i) (cb + ((i) / A_TILE) * KT + A_TILE_J(i))
    if (ntile > 0) {
        copy_a_tile(sa, a, m0, mva, cb, kend, K);
        cp_async_commit();
    }
    uint4 wv[STAGES][RPW][2];
#pragma unroll
    for (int s = 0; s < STAGES; ++s)
        if (s < nit && A_CHUNK(s) < ce) load_w(wv[s], wp, A_CHUNK(s), c, K);
    for (int base = 0; base < nit; base += STAGES) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            const int i = base + s;
            if (i < nit) {
                if ((A_TILE % STAGES != 0 || s == 0) && i % A_TILE == 0) {
                    // tile i / A_TILE landed (this thread's copies, then everyone's); every warp is
                    // done with the previous tile, whose buffer takes the next one
                    cp_async_wait_all();
                    __syncthreads();
                    const int t = i / A_TILE;
                    if (t + 1 < ntile) {
                        copy_a_tile(sa + ((t + 1) & 1) * A_TILE_ELEMS, a, m0, mva, cb + (t + 1) * KT, kend, K);
                        cp_async_commit();
                    }
                }
                if (A_CHUNK(i) < ce)
                    mma_chunk_smem(acc, wv[s], sa + ((i / A_TILE) & 1) * A_TILE_ELEMS, A_TILE_J(i), g, c);
                const int i2 = i + STAGES;
                if (i2 < nit && A_CHUNK(i2) < ce) load_w(wv[s], wp, A_CHUNK(i2), c, K);
            }
        }
    }
#undef A_CHUNK
#undef A_TILE_J
    cp_async_wait_all();
    __syncthreads();  // the tiles' buffers become red
}

// W_BULK: this CTA's slots of K [sb, sb + nit) through the ring after the partial tiles in dsmem,
// its barriers in bars (full[STAGES], then empty[STAGES]); warp WARPS produces (tensor maps tw, ta
// with W_BULK 2; rows of w and a with 1), the others consume.
__device__ __forceinline__ void mainloop_bulk(float (&acc)[RPW][NF][4], unsigned char* dsmem, unsigned long long* bars,
                                              const unsigned short* w, const unsigned short* a, const TmaDesc* tw,
                                              const TmaDesc* ta, int warp, int lane, int slot, int kw, int n0,
                                              int m0, int M, int N, int K) {
    const int ks = (K + BULK_K - 1) / BULK_K;
    const int sb = (int)((long long)blockIdx.y * ks / SPLIT_K);
    const int nit = (int)((long long)(blockIdx.y + 1) * ks / SPLIT_K) - sb;
    const unsigned full0 = shared_addr(bars), empty0 = full0 + 8 * STAGES;
    unsigned ring;
    if constexpr (W_BULK == 2) {
        ring = (shared_addr(dsmem) + RED_FLOATS * 4 + 1023) & ~1023u;  // the swizzle's period
    } else {
        ring = shared_addr(dsmem + ((RED_FLOATS * 4 + 127) / 128) * 128);
    }
    if (threadIdx.x == 0) {
        if constexpr (W_BULK == 2) {
            // the tensor maps into the copy engine's cache while the barriers are set up
            asm volatile("prefetch.tensormap [%0];" ::"l"((unsigned long long)tw) : "memory");
            asm volatile("prefetch.tensormap [%0];" ::"l"((unsigned long long)ta) : "memory");
        }
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full0 + 8 * s, 1);
            mbar_init(empty0 + 8 * s, WARPS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    // launched with PDL, the set-up above overlapped the end of the kernel before; A, W, R, out
    // and ws are touched only after it has finished. No early launch_dependents(): the next
    // kernel's CTAs would take SMs as this one's leave, unevenly (ADR-0010)
    grid_dependency_wait();
    __syncthreads();
    if (warp == WARPS) {
        if constexpr (W_BULK == 2) {
            bulk_produce_boxes(ring, full0, empty0, tw, ta, n0, m0, sb, nit, M, lane);
        } else {
            bulk_produce_rows(ring, full0, empty0, w, a, n0, min(BN, N - n0), m0, min(BM, M - m0), sb, nit, K, lane);
        }
    } else {
        bulk_consume(acc, ring, full0, empty0, slot, kw, sb, nit, K, lane);
    }
}

#endif  // SKINNY_MAINLOOP_CUH

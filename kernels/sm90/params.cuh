// Hopper GEMM + residual: what the kernel hands its warpgroups (the producer, producer.cuh; the
// consumers, consumer_*.cuh): the shared-memory layout (the ring, the epilogue buffers and every
// barrier), the tensor maps' addresses and the problem with its tile counts.

#ifndef SM90_PARAMS_CUH
#define SM90_PARAMS_CUH

#include "config.cuh"
#include "epilogue.cuh"

// Shared addresses (32-bit, the shared window), in the order they are laid out.
struct Sm90Shared {
    unsigned base;        // the ring's slot 0: STAGES slots of STAGE_BYTES (1024-byte aligned)
    unsigned epi;         // the epilogue buffer(s): EPI_BUFS x EPI_BYTES (none with EPI_RING)
    unsigned full_bar;    // STAGES "slot loaded" barriers
    unsigned empty_bar;   // STAGES "slot free" barriers
    unsigned rfull_bar;   // EPI_BARS "residual landed" barriers (one per consumer with ping-pong)
    unsigned rempty_bar;  // EPI_BARS "epilogue buffer free" barriers
    unsigned turn_bar;    // ping-pong: one "your turn" barrier per consumer
    unsigned flag_addr;   // stream-K: a word per tile's threads, "finish the tile"
};

// The layout from the first 1024-byte aligned shared address (swizzle atoms need 1024 B).
__device__ __forceinline__ Sm90Shared shared_layout(unsigned base) {
    Sm90Shared s;
    s.base = base;
    s.epi = base + STAGES * STAGE_BYTES;
    s.full_bar = s.epi + (EPI_RING ? 0 : EPI_BUFS * EPI_BYTES);
    s.empty_bar = s.full_bar + STAGES * 8;
    s.rfull_bar = s.empty_bar + STAGES * 8;
    s.rempty_bar = s.rfull_bar + EPI_BARS * 8;
    s.turn_bar = s.rempty_bar + EPI_BARS * 8;
    s.flag_addr = s.turn_bar + (PINGPONG ? 16 : 0);
    return s;
}

// The kernel's tensor maps (TMAP_ADDR of its parameters): A and W with 3xTF32's low parts (alo, wlo),
// R and out with their tail-chunk maps (r2, out2), HALF_TAIL's 64-row maps (ah, outh, out2h). A map
// the build does not take stays 0.
struct Sm90Maps {
    unsigned long long a, w, alo, wlo;
    unsigned long long r, out, r2, out2;
    unsigned long long ah, outh, out2h;
};

// The problem: M x N x K (the kernel's frame: SWAP_AB swaps the problem's M and N), the tile grid
// (num_m x num_n tiles of BM x BN), the k-blocks of a tile (num_kb; 3xTF32: kb_k of one product, three
// products), the data-parallel tiles (dp_tiles, clamped) and this CTA's rank in its cluster.
struct Sm90Problem {
    int M, N, K;
    int num_m, num_n, num_tiles;
    int kb_k, num_kb;
    int dp_tiles;
    unsigned rank;
};

#endif  // SM90_PARAMS_CUH

// Hopper GEMM + residual: the persistent tile scheduler: the stream-K workspace and its atomics,
// each CTA's sequence of work items (data-parallel tiles, halves, stream-K segments), the tile
// order (raster), the tail shift, and the cluster launch attribute.

#ifndef SM90_SCHEDULER_CUH
#define SM90_SCHEDULER_CUH

#include "config.cuh"

#if STREAMK
// fp32 partial sums of the split tiles, in the consumers' fragment order (float4 q of tile thread t at
// [q][t]: coalesced; a tile's threads are its consumer warpgroup(s)), and per-slot k-block counters.
// Zero at module load; every launch leaves them zero again (the finishing CTA clears its slot).
__device__ float4 sk_ws[WS_TILES * BM * BN / 4];
__device__ unsigned sk_cnt[WS_TILES];
#endif
// The stream-K workspace and its counters (null without STREAMK: the module has none).
__device__ __forceinline__ float4* streamk_workspace() {
#if STREAMK
    return sk_ws;
#else
    return nullptr;
#endif
}
__device__ __forceinline__ unsigned* streamk_counters() {
#if STREAMK
    return sk_cnt;
#else
    return nullptr;
#endif
}

__device__ __forceinline__ void red_add_v4(float4* p, float a, float b, float c, float d) {
    asm volatile("red.relaxed.gpu.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(a), "f"(b),
                 "f"(c), "f"(d)
                 : "memory");
}
__device__ __forceinline__ float4 ld_cg_v4(const float4* p) {
    float4 v;
    asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "l"(p)
                 : "memory");
    return v;
}
__device__ __forceinline__ void st_cg_zero_v4(float4* p) {
    asm volatile("st.global.cg.v4.f32 [%0], {%1, %1, %1, %1};" ::"l"(p), "f"(0.0f) : "memory");
}
__device__ __forceinline__ void fence_gpu() {
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
}
__device__ __forceinline__ unsigned atom_add_acq_rel(unsigned* p, unsigned v) {
    unsigned old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}
__device__ __forceinline__ void st_relaxed_u32(unsigned* p, unsigned v) {
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// The tiles the kernel runs data-parallel (the rest are stream-K's or HALF_TAIL's) from the launch's
// dp_tiles: STREAMK, at most WS_TILES split tiles (the workspace's slots); HALF_TAIL, the whole
// tiles; otherwise every tile.
__device__ __forceinline__ int clamp_dp_tiles(int dp_tiles, int num_tiles) {
    if constexpr (STREAMK) {
        dp_tiles = dp_tiles < 0 ? 0 : dp_tiles;
        dp_tiles = dp_tiles > num_tiles ? num_tiles : dp_tiles;
        dp_tiles = num_tiles - dp_tiles > WS_TILES ? num_tiles - WS_TILES : dp_tiles;
    } else if constexpr (HALF_TAIL) {
        dp_tiles = dp_tiles < 0 ? 0 : dp_tiles > num_tiles ? num_tiles : dp_tiles;
    } else {
        dp_tiles = num_tiles;
    }
    return dp_tiles;
}

// This CTA's work, in order: data-parallel tiles blockIdx.x, + gridDim.x, ... below dp_tiles,
// then (STREAMK) its contiguous share [it, end) of the remaining tiles' k-iterations, cut at
// tile boundaries into segments. Producer and consumers walk the same sequence.
struct Sched {
    int next_tile;
    long long it, end;
    int units;  // HALF_TAIL: dp_tiles whole tiles, then two halves of each later tile
    int half;   // HALF_TAIL: the current unit: 0 a whole tile, 1 its first 64 rows, 2 its last 64
};

__device__ __forceinline__ void sched_init(Sched& s, int dp_tiles, int num_tiles, int num_kb) {
    s.next_tile = blockIdx.x / CL;
    if constexpr (HALF_TAIL) {
        s.units = dp_tiles + 2 * (num_tiles - dp_tiles);
        s.half = 0;
    }
    const long long sk_iters = (long long)(num_tiles - dp_tiles) * num_kb;
    s.it = (long long)blockIdx.x * sk_iters / gridDim.x;
    s.end = (long long)(blockIdx.x + 1) * sk_iters / gridDim.x;
}

__device__ __forceinline__ bool sched_next(Sched& s, int dp_tiles, int num_kb, int& tile, int& kb0,
                                           int& kb1) {
    if constexpr (HALF_TAIL) {
        if (s.next_tile < s.units) {
            const int h = s.next_tile - dp_tiles;  // >= 0: a half unit
            tile = h < 0 ? s.next_tile : dp_tiles + h / 2;
            s.half = h < 0 ? 0 : 1 + (h & 1);
            kb0 = 0;
            kb1 = num_kb;
            s.next_tile += gridDim.x;
            return true;
        }
        return false;
    } else {
        if (s.next_tile < dp_tiles) {
            tile = s.next_tile;
            kb0 = 0;
            kb1 = num_kb;
            s.next_tile += gridDim.x / CL;
            return true;
        }
        if constexpr (STREAMK) {
            if (s.it < s.end) {
                const long long t = s.it / num_kb;
                kb0 = (int)(s.it - t * num_kb);
                const long long rem = s.end - s.it;
                kb1 = rem < (long long)(num_kb - kb0) ? kb0 + (int)rem : num_kb;
                tile = dp_tiles + (int)t;
                s.it += kb1 - kb0;
                return true;
            }
        }
        return false;
    }
}

// Tile `tile` of the schedule -> this CTA's first row and column. With a cluster, schedule tiles are
// blocks of MC tiles adjacent along M (or, CLUSTER_N, of NC tiles adjacent along N), numbered
// N-fastest (``num_nb`` blocks across N), the CTA's rank r in its cluster picking its tile in the block.
#ifndef RASTER_M
#define RASTER_M 0
#endif
#define RANK_M(r) (CLUSTER_N ? 0 : (int)(r))
#define RANK_N(r) (CLUSTER_N ? (int)(r) : 0)
__device__ __forceinline__ void tile_origin(int tile, int num_nb, unsigned r, int& m0, int& n0) {
    if constexpr (RASTER_M) {
        // tiles numbered M-fastest (num_nb then holds the M blocks), so adjacent CTAs share a W tile
        // instead of an A row panel: the default for a narrow tile in one wave (use_raster_m)
        m0 = ((tile % num_nb) * MC + RANK_M(r)) * BM;
        n0 = ((tile / num_nb) * NC + RANK_N(r)) * BN;
    } else {
        m0 = ((tile / num_nb) * MC + RANK_M(r)) * BM;
        n0 = ((tile % num_nb) * NC + RANK_N(r)) * BN;
    }
}

#ifndef RASTER_GROUP
#define RASTER_GROUP 0
#endif
// RASTER_GROUP = G: tiles in groups of G M blocks (of cluster pairs where clustered along M), numbered
// M-fastest inside a group and group after group (CUTLASS's swizzle): the CTAs in flight share W
// tiles side by side and a band of A row panels. The default for two-wave cooperative 128x160
// (use_raster_group); slower on the clustered ping-pong defaults (ADR-0007)
template <int G>
__device__ __forceinline__ void tile_origin_grouped(int tile, int num_mb, int num_nb, unsigned rm, int& m0,
                                                    int& n0) {
    const int g = tile / (G * num_nb);
    const int r = tile - g * (G * num_nb);
    const int rows = num_mb - g * G < G ? num_mb - g * G : G;
    m0 = ((g * G + r % rows) * MC + RANK_M(rm)) * BM;
    n0 = ((r / rows) * NC + RANK_N(rm)) * BN;
}

// TAIL_SHIFT (on by default for 16-bit data-parallel builds: use_tail_shift): a tile that reaches
// past M (N) but starts inside is moved back to end at M (N), where M >= BM (N >= BN): its TMA boxes
// are then wholly inside (a straddling box loads slower). The rows (columns) it shares with its
// neighbour are computed by both, in the same order, and stored twice with the same bits (out never
// aliases R or the operands).
#ifndef TAIL_SHIFT
#define TAIL_SHIFT 0
#endif
// A unit's first row and column as producer and consumers both see it: the tile's origin in the
// tile order (num_m x num_n tiles, the CTA's cluster rank `rank`), the tail shift, and a HALF_TAIL
// tile's second half (its last 64 rows).
__device__ __forceinline__ void unit_origin(const Sched& s, int tile, int num_m, int num_n, unsigned rank,
                                            int M, int N, int& m0, int& n0) {
    if constexpr (RASTER_GROUP != 0) {
        tile_origin_grouped<RASTER_GROUP>(tile, (num_m + MC - 1) / MC, (num_n + NC - 1) / NC, rank, m0, n0);
    } else {
        tile_origin(tile, RASTER_M ? (num_m + MC - 1) / MC : (num_n + NC - 1) / NC, rank, m0, n0);
    }
    if constexpr (TAIL_SHIFT) {
        if (m0 < M && m0 + BM > M && M >= BM) m0 = M - BM;
        if (n0 < N && n0 + BN > N && N >= BN) n0 = N - BN;
    }
    if constexpr (HALF_TAIL) m0 += s.half == 2 ? 64 : 0;
}

#if CL > 1
#define CLUSTER_ATTR __cluster_dims__(CL, 1, 1)
#elif defined(CLUSTER_LAUNCH)
// pairs: clusters that share no tile, so the hardware places each pair of CTAs on one GPC
#define CLUSTER_ATTR __cluster_dims__(CLUSTER_LAUNCH, 1, 1)
#else
#define CLUSTER_ATTR
#endif

#endif  // SM90_SCHEDULER_CUH

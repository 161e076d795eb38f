// Residual add + RMSNorm, one pass over the data:
//   residual_out[M,N] = round(x + r)
//   out[M,N]          = round(s * rsqrt(mean(s^2) + eps) * weight),   s = x + r in fp32
// The norm and the normalised value come from the fp32 sum s (before it is rounded for
// residual_out); the weight is multiplied in fp32; each output is rounded once.
//
// Rendered by kernels/add_rmsnorm.py, which prepends integer #defines only:
//   AR_DTYPE    0 = bf16, 1 = fp16, 2 = fp32
//   AR_THREADS  threads per block (BLOCK_SIZE); one block works on one row at a time
//   AR_VPT      16-byte vectors per thread per row (row kept in registers), or 0 = the row is too
//               long for registers: residual_out is re-read (from L2) for the second pass
//   AR_STAGES   rows in flight per block (MEMORY_PIPELINING): 1 (off) = load a row, reduce, write,
//               then load the next; S >= 2 = the loads of the next S-1 rows (this block's share of
//               the grid-stride) are issued before the current row's reduction and stores
//   AR_MINB     blocks per SM the launch bounds promise (the grid is sm_count * AR_MINB)
//   AR_FUSE     1 = one kernel; 0 = residual_add (x + r -> residual_out), then rmsnorm reading it
// No CUDA headers: NVRTC needs none, conversions are inline PTX (vec16.cuh).

#define AR_EPS 1e-6f
#define AR_WARPS (AR_THREADS / 32)
#if AR_DTYPE == 2
#define AR_EPV 4                 // elements per 16-byte vector
#else
#define AR_EPV 8
#endif
#define AR_SLOTS (AR_STAGES < 2 ? 1 : AR_STAGES)

// 16-byte access and conversions: vec16.cuh (prepended by the spec, VEC_DTYPE = AR_DTYPE). Final
// outputs go through st_out (plain stores; streaming ones in measurement builds); residual_out
// where this build reads it back (the unfused add, the long-row path's second pass) always through
// st_vec.

// Block-wide sum: warp shuffles, then one value per warp through shared memory (double-buffered
// by row parity, so one barrier per row suffices: a warp can only overwrite red[p] two rows later,
// after every warp has passed the barrier of the row in between).
__device__ __forceinline__ float block_sum(float v, float (*red)[AR_WARPS], int parity) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) red[parity][threadIdx.x >> 5] = v;
    __syncthreads();
    float t = 0.f;
#pragma unroll
    for (int i = 0; i < AR_WARPS; ++i) t += red[parity][i];
    return t;
}

#if AR_FUSE == 0
// ------------------------------------------------------------------------------------------
// Fusion off, first kernel: residual_out = round(x + r), 16 bytes per thread per step.
extern "C" __global__ void __launch_bounds__(AR_THREADS)
residual_add(const uint4* __restrict__ x, const uint4* __restrict__ r, uint4* __restrict__ res,
             int M, int N) {
    const size_t nvec = (size_t)M * (size_t)N / AR_EPV;
    for (size_t i = (size_t)blockIdx.x * AR_THREADS + threadIdx.x; i < nvec;
         i += (size_t)gridDim.x * AR_THREADS) {
        float a[AR_EPV], b[AR_EPV];
        unpack(ld_stream(x + i), a);
        unpack(ld_stream(r + i), b);
#pragma unroll
        for (int e = 0; e < AR_EPV; ++e) a[e] += b[e];
        st_vec(res + i, pack(a));
    }
}
#define AR_TWO 0
#define AR_ENTRY rmsnorm
#else
#define AR_TWO 1
#define AR_ENTRY add_rmsnorm
#endif

// One thread's 16-byte vector of a row, written once for the register path and Hopper's ring
// (macros, so that both compile to the code that was measured): AR_ADD_STORE s = x + r in fp32
// and residual_out stored rounded; AR_ADD_SQ s's squares added to sq; AR_ZERO an empty vector
// slot; AR_SCALE_STORE the normalised, weighted output stored.
#define AR_ADD_STORE(s, xv, rv, dst)                                        \
    {                                                                       \
        unpack(xv, s);                                                      \
        float t_[AR_EPV];                                                   \
        unpack(rv, t_);                                                     \
        _Pragma("unroll") for (int e = 0; e < AR_EPV; ++e) s[e] += t_[e];   \
        st_out(dst, pack(s));                                               \
    }
#define AR_ADD_SQ(s) _Pragma("unroll") for (int e = 0; e < AR_EPV; ++e) sq = fmaf(s[e], s[e], sq)
#define AR_ZERO(s) _Pragma("unroll") for (int e = 0; e < AR_EPV; ++e) s[e] = 0.f
#define AR_SCALE_STORE(s, wvec, dst)                                        \
    {                                                                       \
        float g_[AR_EPV];                                                   \
        unpack(wvec, g_);                                                   \
        _Pragma("unroll") for (int e = 0; e < AR_EPV; ++e) g_[e] = s[e] * rstd * g_[e]; \
        st_out(dst, pack(g_));                                              \
    }

#ifndef AR_BULK
#define AR_BULK 0
#endif

#if AR_BULK
// ------------------------------------------------------------------------------------------
// Hopper (sm_90) path, fused, the row held in registers (AR_VPT > 0): the x and r rows land in a
// shared-memory ring of AR_STAGES slots by 1D bulk copies (cp.async.bulk, the TMA engine) issued by
// thread 0 AR_STAGES rows ahead, so a block keeps AR_STAGES rows of loads in flight without a
// register per byte (the register path holds each row in flight in registers: 2 by default).
// Each thread reads its own 16-byte vectors (tid + k * AR_THREADS) of the slot, so the sums and
// both outputs are bit-identical to the register path's with the same thread count; both outputs
// are stored from registers. A slot is refilled once every thread has read it (the reduction's
// barrier); with one slot (MEMORY_PIPELINING off) only after the row's stores are issued, so the
// block's own loads never overlap its work. Faster than the register path on the H200 (ADR-0006).
#include "mbarrier.cuh"
__device__ __forceinline__ uint4 ar_lds(unsigned addr) {
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr) : "memory");
    return v;
}
// Thread 0: rows `row` of x and r into the slot at `dst` (x, then r `rb` bytes further), both
// completing bytes on the slot's barrier.
__device__ __forceinline__ void ar_fill(unsigned dst, unsigned bar, const uint4* x, const uint4* r,
                                        size_t base, unsigned rb) {
    mbar_expect_tx(bar, 2u * rb);
    bulk_copy(dst, x + base, rb, bar);
    bulk_copy(dst + rb, r + base, rb, bar);
}

extern "C" __global__ void __launch_bounds__(AR_THREADS, AR_MINB)
add_rmsnorm(const uint4* __restrict__ a, const uint4* __restrict__ b, const uint4* __restrict__ w,
            uint4* __restrict__ res, uint4* __restrict__ out, int M, int N) {
    extern __shared__ __align__(128) unsigned char ar_ring[];
    __shared__ float red[2][AR_WARPS];
    __shared__ __align__(8) unsigned long long full[AR_STAGES];
    const int tid = threadIdx.x;
    const int V = N / AR_EPV;                  // vectors per row
    const unsigned rb = (unsigned)V * 16u;     // bytes of one row
    const unsigned slot = (2u * rb + 127u) & ~127u;
    const float inv_n = 1.0f / (float)N;
    const int G = gridDim.x;
    const unsigned ring = smem_u32(ar_ring);
    const unsigned bar0 = smem_u32(full);
    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < AR_STAGES; ++s)
            mbar_init(bar0 + 8 * s, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        // the first AR_STAGES rows of this block
        for (int i = 0; i < AR_STAGES; ++i) {
            const int row = blockIdx.x + i * G;
            if (row < M) ar_fill(ring + i * slot, bar0 + 8 * i, a, b, (size_t)row * V, rb);
        }
    }
    uint4 wv[AR_VPT];
#pragma unroll
    for (int k = 0; k < AR_VPT; ++k) {
        const int j = tid + k * AR_THREADS;
        wv[k] = j < V ? ld_cached(w + j) : make_uint4(0u, 0u, 0u, 0u);
    }
    __syncthreads();  // the barriers are initialised before anyone waits on them
    int parity = 0;
    int s = 0;
    unsigned phase = 0;
    for (int row = blockIdx.x; row < M; row += G) {
        const unsigned xs = ring + s * slot;
        const size_t base = (size_t)row * (size_t)V;
        mbar_wait(bar0 + 8 * s, phase);
        float v[AR_VPT][AR_EPV];
        float sq = 0.f;
#pragma unroll
        for (int k = 0; k < AR_VPT; ++k) {
            const int j = tid + k * AR_THREADS;
            if (j < V) {
                AR_ADD_STORE(v[k], ar_lds(xs + 16 * j), ar_lds(xs + rb + 16 * j), res + base + j);
                AR_ADD_SQ(v[k]);
            } else {
                AR_ZERO(v[k]);
            }
        }
        const float rstd = rsqrtf(block_sum(sq, red, parity) * inv_n + AR_EPS);
        parity ^= 1;
#if AR_STAGES > 1
        // every thread has read the slot (block_sum's barrier): refill it AR_STAGES rows ahead.
        // Safe because each thread's values from the slot are used (in sq) before the barrier, so
        // its shared loads have completed: without a proxy fence, bar.sync need not order a load
        // still in flight against the copy engine's write (the async proxy). A bulk bias_gelu whose
        // loads were used only after the barrier wrote wrong values (ADR-0006).
        if (tid == 0 && row + AR_STAGES * G < M)
            ar_fill(xs, bar0 + 8 * s, a, b, (size_t)(row + AR_STAGES * G) * V, rb);
#endif
#pragma unroll
        for (int k = 0; k < AR_VPT; ++k) {
            const int j = tid + k * AR_THREADS;
            if (j < V) AR_SCALE_STORE(v[k], wv[k], out + base + j);
        }
#if AR_STAGES == 1
        if (tid == 0 && row + G < M) ar_fill(xs, bar0, a, b, (size_t)(row + G) * V, rb);
#endif
        if (++s == AR_STAGES) {
            s = 0;
            phase ^= 1u;
        }
    }
}
#else
// ------------------------------------------------------------------------------------------
// The row kernel. Fused: a = x, b = r, res = residual_out. Unfused (rmsnorm): a = residual_out,
// b and res unused. A persistent grid (sm_count * AR_MINB blocks) strides over the rows.
extern "C" __global__ void __launch_bounds__(AR_THREADS, AR_MINB)
AR_ENTRY(const uint4* __restrict__ a, const uint4* __restrict__ b, const uint4* __restrict__ w,
         uint4* __restrict__ res, uint4* __restrict__ out, int M, int N) {
    __shared__ float red[2][AR_WARPS];
    const int tid = threadIdx.x;
    const int V = N / AR_EPV;                 // vectors per row
    const float inv_n = 1.0f / (float)N;
    const int G = gridDim.x;
    int parity = 0;
#if AR_VPT > 0
    // Row in registers: thread tid owns vectors tid + k * AR_THREADS, k < AR_VPT.
    uint4 wv[AR_VPT];
#pragma unroll
    for (int k = 0; k < AR_VPT; ++k) {
        const int j = tid + k * AR_THREADS;
        wv[k] = j < V ? ld_cached(w + j) : make_uint4(0u, 0u, 0u, 0u);
    }
    uint4 ba[AR_SLOTS][AR_VPT];
#if AR_TWO
    uint4 bb[AR_SLOTS][AR_VPT];
#define AR_LOAD(slot, row)                                                              \
    if ((row) < M) {                                                                    \
        const size_t base_ = (size_t)(row) * (size_t)V;                                 \
        _Pragma("unroll") for (int k = 0; k < AR_VPT; ++k) {                            \
            const int j = tid + k * AR_THREADS;                                         \
            if (j < V) { ba[slot][k] = ld_stream(a + base_ + j);                        \
                         bb[slot][k] = ld_stream(b + base_ + j); }                      \
        }                                                                               \
    }
#else
#define AR_LOAD(slot, row)                                                              \
    if ((row) < M) {                                                                    \
        const size_t base_ = (size_t)(row) * (size_t)V;                                 \
        _Pragma("unroll") for (int k = 0; k < AR_VPT; ++k) {                            \
            const int j = tid + k * AR_THREADS;                                         \
            if (j < V) ba[slot][k] = ld_stream(a + base_ + j);                          \
        }                                                                               \
    }
#endif
    // Prologue: rows blockIdx.x + i*G for i < S-1 are already in flight when the loop starts.
#pragma unroll
    for (int i = 0; i < AR_SLOTS - 1; ++i) { AR_LOAD(i, blockIdx.x + i * G) }

    for (int row0 = blockIdx.x; row0 < M; row0 += AR_SLOTS * G) {
#pragma unroll
        for (int st = 0; st < AR_SLOTS; ++st) {
            const int row = row0 + st * G;
            if (row >= M) return;                 // uniform across the block
            // Issue the loads AR_SLOTS-1 rows ahead into the slot freed by the previous row
            // (with one slot: this row's own loads, then straight on: no overlap).
            AR_LOAD((st + AR_SLOTS - 1) % AR_SLOTS, row + (AR_SLOTS - 1) * G)
            const size_t base = (size_t)row * (size_t)V;
            float s[AR_VPT][AR_EPV];
            float sq = 0.f;
#pragma unroll
            for (int k = 0; k < AR_VPT; ++k) {
                const int j = tid + k * AR_THREADS;
                if (j < V) {
#if AR_TWO
                    AR_ADD_STORE(s[k], ba[st][k], bb[st][k], res + base + j);
#else
                    unpack(ba[st][k], s[k]);
#endif
                    AR_ADD_SQ(s[k]);
                } else {
                    AR_ZERO(s[k]);
                }
            }
            const float rstd = rsqrtf(block_sum(sq, red, parity) * inv_n + AR_EPS);
            parity ^= 1;
#pragma unroll
            for (int k = 0; k < AR_VPT; ++k) {
                const int j = tid + k * AR_THREADS;
                if (j < V) AR_SCALE_STORE(s[k], wv[k], out + base + j);
            }
        }
    }
#else
    // Long rows: pass 1 streams the row (AR_SLOTS vectors in flight per thread), writes
    // residual_out and sums the squares of the fp32 sum; pass 2 re-reads residual_out (its own
    // stores, mostly from L2) -- for 16-bit dtypes the normalised value is then the rounded sum.
    for (int row = blockIdx.x; row < M; row += G) {
        const size_t base = (size_t)row * (size_t)V;
        float sq = 0.f;
        for (int j0 = tid; j0 < V; j0 += AR_SLOTS * AR_THREADS) {
            uint4 va[AR_SLOTS];
#if AR_TWO
            uint4 vb[AR_SLOTS];
#endif
#pragma unroll
            for (int u = 0; u < AR_SLOTS; ++u) {
                const int j = j0 + u * AR_THREADS;
                if (j < V) {
                    va[u] = ld_stream(a + base + j);
#if AR_TWO
                    vb[u] = ld_stream(b + base + j);
#endif
                }
            }
#pragma unroll
            for (int u = 0; u < AR_SLOTS; ++u) {
                const int j = j0 + u * AR_THREADS;
                if (j < V) {
                    float s[AR_EPV];
                    unpack(va[u], s);
#if AR_TWO
                    float t[AR_EPV];
                    unpack(vb[u], t);
#pragma unroll
                    for (int e = 0; e < AR_EPV; ++e) s[e] += t[e];
                    st_vec(res + base + j, pack(s));
#endif
#pragma unroll
                    for (int e = 0; e < AR_EPV; ++e) sq = fmaf(s[e], s[e], sq);
                }
            }
        }
        const float rstd = rsqrtf(block_sum(sq, red, parity) * inv_n + AR_EPS);
        parity ^= 1;
#if AR_TWO
        const uint4* src = res;
#else
        const uint4* src = a;
#endif
        for (int j = tid; j < V; j += AR_THREADS) {
            float s[AR_EPV], g[AR_EPV];
#if AR_TWO
            // this thread's own stores: read them back through the coherent path
            const uint4* p = src + base + j;
            uint4 v;
            asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
            unpack(v, s);
#else
            unpack(ld_stream(src + base + j), s);
#endif
            unpack(ld_cached(w + j), g);
#pragma unroll
            for (int e = 0; e < AR_EPV; ++e) g[e] = s[e] * rstd * g[e];
            st_out(out + base + j, pack(g));
        }
    }
#endif
}
#endif  // AR_BULK

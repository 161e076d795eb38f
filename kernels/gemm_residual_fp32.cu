// fp32 path of gemm_residual (appended to gemm_residual.cu when GR_DTYPE == 2): true fp32 FFMA,
// no TF32. Block tile GR_BM x GR_BN x GR_BK (BK 16), (BM/8) x (BN/8) threads, 8x8 outputs each.
//
// Loads: A[M,K] and W[N,K] are both K-contiguous, so each stage copies them as they lie, 16-byte
// cp.async chunks into row-major [row][BK + 4] shared tiles (GR_STAGES deep; 0 = synchronous
// 16-byte loads). No transpose on the way in.
// Compute: thread (tx, ty) owns rows ty + i*TY and columns tx + j*TX (i, j = 0..7). A warp is 8 tx
// x 4 ty (lane & 7, lane >> 3), so a quarter-warp (8 lanes, one ty) reads one A row (broadcast) and
// 8 consecutive W rows, 80 bytes apart: banks 20*r mod 32 = 0,20,8,28,16,4,24,12 (+0..3), all
// distinct, one wavefront per 16-byte read for A (4 rows x 16 B) and for W (8 rows x 16 B).
// Per 4 k and per half of the rows: 4 float4 of A held (16 registers), then per column j one float4
// of W and 16 FFMA: 24 LDS.128 per 256 FFMA, 64 accumulators + ~24 operands (fits 128 registers).
// Epilogue straight from registers: a warp's store covers 8 consecutive columns (32 bytes, a whole
// sector) of 4 rows.
#define GF_TX (GR_BN / 8)
#define GF_TY (GR_BM / 8)
#define GF_THREADS (GF_TX * GF_TY)
#define GF_LD (GR_BK + 4)                    // row stride in floats (+16 B)
#define GF_CH (GR_BK / 4)                    // 16-byte chunks per row
#define GF_STAGE_FLOATS ((GR_BM + GR_BN) * GF_LD)
// 64 accumulators + 32 A values + a W float4: fits 128 registers, i.e. 512 threads per SM.
#ifndef GF_IH
#define GF_IH 8
#endif
#define GF_MIN_BLOCKS (512 / GF_THREADS)

static_assert(GR_BK % 4 == 0, "BK must be whole 16-byte chunks");
static_assert(GF_TX % 8 == 0 && GF_TY % 4 == 0, "warps are 8 x 4 threads (BN >= 64, BM >= 32)");
static_assert((GR_BM * GF_CH) % GF_THREADS == 0 && (GR_BN * GF_CH) % GF_THREADS == 0,
              "tile rows must split evenly over the threads");

// Per-thread copy plan, fixed for the whole K loop: thread tid copies the 16-byte chunks at column
// (tid % CH) * 4 of tile rows tid / CH + i * RS (i = 0..BM/RS-1 for A, 0..BN/RS-1 for W), RS =
// THREADS / CH. Row pointers and in-range bits are computed once; each k-tile only adds k0.
#define GF_RS (GF_THREADS / GF_CH)
#define GF_ACH (GR_BM / GF_RS)               // A chunks per thread per stage
#define GF_WCH (GR_BN / GF_RS)               // W chunks per thread per stage
struct LoadPlan {
    const float* a;                          // A row of chunk 0, at the thread's column
    const float* w;
    size_t a_step, w_step;                   // RS rows of A / W, in elements
    u32 a_ok, w_ok;                          // bit i: chunk i's row is inside M / N
    int col;                                 // the thread's column within the k-tile
    u32 dst;                                 // shared offset (bytes) of chunk 0 in stage 0
};

// Copy one BK-slice into the stage at shared byte address `st` (rows/K beyond range: zeros). K is a
// multiple of 8, so a 4-float chunk is wholly inside K or wholly outside.
__device__ __forceinline__ void load_tile_f32(u32 st, const LoadPlan& pl, const float* __restrict__ a,
                                              const float* __restrict__ w, int k0, int K) {
    const bool kok = k0 + pl.col < K;
#pragma unroll
    for (int i = 0; i < GF_ACH; ++i) {
        const bool ok = kok && ((pl.a_ok >> i) & 1u);
        const float* src = ok ? pl.a + i * pl.a_step + k0 : a;
        const u32 dst = st + pl.dst + i * GF_RS * GF_LD * 4;
#if GR_STAGES == 0
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (ok) v = *reinterpret_cast<const float4*>(src);
        asm volatile("st.shared.v4.f32 [%0], {%1,%2,%3,%4};\n" :: "r"(dst), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w));
#else
        cp_async16(dst, src, ok ? 16 : 0);
#endif
    }
#pragma unroll
    for (int i = 0; i < GF_WCH; ++i) {
        const bool ok = kok && ((pl.w_ok >> i) & 1u);
        const float* src = ok ? pl.w + i * pl.w_step + k0 : w;
        const u32 dst = st + pl.dst + (GR_BM + i * GF_RS) * GF_LD * 4;
#if GR_STAGES == 0
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (ok) v = *reinterpret_cast<const float4*>(src);
        asm volatile("st.shared.v4.f32 [%0], {%1,%2,%3,%4};\n" :: "r"(dst), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w));
#else
        cp_async16(dst, src, ok ? 16 : 0);
#endif
    }
}

__device__ __forceinline__ void compute_tile_f32(const float* st, float (&acc)[8][8], int tx, int ty) {
    const float* as = st + ty * GF_LD;
    const float* bs = st + GR_BM * GF_LD + tx * GF_LD;
#pragma unroll 1
    for (int kq = 0; kq < GR_BK; kq += 4) {
#pragma unroll
        for (int ih = 0; ih < 8; ih += GF_IH) {
            float4 av[GF_IH];
#pragma unroll
            for (int i = 0; i < GF_IH; ++i)
                av[i] = *reinterpret_cast<const float4*>(as + (ih + i) * GF_TY * GF_LD + kq);
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const float4 bv = *reinterpret_cast<const float4*>(bs + j * GF_TX * GF_LD + kq);
#pragma unroll
                for (int i = 0; i < GF_IH; ++i) acc[ih + i][j] = fmaf(av[i].x, bv.x, acc[ih + i][j]);
#pragma unroll
                for (int i = 0; i < GF_IH; ++i) acc[ih + i][j] = fmaf(av[i].y, bv.y, acc[ih + i][j]);
#pragma unroll
                for (int i = 0; i < GF_IH; ++i) acc[ih + i][j] = fmaf(av[i].z, bv.z, acc[ih + i][j]);
#pragma unroll
                for (int i = 0; i < GF_IH; ++i) acc[ih + i][j] = fmaf(av[i].w, bv.w, acc[ih + i][j]);
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(GF_THREADS, GF_MIN_BLOCKS)
gemm_residual_fp32(const float* __restrict__ a, const float* __restrict__ w, const float* __restrict__ r,
                   float* __restrict__ out, int M, int N, int K) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    float* smem = reinterpret_cast<float*>(smem_raw);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int tx = (warp % (GF_TX / 8)) * 8 + (lane & 7), ty = (warp / (GF_TX / 8)) * 4 + (lane >> 3);
    const int n0 = blockIdx.x * GR_BN, m0 = blockIdx.y * GR_BM;
    const int ktiles = (K + GR_BK - 1) / GR_BK;

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;

    LoadPlan pl;
    {
        const int row = tid / GF_CH;
        pl.col = (tid % GF_CH) * 4;
        pl.a_step = (size_t)GF_RS * K;
        pl.w_step = (size_t)GF_RS * K;
        pl.a = a + (size_t)(m0 + row) * K + pl.col;
        pl.w = w + (size_t)(n0 + row) * K + pl.col;
        pl.a_ok = 0u;
        pl.w_ok = 0u;
#pragma unroll
        for (int i = 0; i < GF_ACH; ++i) pl.a_ok |= (m0 + row + i * GF_RS < M ? 1u : 0u) << i;
#pragma unroll
        for (int i = 0; i < GF_WCH; ++i) pl.w_ok |= (n0 + row + i * GF_RS < N ? 1u : 0u) << i;
        pl.dst = (u32)(row * GF_LD + pl.col) * 4u;
    }
    const u32 sbase = smem_addr(smem);

#if GR_STAGES == 0
    for (int kt = 0; kt < ktiles; ++kt) {
        load_tile_f32(sbase, pl, a, w, kt * GR_BK, K);
        __syncthreads();
        compute_tile_f32(smem, acc, tx, ty);
        __syncthreads();
    }
#else
#pragma unroll
    for (int s = 0; s < GR_STAGES - 1; ++s) {
        if (s < ktiles) load_tile_f32(sbase + s * GF_STAGE_FLOATS * 4, pl, a, w, s * GR_BK, K);
        cp_async_commit();
    }
    int rd = 0, wr = GR_STAGES - 1;          // stage read this iteration / written (kt + STAGES - 1)
    for (int kt = 0; kt < ktiles; ++kt) {
        cp_async_wait<GR_STAGES - 2>();
        __syncthreads();  // tile kt visible to all; everyone is done with tile kt-1's buffer (= wr)
        const int nk = kt + GR_STAGES - 1;
        if (nk < ktiles) load_tile_f32(sbase + wr * GF_STAGE_FLOATS * 4, pl, a, w, nk * GR_BK, K);
        cp_async_commit();
        compute_tile_f32(smem + rd * GF_STAGE_FLOATS, acc, tx, ty);
        rd = rd == GR_STAGES - 1 ? 0 : rd + 1;
        wr = wr == GR_STAGES - 1 ? 0 : wr + 1;
    }
    cp_async_wait<0>();
#endif

    // Epilogue from registers, 4-byte accesses: each warp instruction covers 8 consecutive columns
    // (one 32-byte sector) of 4 rows.
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int row = m0 + ty + i * GF_TY;
        if (row >= M) continue;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const int col = n0 + tx + j * GF_TX;
            if (col >= N) continue;
            float v = acc[i][j];
#if GR_FUSE
            v += r[(size_t)row * N + col];
#endif
            out[(size_t)row * N + col] = v;
        }
    }
}

// fp32 path of gemm_residual (appended to gemm_residual.cu when GR_DTYPE == 2): true fp32 FFMA,
// no TF32. Block tile GR_BM x GR_BN x 8, (BM/8) x (BN/8) threads, 8x8 outputs per thread held as
// two 4x4 quadrants (rows ty*4 and BM/2 + ty*4, cols tx*4 and BN/2 + tx*4) so that shared-memory
// fragment reads are float4 and conflict-free. Both operands are stored K-major in shared memory
// (transposed on the way in by 4-byte cp.async), GR_STAGES deep; GR_STAGES == 0 loads synchronously.
#define GF_TX (GR_BN / 8)
#define GF_TY (GR_BM / 8)
#define GF_THREADS (GF_TX * GF_TY)
#define GF_LDA (GR_BM + 4)
#define GF_LDB (GR_BN + 4)
#define GF_STAGE_FLOATS (8 * GF_LDA + 8 * GF_LDB)
// 256-thread tiles: ask for two blocks per SM (<= 128 registers; without it the unfused variant took
// 161 and ran one block per SM). Smaller tiles need ~160 registers: no cap (they spill at 128).
#define GF_MIN_BLOCKS (GF_THREADS >= 256 ? 2 : 1)

__device__ __forceinline__ void load_tile_f32(float* st, const float* __restrict__ a,
                                              const float* __restrict__ w, int m0, int n0, int k0,
                                              int M, int N, int K, int tid) {
    float* as = st;
    float* bs = st + 8 * GF_LDA;
#pragma unroll
    for (int i = 0; i < GR_BM * 8 / GF_THREADS; ++i) {
        const int e = tid + i * GF_THREADS, row = e >> 3, k = e & 7;
        const bool ok = (m0 + row < M) && (k0 + k < K);
        const float* src = ok ? a + (size_t)(m0 + row) * K + k0 + k : a;
#if GR_STAGES == 0
        as[k * GF_LDA + row] = ok ? *src : 0.f;
#else
        cp_async4(smem_addr(as + k * GF_LDA + row), src, ok ? 4 : 0);
#endif
    }
#pragma unroll
    for (int i = 0; i < GR_BN * 8 / GF_THREADS; ++i) {
        const int e = tid + i * GF_THREADS, row = e >> 3, k = e & 7;
        const bool ok = (n0 + row < N) && (k0 + k < K);
        const float* src = ok ? w + (size_t)(n0 + row) * K + k0 + k : w;
#if GR_STAGES == 0
        bs[k * GF_LDB + row] = ok ? *src : 0.f;
#else
        cp_async4(smem_addr(bs + k * GF_LDB + row), src, ok ? 4 : 0);
#endif
    }
}

__device__ __forceinline__ void compute_tile_f32(const float* st, float (&acc)[8][8], int tx, int ty) {
    const float* as = st;
    const float* bs = st + 8 * GF_LDA;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        float af[8], bf[8];
        const float4 a0 = *reinterpret_cast<const float4*>(as + k * GF_LDA + ty * 4);
        const float4 a1 = *reinterpret_cast<const float4*>(as + k * GF_LDA + GR_BM / 2 + ty * 4);
        const float4 b0 = *reinterpret_cast<const float4*>(bs + k * GF_LDB + tx * 4);
        const float4 b1 = *reinterpret_cast<const float4*>(bs + k * GF_LDB + GR_BN / 2 + tx * 4);
        af[0] = a0.x; af[1] = a0.y; af[2] = a0.z; af[3] = a0.w;
        af[4] = a1.x; af[5] = a1.y; af[6] = a1.z; af[7] = a1.w;
        bf[0] = b0.x; bf[1] = b0.y; bf[2] = b0.z; bf[3] = b0.w;
        bf[4] = b1.x; bf[5] = b1.y; bf[6] = b1.z; bf[7] = b1.w;
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(af[i], bf[j], acc[i][j]);
    }
}

extern "C" __global__ void __launch_bounds__(GF_THREADS, GF_MIN_BLOCKS)
gemm_residual_fp32(const float* __restrict__ a, const float* __restrict__ w, const float* __restrict__ r,
                   float* __restrict__ out, int M, int N, int K) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    float* smem = reinterpret_cast<float*>(smem_raw);
    const int tid = threadIdx.x, tx = tid % GF_TX, ty = tid / GF_TX;
    const int n0 = blockIdx.x * GR_BN, m0 = blockIdx.y * GR_BM;
    const int ktiles = (K + 7) / 8;

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;

#if GR_STAGES == 0
    for (int kt = 0; kt < ktiles; ++kt) {
        load_tile_f32(smem, a, w, m0, n0, kt * 8, M, N, K, tid);
        __syncthreads();
        compute_tile_f32(smem, acc, tx, ty);
        __syncthreads();
    }
#else
#pragma unroll
    for (int s = 0; s < GR_STAGES - 1; ++s) {
        if (s < ktiles) load_tile_f32(smem + s * GF_STAGE_FLOATS, a, w, m0, n0, s * 8, M, N, K, tid);
        cp_async_commit();
    }
    for (int kt = 0; kt < ktiles; ++kt) {
        cp_async_wait<GR_STAGES - 2>();
        __syncthreads();
        const int nk = kt + GR_STAGES - 1;
        if (nk < ktiles)
            load_tile_f32(smem + (nk % GR_STAGES) * GF_STAGE_FLOATS, a, w, m0, n0, nk * 8, M, N, K, tid);
        cp_async_commit();
        compute_tile_f32(smem + (kt % GR_STAGES) * GF_STAGE_FLOATS, acc, tx, ty);
    }
    cp_async_wait<0>();
#endif

    // Epilogue straight from registers: each thread row segment is a 16-byte float4 (N % 8 == 0,
    // so a 4-column group is either wholly inside N or wholly outside).
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int row = m0 + (i < 4 ? ty * 4 + i : GR_BM / 2 + ty * 4 + i - 4);
        if (row >= M) continue;
#pragma unroll
        for (int hj = 0; hj < 2; ++hj) {
            const int col = n0 + hj * (GR_BN / 2) + tx * 4;
            if (col >= N) continue;
            float4 v = make_float4(acc[i][hj * 4], acc[i][hj * 4 + 1], acc[i][hj * 4 + 2], acc[i][hj * 4 + 3]);
#if GR_FUSE
            const float4 rv = *reinterpret_cast<const float4*>(r + (size_t)row * N + col);
            v.x += rv.x; v.y += rv.y; v.z += rv.z; v.w += rv.w;
#endif
            *reinterpret_cast<float4*>(out + (size_t)row * N + col) = v;
        }
    }
}

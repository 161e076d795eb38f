// out[M,N] = A[M,K] @ W[N,K]^T + R[M,N]   (row-major; fp32 accumulation, one rounding at the end)
//
// Rendered by kernels/gemm_residual.py, which prepends integer #defines only:
//   GR_DTYPE   0 = bf16, 1 = fp16, 2 = fp32 (FFMA), 3 = tf32 (fp32 data on TF32 tensor cores)
//   GR_BM, GR_BN, GR_BK   block tile in elements (BK: 32 for bf16/fp16, 16 for fp32/tf32)
//   GR_WARPS_M, GR_WARPS_N   warps per block along M and N (tensor-core path)
//   GR_STAGES  0 = synchronous loads (no overlap), >= 2 = cp.async stages
//   GR_FUSE    1 = residual added in the epilogue, 0 = GEMM writes A@W^T (a separate add follows)
// This file holds the shared helpers, the bf16/fp16/tf32 mma.sync kernel and the elementwise add;
// gemm_residual_fp32.cu (appended for fp32) holds the SIMT FFMA kernel.
// No CUDA headers: NVRTC needs none of them, conversions are inline PTX (vec16.cuh, prepended).

typedef unsigned short u16;
typedef unsigned int u32;

#define GR_F32IO (GR_DTYPE >= 2)        // fp32 data in global memory (fp32 and tf32)
#if GR_F32IO
typedef float elem_t;
#else
typedef u16 elem_t;
#endif

__device__ __forceinline__ u32 smem_addr(const void* p) {
    u32 r;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
    return r;
}

// 16-byte async copy global -> shared; src_bytes = 0 zero-fills (rows/columns out of range).
__device__ __forceinline__ void cp_async16(u32 dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }

// pack2 / unpack2 (fp32 pair <-> packed 16-bit pair, rounded to nearest even): vec16.cuh,
// prepended by the spec with VEC_DTYPE = GR_DTYPE (2 for fp32 and tf32 data).

// ------------------------------------------------------------------------------------------
// Fusion off: out = out + r, 16 bytes per thread per step, grid-stride.
extern "C" __global__ void __launch_bounds__(256)
residual_add(elem_t* __restrict__ out, const elem_t* __restrict__ r, int M, int N) {
    const size_t nvec = (size_t)M * (size_t)N * sizeof(elem_t) / 16;
    uint4* o = reinterpret_cast<uint4*>(out);
    const uint4* rv = reinterpret_cast<const uint4*>(r);
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < nvec;
         i += (size_t)gridDim.x * blockDim.x) {
        uint4 x = o[i];
        const uint4 y = rv[i];
#if GR_F32IO
        x.x = __float_as_uint(__uint_as_float(x.x) + __uint_as_float(y.x));
        x.y = __float_as_uint(__uint_as_float(x.y) + __uint_as_float(y.y));
        x.z = __float_as_uint(__uint_as_float(x.z) + __uint_as_float(y.z));
        x.w = __float_as_uint(__uint_as_float(x.w) + __uint_as_float(y.w));
#else
        float a[8], b[8];
        unpack(x, a);
        unpack(y, b);
#pragma unroll
        for (int e = 0; e < 8; ++e) a[e] += b[e];
        x = pack(a);
#endif
        o[i] = x;
    }
}

#if GR_DTYPE != 2
// ------------------------------------------------------------------------------------------
// Tensor-core path: mma.sync fed by ldmatrix from padded shared memory, cp.async stages.
// bf16/fp16 use m16n8k16; tf32 uses m16n8k8. In bytes the two are the same: a k-step covers 32
// bytes of K, the A fragment is four 8x16-byte matrices (rows 0-7/8-15 x bytes 0-15/16-31) and the
// B fragment two (bytes 0-15/16-31), so one ldmatrix.x4 (b16 view) delivers either: for 32-bit data
// lane l gets the element at row l/4, column l%4 of each 8x4 matrix, which is the tf32 layout
// (a0: row g, k t; a1: row g+8; a2: k t+4; a3: row g+8, k t+4; b0: n g, k t; b1: k t+4).
#define GR_ES ((int)sizeof(elem_t))        // bytes per element
#define GR_VEC (16 / GR_ES)                 // elements per 16-byte chunk
#define GR_KSTEP (32 / GR_ES)               // elements of K per mma (16 for 16-bit, 8 for tf32)
#define GR_THREADS (GR_WARPS_M * GR_WARPS_N * 32)
#define GR_WM (GR_BM / GR_WARPS_M)          // warp tile rows
#define GR_WN (GR_BN / GR_WARPS_N)          // warp tile cols
#define GR_MT (GR_WM / 16)                  // m16 tiles per warp
#define GR_NT (GR_WN / 8)                   // n8 tiles per warp
#define GR_LDS (GR_BK + GR_VEC)             // smem row stride in elements (+16 B: no bank conflicts)
#define GR_NBUF (GR_STAGES == 0 ? 1 : GR_STAGES)
#define GR_STAGE_ELEMS ((GR_BM + GR_BN) * GR_LDS)
#define GR_LDC (GR_BN + 8)                  // epilogue tile row stride in elements (16-bit only)
#define GR_CHUNKS (GR_BK / GR_VEC)          // 16-byte chunks per tile row
// Warp tiles of at most 64x32 (64 accumulators per thread) fit 128 registers: ask for two blocks
// of 256 threads (four of 128) per SM; 64x64 warp tiles need ~240 registers, one block.
#define GR_MIN_BLOCKS (GR_WM * GR_WN <= 64 * 32 ? 512 / GR_THREADS : 1)

static_assert(GR_BK % GR_KSTEP == 0 && GR_BK % GR_VEC == 0, "BK must be whole k-steps and 16-byte chunks");
static_assert(GR_WM % 16 == 0 && GR_WN % 16 == 0, "warp tile must be m16 x (2 x n8) tiles");
static_assert((GR_BM * GR_CHUNKS) % GR_THREADS == 0 && (GR_BN * GR_CHUNKS) % GR_THREADS == 0,
              "tile rows must split evenly over the threads");

#if GR_DTYPE == 0
#define GR_MMA "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
#elif GR_DTYPE == 1
#define GR_MMA "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
#else
#define GR_MMA "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
#endif

// fp32 bits -> tf32 bits, round to nearest (ties away from zero): the low 13 bits become zero.
// (Without it the tensor cores would ignore those bits, i.e. truncate toward zero.)
__device__ __forceinline__ void to_tf32(u32& x) {
#if GR_DTYPE == 3
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(x) : "f"(__uint_as_float(x)));
#endif
}

// Copy one BK-slice of the A and W tiles into stage buffer `st` (rows/K beyond range: zeros).
// K is a multiple of 8 elements, so a 16-byte chunk is wholly inside K or wholly outside.
__device__ __forceinline__ void load_tile(elem_t* st, const elem_t* __restrict__ a,
                                          const elem_t* __restrict__ w, int m0, int n0, int k0,
                                          int M, int N, int K, int tid) {
    elem_t* as = st;
    elem_t* bs = st + GR_BM * GR_LDS;
#pragma unroll
    for (int i = 0; i < GR_BM * GR_CHUNKS / GR_THREADS; ++i) {
        const int e = tid + i * GR_THREADS, row = e / GR_CHUNKS, col = (e % GR_CHUNKS) * GR_VEC;
        const bool ok = (m0 + row < M) && (k0 + col < K);
        const elem_t* src = ok ? a + (size_t)(m0 + row) * K + k0 + col : a;
#if GR_STAGES == 0
        uint4 v = make_uint4(0, 0, 0, 0);
        if (ok) v = *reinterpret_cast<const uint4*>(src);
        *reinterpret_cast<uint4*>(as + row * GR_LDS + col) = v;
#else
        cp_async16(smem_addr(as + row * GR_LDS + col), src, ok ? 16 : 0);
#endif
    }
#pragma unroll
    for (int i = 0; i < GR_BN * GR_CHUNKS / GR_THREADS; ++i) {
        const int e = tid + i * GR_THREADS, row = e / GR_CHUNKS, col = (e % GR_CHUNKS) * GR_VEC;
        const bool ok = (n0 + row < N) && (k0 + col < K);
        const elem_t* src = ok ? w + (size_t)(n0 + row) * K + k0 + col : w;
#if GR_STAGES == 0
        uint4 v = make_uint4(0, 0, 0, 0);
        if (ok) v = *reinterpret_cast<const uint4*>(src);
        *reinterpret_cast<uint4*>(bs + row * GR_LDS + col) = v;
#else
        cp_async16(smem_addr(bs + row * GR_LDS + col), src, ok ? 16 : 0);
#endif
    }
}

// All BK/KSTEP k-steps of one stage: ldmatrix fragments (tf32: rounded), then MT x NT mma.sync.
__device__ __forceinline__ void compute_tile(const elem_t* st, float (&acc)[GR_MT][GR_NT][4],
                                             int wm, int wn, int lane) {
    const elem_t* as = st + (wm * GR_WM) * GR_LDS;
    const elem_t* bs = st + GR_BM * GR_LDS + (wn * GR_WN) * GR_LDS;
#pragma unroll
    for (int kk = 0; kk < GR_BK; kk += GR_KSTEP) {
        u32 af[GR_MT][4], bf[GR_NT][2];
#pragma unroll
        for (int mt = 0; mt < GR_MT; ++mt) {
            // lanes 0-15: rows 0-15 at bytes 0-15 of the k-step; lanes 16-31: the same rows, bytes 16-31
            const u32 p = smem_addr(as + (mt * 16 + (lane & 15)) * GR_LDS + kk + (lane >> 4) * GR_VEC);
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                         : "=r"(af[mt][0]), "=r"(af[mt][1]), "=r"(af[mt][2]), "=r"(af[mt][3]) : "r"(p));
#pragma unroll
            for (int q = 0; q < 4; ++q) to_tf32(af[mt][q]);
        }
#pragma unroll
        for (int nt = 0; nt < GR_NT; nt += 2) {
            // lanes 0-7: n 0-7 bytes 0-15; 8-15: n 0-7 bytes 16-31; 16-23/24-31: n 8-15 likewise
            const int row = nt * 8 + (lane & 7) + ((lane >> 4) << 3);
            const u32 p = smem_addr(bs + row * GR_LDS + kk + ((lane >> 3) & 1) * GR_VEC);
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                         : "=r"(bf[nt][0]), "=r"(bf[nt][1]), "=r"(bf[nt + 1][0]), "=r"(bf[nt + 1][1])
                         : "r"(p));
            to_tf32(bf[nt][0]);
            to_tf32(bf[nt][1]);
            to_tf32(bf[nt + 1][0]);
            to_tf32(bf[nt + 1][1]);
        }
#pragma unroll
        for (int mt = 0; mt < GR_MT; ++mt) {
#pragma unroll
            for (int nt = 0; nt < GR_NT; ++nt) {
                float* c = acc[mt][nt];
                asm volatile(GR_MMA "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                             : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                             : "r"(af[mt][0]), "r"(af[mt][1]), "r"(af[mt][2]), "r"(af[mt][3]),
                               "r"(bf[nt][0]), "r"(bf[nt][1]));
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(GR_THREADS, GR_MIN_BLOCKS)
gemm_residual_mma(const elem_t* __restrict__ a, const elem_t* __restrict__ w, const elem_t* __restrict__ r,
                  elem_t* __restrict__ out, int M, int N, int K) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    elem_t* smem = reinterpret_cast<elem_t*>(smem_raw);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / GR_WARPS_N, wn = warp % GR_WARPS_N;
    const int n0 = blockIdx.x * GR_BN, m0 = blockIdx.y * GR_BM;
    const int ktiles = (K + GR_BK - 1) / GR_BK;

    float acc[GR_MT][GR_NT][4];
#pragma unroll
    for (int i = 0; i < GR_MT; ++i)
#pragma unroll
        for (int j = 0; j < GR_NT; ++j)
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.f;

#if GR_STAGES == 0
    for (int kt = 0; kt < ktiles; ++kt) {
        load_tile(smem, a, w, m0, n0, kt * GR_BK, M, N, K, tid);
        __syncthreads();
        compute_tile(smem, acc, wm, wn, lane);
        __syncthreads();
    }
#else
#pragma unroll
    for (int s = 0; s < GR_STAGES - 1; ++s) {
        if (s < ktiles) load_tile(smem + s * GR_STAGE_ELEMS, a, w, m0, n0, s * GR_BK, M, N, K, tid);
        cp_async_commit();
    }
    for (int kt = 0; kt < ktiles; ++kt) {
        cp_async_wait<GR_STAGES - 2>();
        __syncthreads();  // tile kt visible to all; everyone is done with tile kt-1's buffer
        const int nk = kt + GR_STAGES - 1;
        if (nk < ktiles)
            load_tile(smem + (nk % GR_STAGES) * GR_STAGE_ELEMS, a, w, m0, n0, nk * GR_BK, M, N, K, tid);
        cp_async_commit();
        compute_tile(smem + (kt % GR_STAGES) * GR_STAGE_ELEMS, acc, wm, wn, lane);
    }
    cp_async_wait<0>();
#endif

    const int g = lane >> 2, t2 = (lane & 3) * 2;
#if GR_F32IO
    // tf32: epilogue straight from registers. c0,c1 (c2,c3) are two adjacent fp32 columns of row g
    // (g+8): 8-byte loads of R and stores; a warp covers 8 rows x 32 contiguous bytes, whole sectors.
    // col is even and N a multiple of 8, so a pair is wholly inside N or wholly outside.
#pragma unroll
    for (int mt = 0; mt < GR_MT; ++mt) {
#pragma unroll
        for (int nt = 0; nt < GR_NT; ++nt) {
            const int col = n0 + wn * GR_WN + nt * 8 + t2;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = m0 + wm * GR_WM + mt * 16 + g + h * 8;
                if (row < M && col < N) {
                    float2 v = make_float2(acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]);
#if GR_FUSE
                    const float2 rv = *reinterpret_cast<const float2*>(r + (size_t)row * N + col);
                    v.x += rv.x;
                    v.y += rv.y;
#endif
                    *reinterpret_cast<float2*>(out + (size_t)row * N + col) = v;
                }
            }
        }
    }
#else
    __syncthreads();  // pipeline buffers are reused as the epilogue tile

    // Epilogue: (R tile ->) smem, add in fp32 and round once into smem, 16-byte coalesced stores.
    u16* cs = smem;
    constexpr int CCH = GR_BN / 8;  // 16-byte chunks per tile row
#if GR_FUSE
    for (int e = tid; e < GR_BM * CCH; e += GR_THREADS) {
        const int row = e / CCH, col = (e % CCH) * 8;
        if (m0 + row < M && n0 + col < N)
            *reinterpret_cast<uint4*>(cs + row * GR_LDC + col) =
                *reinterpret_cast<const uint4*>(r + (size_t)(m0 + row) * N + n0 + col);
    }
    __syncthreads();
#endif
#pragma unroll
    for (int mt = 0; mt < GR_MT; ++mt) {
#pragma unroll
        for (int nt = 0; nt < GR_NT; ++nt) {
            const int col = wn * GR_WN + nt * 8 + t2;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = wm * GR_WM + mt * 16 + g + h * 8;
                u32* p = reinterpret_cast<u32*>(cs + row * GR_LDC + col);
                float x0 = acc[mt][nt][2 * h], x1 = acc[mt][nt][2 * h + 1];
#if GR_FUSE
                float r0, r1;
                unpack2(*p, r0, r1);  // garbage outside M/N: those elements are never stored
                x0 += r0;
                x1 += r1;
#endif
                *p = pack2(x0, x1);
            }
        }
    }
    __syncthreads();
    for (int e = tid; e < GR_BM * CCH; e += GR_THREADS) {
        const int row = e / CCH, col = (e % CCH) * 8;
        if (m0 + row < M && n0 + col < N)
            *reinterpret_cast<uint4*>(out + (size_t)(m0 + row) * N + n0 + col) =
                *reinterpret_cast<const uint4*>(cs + row * GR_LDC + col);
    }
#endif
}
#endif

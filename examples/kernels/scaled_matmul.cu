// C[m, n] = alpha * A[m, k] @ B[k, n], row-major, fp32 accumulation.
//
// SOL Cockpit prepends the knobs as #defines (TILE, DEPTH), SOL_DTYPE, and `scalar_t` with the
// conversions sol_to_f32 / sol_from_f32 (see scaled_matmul.toml). Each block of TILE x TILE threads
// computes one TILE x TILE tile of C; each step stages a TILE x BK slab of A and a BK x TILE slab of
// B (BK = TILE * DEPTH) in dynamic shared memory as fp32, then every thread runs BK FMAs.

extern "C" __global__ void __launch_bounds__(TILE * TILE)
scaled_matmul(const scalar_t* __restrict__ A, const scalar_t* __restrict__ B, scalar_t* __restrict__ C,
              float alpha, int m, int n, int k) {
    constexpr int BK = TILE * DEPTH;
    extern __shared__ float smem[];
    float* As = smem;            // [TILE][BK]
    float* Bs = smem + TILE * BK; // [BK][TILE]
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < k; k0 += BK) {
#pragma unroll
        for (int d = 0; d < DEPTH; ++d) {
            const int ka = k0 + d * TILE + tx;
            As[ty * BK + d * TILE + tx] = (row < m && ka < k) ? sol_to_f32(A[(size_t)row * k + ka]) : 0.0f;
            const int kb = k0 + d * TILE + ty;
            Bs[(d * TILE + ty) * TILE + tx] = (kb < k && col < n) ? sol_to_f32(B[(size_t)kb * n + col]) : 0.0f;
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < BK; ++kk) {
            acc = fmaf(As[ty * BK + kk], Bs[kk * TILE + tx], acc);
        }
        __syncthreads();
    }
    if (row < m && col < n) {
        C[(size_t)row * n + col] = sol_from_f32(alpha * acc);
    }
}

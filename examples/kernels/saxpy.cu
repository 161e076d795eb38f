// out[i] = a * x[i] + y[i], in fp32, rounded once to the element type.
//
// SOL Cockpit prepends the knobs as #defines (BLOCK, ITEMS_PER_THREAD), SOL_DTYPE, and `scalar_t`
// with sol_to_f32 / sol_from_f32 (see saxpy.toml). The arrays move as 16-byte vectors (n is a
// multiple of the vector width, a constraint in the spec); a grid-stride loop covers any n.

#define VEC (16 / (int)sizeof(scalar_t))

union Vec16 {
    uint4 u;
    scalar_t e[VEC];
};

extern "C" __global__ void __launch_bounds__(BLOCK)
saxpy(const scalar_t* __restrict__ x, const scalar_t* __restrict__ y, scalar_t* __restrict__ out, float a, int n) {
    const uint4* xv = reinterpret_cast<const uint4*>(x);
    const uint4* yv = reinterpret_cast<const uint4*>(y);
    uint4* ov = reinterpret_cast<uint4*>(out);
    const long long nvec = n / VEC;
    const long long step = (long long)gridDim.x * BLOCK * ITEMS_PER_THREAD;
    for (long long base = (long long)blockIdx.x * BLOCK * ITEMS_PER_THREAD + threadIdx.x; base < nvec; base += step) {
        Vec16 vx[ITEMS_PER_THREAD], vy[ITEMS_PER_THREAD];
#pragma unroll
        for (int j = 0; j < ITEMS_PER_THREAD; ++j) {
            const long long i = base + (long long)j * BLOCK;
            if (i < nvec) {
                vx[j].u = __ldg(xv + i);
                vy[j].u = __ldg(yv + i);
            }
        }
#pragma unroll
        for (int j = 0; j < ITEMS_PER_THREAD; ++j) {
            const long long i = base + (long long)j * BLOCK;
            if (i < nvec) {
                Vec16 r;
#pragma unroll
                for (int e = 0; e < VEC; ++e) {
                    r.e[e] = sol_from_f32(fmaf(a, sol_to_f32(vx[j].e[e]), sol_to_f32(vy[j].e[e])));
                }
                ov[i] = r.u;
            }
        }
    }
}

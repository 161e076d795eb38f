
// K padding for the TMA path: TMA reads rows of whole 16 bytes, so 16-bit data whose K is not a
// multiple of 8 is copied into rows of Kp (the next multiple of 8) with zeros after K. One thread
// writes 8 elements (one 16-byte store); its reads are 2-byte loads, since the source rows start at
// any 2-byte offset. Zeros contribute nothing to the dot products.
extern "C" __global__ void pad_rows16(const unsigned short* __restrict__ src, unsigned short* __restrict__ dst,
                                      int rows, int k, int kp) {
    const int per_row = kp / 8;
    const size_t total = (size_t)rows * per_row;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t row = i / per_row;
        const int c0 = (int)(i % per_row) * 8;
        const unsigned short* s = src + row * (size_t)k;
        unsigned short v[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] = (c0 + e < k) ? s[c0 + e] : (unsigned short)0;
        uint4 out;
        out.x = (unsigned)v[0] | ((unsigned)v[1] << 16);
        out.y = (unsigned)v[2] | ((unsigned)v[3] << 16);
        out.z = (unsigned)v[4] | ((unsigned)v[5] << 16);
        out.w = (unsigned)v[6] | ((unsigned)v[7] << 16);
        *(uint4*)(dst + row * (size_t)kp + c0) = out;
    }
}

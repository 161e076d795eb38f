// Hopper GEMM + residual: the epilogue's math: each thread's accumulators plus R from the epilogue
// buffer at `ebuf` (fused), rounded once, written back into the buffer in its swizzled layout
// (epilogue.cuh), then made visible to the TMA store through the tile's named barrier (bar_id).
// Three layouts: fp32 data; SWAP_AB (the transposed tile, ldmatrix / stmatrix .trans); 16-bit data
// (SPLIT_N: this consumer's columns). A thread is lane `lane` of warp `warp` in its consumer
// warpgroup `cw` (read with SPLIT_N only: the other builds pass 0), whose first row in the tile is row0.

#ifndef SM90_EPILOGUE_WRITE_CUH
#define SM90_EPILOGUE_WRITE_CUH

#include "config.cuh"
#include "epilogue.cuh"
#include "../vec16.cuh"

// fp32 data (tf32, 3xTF32): 8-byte pairs in 128-byte swizzled chunks of 32 columns.
__device__ __forceinline__ void epilogue_write_f32(float (&acc)[M_ITERS][ACC_N], unsigned ebuf, int row0,
                                                   int warp, int lane) {
#pragma unroll
    for (int mi = 0; mi < M_ITERS; ++mi) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int lr = row0 + mi * 64 + warp * 16 + (lane >> 2) + half * 8;
            const unsigned row_addr = ebuf + lr * 128 + (lane & 1) * 8;
            const int sw = lane >> 2;  // == lr % 8
            const int q2 = (lane & 3) >> 1;
#pragma unroll
            for (int jg = 0; jg < BN / 8; jg += 4) {
                // 4 pairs of residuals first (8 registers), then add and write back
                float2 rv[4];
                if constexpr (FUSE) {
#pragma unroll
                    for (int jj = 0; jj < 4; ++jj) {
                        const int j = jg + jj;
                        rv[jj] = ld_shared_f2(row_addr + (j / 4) * EPI_CHUNK_BYTES + (((2 * (j % 4) + q2) ^ sw) << 4));
                    }
                }
#pragma unroll
                for (int jj = 0; jj < 4; ++jj) {
                    const int j = jg + jj;
                    float v0 = acc[mi][j * 4 + half * 2];
                    float v1 = acc[mi][j * 4 + half * 2 + 1];
                    if constexpr (FUSE) {
                        v0 += rv[jj].x;
                        v1 += rv[jj].y;
                    }
                    st_shared_f2(row_addr + (j / 4) * EPI_CHUNK_BYTES + (((2 * (j % 4) + q2) ^ sw) << 4), v0, v1);
                }
            }
        }
    }
}

// SWAP_AB: each accumulator pair is (the problem's column n, rows m and m + 1), an 8 x 8 block of
// them (8 n x 8 m) one matrix of ldmatrix / stmatrix .trans: this lane addresses row
// m = 8 (j + mi / 2) + mr of matrix mi (half mi % 2 of the warp's 16 n, k-block pair j) of the
// consumer's 64-row slice it (M_ITERS of them).
__device__ __forceinline__ void epilogue_write_swapped(float (&acc)[M_ITERS][ACC_N], unsigned ebuf, int row0,
                                                       int warp, int lane) {
#pragma unroll
    for (int it = 0; it < M_ITERS; ++it) {
        const int mi = lane >> 3;
        const int mr = lane & 7;
        const int nb = row0 + it * 64 + warp * 16 + (mi & 1) * 8;  // the matrix's first n
        const unsigned ubase = ebuf + (nb / 64) * EPI_CHUNK_BYTES;
        const int nu = (nb % 64) / 8;  // its 16-byte unit in a 128-byte row, before the swizzle
#pragma unroll
        for (int j = 0; j + 1 < WG_N / 8; j += 2) {
            const int m = 8 * (j + (mi >> 1)) + mr;
            const unsigned addr = ubase + m * 128 + ((nu ^ (m % 8)) << 4);
            unsigned q[4];
            float v[4][2];
#pragma unroll
            for (int i = 0; i < 4; ++i) {  // matrix i: half i % 2, block j + i / 2
                v[i][0] = acc[it][(j + i / 2) * 4 + (i % 2) * 2];
                v[i][1] = acc[it][(j + i / 2) * 4 + (i % 2) * 2 + 1];
            }
            if constexpr (FUSE) {
                ldsm_x4_trans(addr, q[0], q[1], q[2], q[3]);
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    float r0, r1;
                    unpack2(q[i], r0, r1);
                    v[i][0] += r0;
                    v[i][1] += r1;
                }
            }
#pragma unroll
            for (int i = 0; i < 4; ++i) q[i] = pack2(v[i][0], v[i][1]);
            stsm_x4_trans(addr, q[0], q[1], q[2], q[3]);
        }
        if constexpr ((WG_N / 8) % 2 != 0) {  // an odd count's last k-block: its two halves, lanes 0-15's addresses
            constexpr int j = WG_N / 8 - 1;
            const int m = 8 * j + mr;
            const unsigned addr = ubase + m * 128 + ((nu ^ (m % 8)) << 4);
            float a0 = acc[it][j * 4], a1 = acc[it][j * 4 + 1];
            float b0 = acc[it][j * 4 + 2], b1 = acc[it][j * 4 + 3];
            if constexpr (FUSE) {
                unsigned q0, q1;
                ldsm_x2_trans(addr, q0, q1);
                float r0, r1;
                unpack2(q0, r0, r1);
                a0 += r0;
                a1 += r1;
                unpack2(q1, r0, r1);
                b0 += r0;
                b1 += r1;
            }
            stsm_x2_trans(addr, pack2(a0, a1), pack2(b0, b1));
        }
    }
}

// 16-bit data: packed pairs in 128B-swizzled 64-column chunks, then the tail chunk (epi_addr); this
// consumer's columns start at pair joff of the row.
__device__ __forceinline__ void epilogue_write_16(float (&acc)[M_ITERS][ACC_N], unsigned ebuf, int row0,
                                                  int joff, int warp, int lane) {
#pragma unroll
    for (int mi = 0; mi < M_ITERS; ++mi) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int lr = row0 + mi * 64 + warp * 16 + (lane >> 2) + half * 8;
            const unsigned row_addr = ebuf + lr * 128 + (lane & 3) * 4;
            const int sw = lane >> 2;  // == lr % 8
            const unsigned tail_addr = ebuf + EPI_TAIL + lr * EPI_TAIL_BYTES + (lane & 3) * 4;
            const int sw_tail = (lr >> EPI_TAIL_ROW_SHIFT) & EPI_TAIL_SW_MASK;
            (void)tail_addr;
            (void)sw_tail;
            // all of this row's residual pairs first: one exposed latency, not WG_N/8
            unsigned rv[WG_N / 8];
            if constexpr (FUSE) {
#pragma unroll
                for (int j = 0; j < WG_N / 8; ++j) {
                    rv[j] = ld_shared_u32(epi_addr(row_addr, tail_addr, joff + j, sw, sw_tail));
                }
            }
#pragma unroll
            for (int j = 0; j < WG_N / 8; ++j) {
                const unsigned addr = epi_addr(row_addr, tail_addr, joff + j, sw, sw_tail);
                float v0 = acc[mi][j * 4 + half * 2];
                float v1 = acc[mi][j * 4 + half * 2 + 1];
                if constexpr (FUSE) {
                    float r0, r1;
                    unpack2(rv[j], r0, r1);
                    v0 += r0;
                    v1 += r1;
                }
                st_shared_u32(addr, pack2(v0, v1));
            }
        }
    }
}

__device__ __forceinline__ void epilogue_write(float (&acc)[M_ITERS][ACC_N], unsigned ebuf, int row0, int cw,
                                               int warp, int lane, int bar_id) {
    if constexpr (DT >= 2) {
        epilogue_write_f32(acc, ebuf, row0, warp, lane);
    } else if constexpr (SWAP_AB) {
        epilogue_write_swapped(acc, ebuf, row0, warp, lane);
    } else if constexpr (SPLIT_N) {
        // this consumer's columns start at pair joff of the row: a constant in each unrolled copy (the
        // chunk and swizzle unit of every pair fold at compile time)
#pragma unroll
        for (int cc = 0; cc < NUM_CONSUMERS; ++cc) {
            if (cc != cw) continue;
            epilogue_write_16(acc, ebuf, row0, cc * (WG_N / 8), warp, lane);
        }
    } else {
        epilogue_write_16(acc, ebuf, row0, 0, warp, lane);
    }
    // generic-proxy writes -> async-proxy (TMA) reads
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("bar.sync %0, %1;" ::"r"(bar_id), "n"(TILE_THREADS) : "memory");
}

#endif  // SM90_EPILOGUE_WRITE_CUH

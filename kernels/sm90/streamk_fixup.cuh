// Hopper GEMM + residual: the stream-K fixup, where this CTA covered only part of the tile's K: add
// its fp32 partial (ACC_OUT) into the tile's workspace slot and count its k-blocks; the CTA whose
// k-blocks complete the count reads the sum back into ACC_OUT and clears the slot (`finish`).

#if STREAMK
            bool finish = true;
            if (kb0 != 0 || kb1 != num_kb) {
                // ------- stream-K fixup: add the partial in, count k-blocks, last one finishes -------
                float4* ws = sk_ws + (size_t)(tile - dp_tiles) * (BM * BN / 4) + ct;
                unsigned* cnt = sk_cnt + (tile - dp_tiles);
#pragma unroll
                for (int mi = 0; mi < M_ITERS; ++mi) {
#pragma unroll
                    for (int q = 0; q < ACC_N / 4; ++q) {
                        red_add_v4(ws + (mi * (ACC_N / 4) + q) * TILE_THREADS, ACC_OUT[mi][4 * q],
                                   ACC_OUT[mi][4 * q + 1], ACC_OUT[mi][4 * q + 2], ACC_OUT[mi][4 * q + 3]);
                    }
                }
                fence_gpu();
                asm volatile("bar.sync %0, %1;" ::"r"(bar_id), "n"(TILE_THREADS) : "memory");
                if (ct == 0) {
                    const unsigned add = (unsigned)(kb1 - kb0);
                    const unsigned done = atom_add_acq_rel(cnt, add) + add;
                    st_shared_u32(flag, done == (unsigned)num_kb ? 1u : 0u);
                }
                asm volatile("bar.sync %0, %1;" ::"r"(bar_id), "n"(TILE_THREADS) : "memory");
                finish = ld_shared_u32(flag) != 0u;
                if (finish) {
                    fence_gpu();
#pragma unroll
                    for (int mi = 0; mi < M_ITERS; ++mi) {
#pragma unroll
                        for (int q = 0; q < ACC_N / 4; ++q) {
                            float4* p = ws + (mi * (ACC_N / 4) + q) * TILE_THREADS;
                            const float4 v = ld_cg_v4(p);
                            ACC_OUT[mi][4 * q] = v.x;
                            ACC_OUT[mi][4 * q + 1] = v.y;
                            ACC_OUT[mi][4 * q + 2] = v.z;
                            ACC_OUT[mi][4 * q + 3] = v.w;
                            st_cg_zero_v4(p);
                        }
                    }
                    if (ct == 0) st_relaxed_u32(cnt, 0u);
                }
            }
#endif

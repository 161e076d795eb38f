// Hopper GEMM + residual: after a group's last k-block (mainloop.cuh): wait for its wgmmas, release
// its slot, and fence the accumulators (PROMOTE: add the group into `sum`).

#if STAGES > 1
                wgmma_wait<0>();
                release_slot(empty_bar + 8 * prev_stage, lane);
#endif
#pragma unroll
                for (int mi = 0; mi < M_ITERS; ++mi) {
#pragma unroll
                    for (int i = 0; i < ACC_N; ++i) {
                        fence_reg(acc[mi][i]);
#if PROMOTE
                        sum[mi][i] += acc[mi][i];
#endif
                    }
                }

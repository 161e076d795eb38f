// Hopper GEMM + residual: the storer thread's TMA stores of the epilogue buffer (its chunks, then
// the tail chunk) through STORE_MAP / STORE_MAP2, which the consumer body defines, in one bulk group.

#if SWAP_AB
#pragma unroll
                for (int c = 0; c < EPI_CHUNKS; ++c) {
                    if (n0 < N && m0 + c * EPI_COLS < M)
                        tma_store_2d(STORE_MAP, m0 + c * EPI_COLS, n0, ebuf + c * EPI_CHUNK_BYTES);
                }
#else
#pragma unroll
                for (int c = 0; c < EPI_CHUNKS; ++c) {
                    if (m0 < M && n0 + c * EPI_COLS < N)
                        tma_store_2d(STORE_MAP, n0 + c * EPI_COLS, m0, ebuf + c * EPI_CHUNK_BYTES);
                }
#endif
#if EPI_TAIL_COLS
                if (m0 < M && n0 + EPI_CHUNKS * EPI_COLS < N)
                    tma_store_2d(STORE_MAP2, n0 + EPI_CHUNKS * EPI_COLS, m0, ebuf + EPI_TAIL);
#endif
                asm volatile("cp.async.bulk.commit_group;" ::: "memory");

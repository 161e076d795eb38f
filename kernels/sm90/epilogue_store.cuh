// Hopper GEMM + residual: the storer thread's TMA stores of the epilogue buffer at `ebuf` (its chunks,
// then the tail chunk) to the tile at (m0, n0) of the M x N output through `map` / `map2` (the
// tail's), in one bulk group.

#ifndef SM90_EPILOGUE_STORE_CUH
#define SM90_EPILOGUE_STORE_CUH

#include "config.cuh"
#include "epilogue.cuh"

__device__ __forceinline__ void epilogue_store(unsigned long long map, unsigned long long map2, int m0, int n0,
                                               int M, int N, unsigned ebuf) {
    if constexpr (SWAP_AB) {
#pragma unroll
        for (int c = 0; c < EPI_CHUNKS; ++c) {
            if (n0 < N && m0 + c * EPI_COLS < M) tma_store_2d(map, m0 + c * EPI_COLS, n0, ebuf + c * EPI_CHUNK_BYTES);
        }
    } else {
#pragma unroll
        for (int c = 0; c < EPI_CHUNKS; ++c) {
            if (m0 < M && n0 + c * EPI_COLS < N) tma_store_2d(map, n0 + c * EPI_COLS, m0, ebuf + c * EPI_CHUNK_BYTES);
        }
    }
    if constexpr (EPI_TAIL_COLS != 0) {
        if (m0 < M && n0 + EPI_CHUNKS * EPI_COLS < N)
            tma_store_2d(map2, n0 + EPI_CHUNKS * EPI_COLS, m0, ebuf + EPI_TAIL);
    }
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

#endif  // SM90_EPILOGUE_STORE_CUH

// Hopper GEMM + residual: warpgroup MMA (wgmma.mma_async) for the build's dtype: the operand
// descriptors, fences and waits, and one wrapper per instruction width, the build's named WGMMA.

#if DT == 2 || DT == 3
#define WG_AB "tf32"
#define WG_K "8"
#define WG_IMM "1, 1"          // scale-a, scale-b (tf32 takes no transpose immediates)
#elif DT == 0
#define WG_AB "bf16"
#define WG_K "16"
#define WG_IMM "1, 1, 0, 0"    // scale-a, scale-b, both K-major (no transpose)
#else
#define WG_AB "f16"
#define WG_K "16"
#define WG_IMM "1, 1, 0, 0"
#endif

// wgmma shared-memory descriptor for a K-major tile written by TMA with 128B swizzle: rows of 128
// bytes, 8-row (1024-byte) swizzle atoms stacked along M/N. Split at bit 32: the low word holds
// the address field (addr >> 4, 14 bits) and LBO (1: unused for swizzled K-major), the high word
// SBO (1024 >> 4) and the mode (bit 62: 128B swizzle), a constant. Shared memory is < 256 KB, so
// a tile offset (>> 4) adds to the low word without leaving the address field: one uniform add
// per wgmma instead of rebuilding the descriptor (the main loop's SASS for ping-pong 128x128: 56
// instructions per k-block and warp instead of 120).
__device__ __forceinline__ unsigned desc_lo(unsigned saddr) {
    return ((saddr & 0x3FFFF) >> 4) | (1u << 16);
}
#define DESC_HI ((1024u >> 4) | (1u << 30))
__device__ __forceinline__ unsigned long long desc64(unsigned lo) {
    return ((unsigned long long)DESC_HI << 32) | lo;
}

__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void fence_reg(float& r) {
    asm volatile("" : "+f"(r)::"memory");
}

// The accumulator operands of a wgmma, 8 at a time: "+f"(d[b]) ... "+f"(d[b + 7]).
#define WG_ACC8(b)                                                                              \
    "+f"(d[b]), "+f"(d[b + 1]), "+f"(d[b + 2]), "+f"(d[b + 3]), "+f"(d[b + 4]), "+f"(d[b + 5]), \
        "+f"(d[b + 6]), "+f"(d[b + 7])
#define WG_ACC_40 WG_ACC8(0), WG_ACC8(8), WG_ACC8(16), WG_ACC8(24), WG_ACC8(32)
#define WG_ACC_64 \
    WG_ACC8(0), WG_ACC8(8), WG_ACC8(16), WG_ACC8(24), WG_ACC8(32), WG_ACC8(40), WG_ACC8(48), WG_ACC8(56)
#define WG_ACC_80 WG_ACC_64, WG_ACC8(64), WG_ACC8(72)
#define WG_ACC_72 WG_ACC_64, WG_ACC8(64)
#define WG_ACC_96 WG_ACC_64, WG_ACC8(64), WG_ACC8(72), WG_ACC8(80), WG_ACC8(88)
#define WG_ACC_104 WG_ACC_64, WG_ACC8(64), WG_ACC8(72), WG_ACC8(80), WG_ACC8(88), WG_ACC8(96)
#define WG_ACC4(b) "+f"(d[b]), "+f"(d[b + 1]), "+f"(d[b + 2]), "+f"(d[b + 3])
#define WG_ACC_100 WG_ACC_96, WG_ACC4(96)
#define WG_ACC_68 WG_ACC_64, WG_ACC4(64)
#define WG_ACC_76 WG_ACC_72, WG_ACC4(72)
#define WG_ACC_84 WG_ACC_80, WG_ACC4(80)
#define WG_ACC_88 WG_ACC_80, WG_ACC8(80)
#define WG_ACC_92 WG_ACC_88, WG_ACC4(88)
#define WG_ACC_128 \
    WG_ACC_64, WG_ACC8(64), WG_ACC8(72), WG_ACC8(80), WG_ACC8(88), WG_ACC8(96), WG_ACC8(104), \
        WG_ACC8(112), WG_ACC8(120)

// ... and their names in the instruction's template ("%0, %1, ..."): the accumulators, then the two
// descriptors and the scale-d predicate follow in the wrapper.
#define WG_R40                                                                        \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "           \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39"
#define WG_R64                                                                            \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "               \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "     \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "     \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define WG_R80 WG_R64 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
#define WG_R72 WG_R64 ", %64, %65, %66, %67, %68, %69, %70, %71"
#define WG_R96 WG_R80 ", %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define WG_R104 WG_R96 ", %96, %97, %98, %99, %100, %101, %102, %103"
#define WG_R100 WG_R96 ", %96, %97, %98, %99"
#define WG_R68 WG_R64 ", %64, %65, %66, %67"
#define WG_R76 WG_R72 ", %72, %73, %74, %75"
#define WG_R84 WG_R80 ", %80, %81, %82, %83"
#define WG_R88 WG_R80 ", %80, %81, %82, %83, %84, %85, %86, %87"
#define WG_R92 WG_R88 ", %88, %89, %90, %91"
#define WG_R128                                                                                    \
    WG_R80 ", %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "    \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"

// wgmma_m64n<N>k16(d, desc_a, desc_b, scale_d): one wgmma of a 64 x N tile into NACC = N / 2
// accumulators per thread; the descriptors and the scale-d predicate are operands NACC, NACC + 1
// and NACC + 2 of the instruction's template.
#define DEFINE_WGMMA(N, NACC, IA, IB, IP, RLIST, ACCLIST)                                         \
    __device__ __forceinline__ void wgmma_m64n##N##k16(float (&d)[NACC], unsigned long long da,  \
                                                      unsigned long long db, int scale_d) {    \
        asm volatile(                                                                           \
            "{\n.reg .pred p;\n"                                                                \
            "setp.ne.b32 p, %" #IP ", 0;\n"                                                     \
            "wgmma.mma_async.sync.aligned.m64n" #N "k" WG_K ".f32." WG_AB "." WG_AB " "          \
            "{" RLIST "}, %" #IA ", %" #IB ", p, " WG_IMM ";\n}\n"                                \
            : ACCLIST                                                                           \
            : "l"(da), "l"(db), "r"(scale_d));                                                  \
    }
DEFINE_WGMMA(256, 128, 128, 129, 130, WG_R128, WG_ACC_128)
DEFINE_WGMMA(128, 64, 64, 65, 66, WG_R64, WG_ACC_64)
DEFINE_WGMMA(160, 80, 80, 81, 82, WG_R80, WG_ACC_80)
DEFINE_WGMMA(80, 40, 40, 41, 42, WG_R40, WG_ACC_40)
// the widths only some builds take: defined (and named WGMMA) where this build's WG_N is one
#if WG_N == 144
DEFINE_WGMMA(144, 72, 72, 73, 74, WG_R72, WG_ACC_72)
#define WGMMA wgmma_m64n144k16
#elif WG_N == 192
DEFINE_WGMMA(192, 96, 96, 97, 98, WG_R96, WG_ACC_96)
#define WGMMA wgmma_m64n192k16
#elif WG_N == 208
DEFINE_WGMMA(208, 104, 104, 105, 106, WG_R104, WG_ACC_104)
#define WGMMA wgmma_m64n208k16
#elif WG_N == 200
DEFINE_WGMMA(200, 100, 100, 101, 102, WG_R100, WG_ACC_100)
#define WGMMA wgmma_m64n200k16
#elif WG_N == 136
DEFINE_WGMMA(136, 68, 68, 69, 70, WG_R68, WG_ACC_68)
#define WGMMA wgmma_m64n136k16
#elif WG_N == 152
DEFINE_WGMMA(152, 76, 76, 77, 78, WG_R76, WG_ACC_76)
#define WGMMA wgmma_m64n152k16
#elif WG_N == 168
DEFINE_WGMMA(168, 84, 84, 85, 86, WG_R84, WG_ACC_84)
#define WGMMA wgmma_m64n168k16
#elif WG_N == 176
DEFINE_WGMMA(176, 88, 88, 89, 90, WG_R88, WG_ACC_88)
#define WGMMA wgmma_m64n176k16
#elif WG_N == 184
DEFINE_WGMMA(184, 92, 92, 93, 94, WG_R92, WG_ACC_92)
#define WGMMA wgmma_m64n184k16
#elif WG_N == 256
#define WGMMA wgmma_m64n256k16
#elif WG_N == 160
#define WGMMA wgmma_m64n160k16
#elif WG_N == 80
#define WGMMA wgmma_m64n80k16
#else
#define WGMMA wgmma_m64n128k16
#endif

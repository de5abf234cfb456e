// Ceilings: the most this device computes per second, and the most it copies, measured
// by two kernels that do nothing else (backends/ceilings.py runs them once per device
// and run; the roofline of the figures and the tables' roof shares are drawn from them).
//
//   fma_loop  arithmetic alone: each work-item keeps ACCUMULATORS independent recurrences
//             x ← fma(x, a, b) in registers and runs `iterations` rounds of them, so
//             the device's fused multiply-add units never wait on a result (one chain
//             alone would wait the unit's latency at every step). It writes the sum
//             of its chains, one REAL per work-item, so nothing can be optimised away:
//             2 · ACCUMULATORS · iterations flops per work-item, next to no memory.
//             With |a| < 1 every chain stays bounded and tends to b / (1 − a).
//   copy      memory alone: dst = src, `n` VECTORs, one per work-item in a grid-stride
//             loop; 2 · sizeof(VECTOR) · n bytes read and written.
//   stream_*  BabelStream's four operations on `n` REALs, one element a work-item in a
//             grid-stride loop, as BabelStream writes them in both APIs: copy c = a,
//             mul b = s·c, add c = a + b, triad a = b + s·c (2, 2, 3 and 3 arrays
//             moved). `xbackend ceilings` runs them in each API on the same device, the
//             control beside every comparison of the two (docs/ceilings.md).
//   intensity mixbench's sweep: each work-item reads a REAL, runs ROUNDS fused
//             multiply-adds on it and writes it back: 2 · ROUNDS flops for
//             2 · sizeof(REAL) bytes, from memory-bound to compute-bound as ROUNDS grows.
//
// Compile-time parameters (-D options), each passed by Python (the defaults let the
// file compile on its own):
//   REAL           the element type of fma_loop: float or double
//   VECTOR         what copy moves at a time: float4 on a GPU (16 bytes, the widest
//                  load of a thread); float16 on a CPU (a cache line: Intel's OpenCL
//                  compiler makes one load and one store of it, where it turns float4s
//                  across work-items into shuffles: 40 against 5 GB/s on two Zen 5 cores)
//   CEILING_BLOCK  the work-items of a work-group, of both kernels
//   ACCUMULATORS   the independent chains of a work-item
//   ROUNDS         the fused multiply-adds of intensity on each element
//   XB_FP64        defined when REAL is double, to enable cl_khr_fp64
//
// The CUDA twin, kernels/cuda/ceilings.cu, has the same kernels line for line.

#ifdef XB_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
#ifndef REAL
#define REAL float
#endif
#ifndef VECTOR
#define VECTOR float4
#endif
#ifndef CEILING_BLOCK
#define CEILING_BLOCK 256
#endif
#ifndef ACCUMULATORS
#define ACCUMULATORS 8
#endif
#ifndef ROUNDS
#define ROUNDS 1
#endif

__kernel __attribute__((reqd_work_group_size(CEILING_BLOCK, 1, 1)))
void fma_loop(__global REAL* restrict out, const int iterations)
{
    const int thread = get_group_id(0) * CEILING_BLOCK + get_local_id(0);
    // 1 − 2^-10 and a multiple of 2^-6: exact in float and double alike, so the
    // host can compute the same recurrence (tests/test_ceilings.py).
    const REAL a = (REAL)0.9990234375;
    const REAL b = (REAL)(thread % 64 + 1) * (REAL)0.015625;
    REAL x[ACCUMULATORS];
#pragma unroll
    for (int j = 0; j < ACCUMULATORS; ++j)
        x[j] = (REAL)j;
#pragma unroll 16
    for (int i = 0; i < iterations; ++i) {
#pragma unroll
        for (int j = 0; j < ACCUMULATORS; ++j)
            x[j] = fma(x[j], a, b);
    }
    REAL sum = 0;
#pragma unroll
    for (int j = 0; j < ACCUMULATORS; ++j)
        sum += x[j];
    out[thread] = sum;
}

// copy: each work-item moves a VECTOR at a time, every work-item the neighbour of the
// next, so that loads and stores coalesce into whole cache lines.
__kernel __attribute__((reqd_work_group_size(CEILING_BLOCK, 1, 1)))
void copy(__global const VECTOR* restrict src, __global VECTOR* restrict dst, const int n)
{
    const int stride = get_num_groups(0) * CEILING_BLOCK;
    for (int i = get_group_id(0) * CEILING_BLOCK + get_local_id(0); i < n; i += stride)
        dst[i] = src[i];
}

// BabelStream's operations, one REAL a work-item in a grid-stride loop; `scalar` is 0.4.
__kernel __attribute__((reqd_work_group_size(CEILING_BLOCK, 1, 1)))
void stream_copy(__global const REAL* restrict a, __global REAL* restrict c, const int n)
{
    const int stride = get_num_groups(0) * CEILING_BLOCK;
    for (int i = get_group_id(0) * CEILING_BLOCK + get_local_id(0); i < n; i += stride)
        c[i] = a[i];
}

__kernel __attribute__((reqd_work_group_size(CEILING_BLOCK, 1, 1)))
void stream_mul(__global const REAL* restrict c, __global REAL* restrict b, const REAL scalar,
                const int n)
{
    const int stride = get_num_groups(0) * CEILING_BLOCK;
    for (int i = get_group_id(0) * CEILING_BLOCK + get_local_id(0); i < n; i += stride)
        b[i] = scalar * c[i];
}

__kernel __attribute__((reqd_work_group_size(CEILING_BLOCK, 1, 1)))
void stream_add(__global const REAL* restrict a, __global const REAL* restrict b,
                __global REAL* restrict c, const int n)
{
    const int stride = get_num_groups(0) * CEILING_BLOCK;
    for (int i = get_group_id(0) * CEILING_BLOCK + get_local_id(0); i < n; i += stride)
        c[i] = a[i] + b[i];
}

__kernel __attribute__((reqd_work_group_size(CEILING_BLOCK, 1, 1)))
void stream_triad(__global const REAL* restrict b, __global const REAL* restrict c,
                  __global REAL* restrict a, const REAL scalar, const int n)
{
    const int stride = get_num_groups(0) * CEILING_BLOCK;
    for (int i = get_group_id(0) * CEILING_BLOCK + get_local_id(0); i < n; i += stride)
        a[i] = b[i] + scalar * c[i];
}

// intensity: one element a work-item in a grid-stride loop, ROUNDS dependent fused
// multiply-adds on it (the wavefronts of a compute unit hide their latency), written back
// in place of where it was read from, in another array.
__kernel __attribute__((reqd_work_group_size(CEILING_BLOCK, 1, 1)))
void intensity(__global const REAL* restrict in, __global REAL* restrict out, const int n)
{
    const int stride = get_num_groups(0) * CEILING_BLOCK;
    for (int i = get_group_id(0) * CEILING_BLOCK + get_local_id(0); i < n; i += stride) {
        REAL x = in[i];
#pragma unroll
        for (int r = 0; r < ROUNDS; ++r)
            x = fma(x, (REAL)0.9990234375, (REAL)0.015625);
        out[i] = x;
    }
}

// Ceilings: the most this device computes per second, and the most it copies, measured
// by two kernels that do nothing else (backends/ceilings.py runs them once per device
// and run; the roofline of the figures and the tables' roof shares are drawn from them).
//
//   fma_loop  arithmetic alone: each thread keeps ACCUMULATORS independent recurrences
//             x ← fma(x, a, b) in registers and runs `iterations` rounds of them, so
//             the device's fused multiply-add units never wait on a result (one chain
//             alone would wait the unit's latency at every step). It writes the sum
//             of its chains, one REAL per thread, so nothing can be optimised away:
//             2 · ACCUMULATORS · iterations flops per thread, next to no memory.
//             With |a| < 1 every chain stays bounded and tends to b / (1 − a).
//   copy      memory alone: dst = src, `n` VECTORs, one per thread in a grid-stride
//             loop; 2 · sizeof(VECTOR) · n bytes read and written.
//   stream_*  BabelStream's four operations on `n` REALs, one element a thread in a
//             grid-stride loop, as BabelStream writes them in both APIs: copy c = a,
//             mul b = s·c, add c = a + b, triad a = b + s·c (2, 2, 3 and 3 arrays
//             moved). `xbackend ceilings` runs them in each API on the same device, the
//             control beside every comparison of the two (docs/ceilings.md).
//   intensity mixbench's sweep: each thread reads a REAL, runs ROUNDS fused multiply-adds
//             on it and writes it back: 2 · ROUNDS flops for 2 · sizeof(REAL) bytes, from
//             memory-bound to compute-bound as ROUNDS grows.
//
// Compile-time parameters (-D options), each passed by Python (the defaults let the
// file compile on its own):
//   REAL           the element type of fma_loop: float or double
//   VECTOR         what copy moves at a time: float4 on a GPU (16 bytes, the widest
//                  load of a thread); an OpenCL CPU device gets float16 (see the twin)
//   CEILING_BLOCK  the threads of a block, of both kernels
//   ACCUMULATORS   the independent chains of a thread
//   ROUNDS         the fused multiply-adds of intensity on each element
//
// The OpenCL twin, kernels/opencl/ceilings.cl, has the same kernels line for line.

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

extern "C" __global__ __launch_bounds__(CEILING_BLOCK)
void fma_loop(REAL* __restrict__ out, const int iterations)
{
    const int thread = blockIdx.x * CEILING_BLOCK + threadIdx.x;
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

// copy: each thread moves a VECTOR at a time, every thread of a warp the neighbour
// of the next, so that loads and stores coalesce into whole cache lines.
extern "C" __global__ __launch_bounds__(CEILING_BLOCK)
void copy(const VECTOR* __restrict__ src, VECTOR* __restrict__ dst, const int n)
{
    const int stride = gridDim.x * CEILING_BLOCK;
    for (int i = blockIdx.x * CEILING_BLOCK + threadIdx.x; i < n; i += stride)
        dst[i] = src[i];
}

// BabelStream's operations, one REAL a thread in a grid-stride loop; `scalar` is 0.4.
extern "C" __global__ __launch_bounds__(CEILING_BLOCK)
void stream_copy(const REAL* __restrict__ a, REAL* __restrict__ c, const int n)
{
    const int stride = gridDim.x * CEILING_BLOCK;
    for (int i = blockIdx.x * CEILING_BLOCK + threadIdx.x; i < n; i += stride)
        c[i] = a[i];
}

extern "C" __global__ __launch_bounds__(CEILING_BLOCK)
void stream_mul(const REAL* __restrict__ c, REAL* __restrict__ b, const REAL scalar,
                const int n)
{
    const int stride = gridDim.x * CEILING_BLOCK;
    for (int i = blockIdx.x * CEILING_BLOCK + threadIdx.x; i < n; i += stride)
        b[i] = scalar * c[i];
}

extern "C" __global__ __launch_bounds__(CEILING_BLOCK)
void stream_add(const REAL* __restrict__ a, const REAL* __restrict__ b, REAL* __restrict__ c,
                const int n)
{
    const int stride = gridDim.x * CEILING_BLOCK;
    for (int i = blockIdx.x * CEILING_BLOCK + threadIdx.x; i < n; i += stride)
        c[i] = a[i] + b[i];
}

extern "C" __global__ __launch_bounds__(CEILING_BLOCK)
void stream_triad(const REAL* __restrict__ b, const REAL* __restrict__ c, REAL* __restrict__ a,
                  const REAL scalar, const int n)
{
    const int stride = gridDim.x * CEILING_BLOCK;
    for (int i = blockIdx.x * CEILING_BLOCK + threadIdx.x; i < n; i += stride)
        a[i] = b[i] + scalar * c[i];
}

// intensity: one element a thread in a grid-stride loop, ROUNDS dependent fused
// multiply-adds on it (the warps of an SM hide their latency), written back in place of
// where it was read from, in another array.
extern "C" __global__ __launch_bounds__(CEILING_BLOCK)
void intensity(const REAL* __restrict__ in, REAL* __restrict__ out, const int n)
{
    const int stride = gridDim.x * CEILING_BLOCK;
    for (int i = blockIdx.x * CEILING_BLOCK + threadIdx.x; i < n; i += stride) {
        REAL x = in[i];
#pragma unroll
        for (int r = 0; r < ROUNDS; ++r)
            x = fma(x, (REAL)0.9990234375, (REAL)0.015625);
        out[i] = x;
    }
}

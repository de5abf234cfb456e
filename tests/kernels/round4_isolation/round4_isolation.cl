// Kernels for tests/test_round4_isolation.py: a correct one, one that never returns, one
// that writes far outside C, and the correct one behind a preprocessor bomb. Run natively,
// all but the first hang or kill the process that runs them: xbackend measures a user's
// kernels in a process of their own for that reason (xbackend/isolation.py).

// Built with -DISO_BOMB (the variant iso_bomb): a preprocessor bomb. ISO_X30 expands to
// 2^30 terms "0 +", which the #if below evaluates, a term at a time, for minutes; the
// compiler's memory grows as it goes (about 150 MB a second), so a test gives it seconds.
#ifdef ISO_BOMB
#define ISO_X0 0 +
#define ISO_X1 ISO_X0 ISO_X0
#define ISO_X2 ISO_X1 ISO_X1
#define ISO_X3 ISO_X2 ISO_X2
#define ISO_X4 ISO_X3 ISO_X3
#define ISO_X5 ISO_X4 ISO_X4
#define ISO_X6 ISO_X5 ISO_X5
#define ISO_X7 ISO_X6 ISO_X6
#define ISO_X8 ISO_X7 ISO_X7
#define ISO_X9 ISO_X8 ISO_X8
#define ISO_X10 ISO_X9 ISO_X9
#define ISO_X11 ISO_X10 ISO_X10
#define ISO_X12 ISO_X11 ISO_X11
#define ISO_X13 ISO_X12 ISO_X12
#define ISO_X14 ISO_X13 ISO_X13
#define ISO_X15 ISO_X14 ISO_X14
#define ISO_X16 ISO_X15 ISO_X15
#define ISO_X17 ISO_X16 ISO_X16
#define ISO_X18 ISO_X17 ISO_X17
#define ISO_X19 ISO_X18 ISO_X18
#define ISO_X20 ISO_X19 ISO_X19
#define ISO_X21 ISO_X20 ISO_X20
#define ISO_X22 ISO_X21 ISO_X21
#define ISO_X23 ISO_X22 ISO_X22
#define ISO_X24 ISO_X23 ISO_X23
#define ISO_X25 ISO_X24 ISO_X24
#define ISO_X26 ISO_X25 ISO_X25
#define ISO_X27 ISO_X26 ISO_X26
#define ISO_X28 ISO_X27 ISO_X27
#define ISO_X29 ISO_X28 ISO_X28
#define ISO_X30 ISO_X29 ISO_X29
#if ISO_X30 0
#endif
#endif

__kernel void matmul_good(__global float* C, __global const float* A,
                          __global const float* B, int hA, int wA, int wB)
{
    int col = get_global_id(0);
    int row = get_global_id(1);
    if (row >= hA || col >= wB)
        return;
    float sum = 0.0f;
    for (int k = 0; k < wA; ++k)
        sum += A[row * wA + k] * B[k * wB + col];
    C[row * wB + col] = sum;
}

// Waits for K to be 0, which no launch gives (xbackend runs no product with K = 0). The
// volatile store is a side effect each trip, so the compiler may not assume the loop ends
// and remove it.
__kernel void matmul_hang(__global float* C, __global const float* A,
                          __global const float* B, int hA, int wA, int wB)
{
    int col = get_global_id(0);
    int row = get_global_id(1);
    if (row >= hA || col >= wB)
        return;
    volatile __global float* out = C;
    int trips = 0;
    while (wA != 0) {
        out[row * wB + col] = (float)trips;
        trips = (trips + 1) & 0xffff;
    }
    C[row * wB + col] = A[row * wA] * B[col];
}

// Writes each element 100 million elements past where it belongs: 400 MB apart, far
// outside any buffer, which on a CPU's OpenCL runtime is a segmentation fault.
__kernel void matmul_crash(__global float* C, __global const float* A,
                           __global const float* B, int hA, int wA, int wB)
{
    int col = get_global_id(0);
    int row = get_global_id(1);
    if (row >= hA || col >= wB)
        return;
    float sum = 0.0f;
    for (int k = 0; k < wA; ++k)
        sum += A[row * wA + k] * B[k * wB + col];
    long gid = (long)row * wB + col + 1;
    C[gid * 100000000L] = sum;
}

// Two kernels that trade generality for fewer checks, in one file: every build defines
// TS, and the builds of mm_width define WIDTH too.

#ifdef WIDTH
// mm_width: C = A·B for WIDTH×WIDTH matrices, WIDTH fixed when the kernel is built
// (-DWIDTH=...), so the loop bound is a constant and no size is passed at all.

__kernel void mm_width(__global const float* A, __global const float* B, __global float* C)
{
    int row = get_global_id(1);
    int col = get_global_id(0);
    if (row >= WIDTH || col >= WIDTH)
        return;
    float sum = 0.0f;
    for (int k = 0; k < WIDTH; ++k)
        sum += A[row * WIDTH + k] * B[k * WIDTH + col];
    C[row * WIDTH + col] = sum;
}
#endif

// mm_kmultiple: any M and N, but K a multiple of TS (the manifest's rule), so every
// TS-wide step along K is whole: only rows past M and columns past N need a guard.
__kernel void mm_kmultiple(int M, int N, int K, __global const float* A,
                           __global const float* B, __global float* C)
{
    __local float As[TS][TS];
    __local float Bs[TS][TS];

    int tx = get_local_id(0), ty = get_local_id(1);
    int row = get_group_id(1) * TS + ty;
    int col = get_group_id(0) * TS + tx;

    float sum = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TS) {       // K / TS whole steps
        As[ty][tx] = row < M ? A[row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = col < N ? B[(k0 + ty) * N + col] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TS; ++k)
            sum += As[ty][k] * Bs[k][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M && col < N)
        C[row * N + col] = sum;
}

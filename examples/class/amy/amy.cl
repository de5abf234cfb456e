// Amy: the work-group is BLOCK_SIZE x BLOCK_SIZE, so I told the compiler.

__kernel __attribute__((reqd_work_group_size(BLOCK_SIZE, BLOCK_SIZE, 1)))
void amy_gemm_naive(__global const float *A, __global const float *B, __global float *C,
                    int M, int N, int K)
{
    const int row = get_global_id(1);
    const int col = get_global_id(0);
    if (row >= M || col >= N)
        return;
    const __global float *a = A + row * K;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += a[k] * B[k * N + col];
    C[row * N + col] = sum;
}

__kernel __attribute__((reqd_work_group_size(BLOCK_SIZE, BLOCK_SIZE, 1)))
void amy_gemm_tiled(__global const float *A, __global const float *B, __global float *C,
                    int M, int N, int K)
{
    __local float a[BLOCK_SIZE][BLOCK_SIZE];
    __local float b[BLOCK_SIZE][BLOCK_SIZE];
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int row = get_global_id(1), col = get_global_id(0);
    float sum = 0.0f;
    for (int t = 0; t < K; t += BLOCK_SIZE) {
        a[ty][tx] = (row < M && t + tx < K) ? A[row * K + t + tx] : 0.0f;
        b[ty][tx] = (t + ty < K && col < N) ? B[(t + ty) * N + col] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < BLOCK_SIZE; ++k)
            sum += a[ty][k] * b[k][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M && col < N)
        C[row * N + col] = sum;
}

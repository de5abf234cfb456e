// Alice: C = A * B, A is M x K, B is K x N, all row-major.

__kernel void naive_mm(__global const float *A, __global const float *B,
                       __global float *C, int M, int N, int K)
{
    int row = get_global_id(1);
    int col = get_global_id(0);
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; k++)
            acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = acc;
    }
}

__kernel void tiled_mm(__global const float *A, __global const float *B,
                       __global float *C, int M, int N, int K)
{
    __local float sA[BLOCK_SIZE][BLOCK_SIZE];
    __local float sB[BLOCK_SIZE][BLOCK_SIZE];
    int lx = get_local_id(0), ly = get_local_id(1);
    int row = get_global_id(1), col = get_global_id(0);
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BLOCK_SIZE) {
        // load one tile of each, zeros past the edges
        sA[ly][lx] = (row < M && k0 + lx < K) ? A[row * K + k0 + lx] : 0.0f;
        sB[ly][lx] = (k0 + ly < K && col < N) ? B[(k0 + ly) * N + col] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < BLOCK_SIZE; k++)
            acc += sA[ly][k] * sB[k][lx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M && col < N)
        C[row * N + col] = acc;
}

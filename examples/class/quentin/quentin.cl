// Q. -- my groups are 32 rows tall (I tuned that on my GPU)

__kernel void qmm(__global const float *A, __global const float *B, __global float *C,
                  int M, int N, int K)
{
    int col = get_group_id(0) * BLOCK_SIZE + get_local_id(0);
    int row = get_group_id(1) * 32 + get_local_id(1);
    if (row < M && col < N) {
        float s = 0;
        for (int k = 0; k < K; k++)
            s += A[row * K + k] * B[k * N + col];
        C[row * N + col] = s;
    }
}

__kernel void qmm_tiled(__global const float *A, __global const float *B, __global float *C,
                        int M, int N, int K)
{
    __local float a[BLOCK_SIZE][BLOCK_SIZE], b[BLOCK_SIZE][BLOCK_SIZE];
    int x = get_local_id(0), y = get_local_id(1);
    int col = get_group_id(0) * BLOCK_SIZE + x;
    int row = get_group_id(1) * BLOCK_SIZE + y;
    float s = 0;
    for (int k0 = 0; k0 < K; k0 += BLOCK_SIZE) {
        a[y][x] = (row < M && k0 + x < K) ? A[row * K + k0 + x] : 0;
        b[y][x] = (k0 + y < K && col < N) ? B[(k0 + y) * N + col] : 0;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < BLOCK_SIZE; k++)
            s += a[y][k] * b[k][x];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M && col < N)
        C[row * N + col] = s;
}

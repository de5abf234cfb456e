// dimension 0 = row of C, dimension 1 = column of C (like (i, j) in maths)

__kernel void uma_mm(__global const float *A, __global const float *B, __global float *C,
                     int M, int N, int K)
{
    int i = get_global_id(0);
    int j = get_global_id(1);
    if (i < M && j < N) {
        float cij = 0.0f;
        for (int k = 0; k < K; k++)
            cij += A[i * K + k] * B[k * N + j];
        C[i * N + j] = cij;
    }
}

__kernel void uma_mm_tiled(__global const float *A, __global const float *B, __global float *C,
                           int M, int N, int K)
{
    __local float At[BLOCK_SIZE][BLOCK_SIZE];
    __local float Bt[BLOCK_SIZE][BLOCK_SIZE];
    int li = get_local_id(0), lj = get_local_id(1);
    int i = get_group_id(0) * BLOCK_SIZE + li;
    int j = get_group_id(1) * BLOCK_SIZE + lj;
    float cij = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BLOCK_SIZE) {
        At[li][lj] = (i < M && k0 + lj < K) ? A[i * K + k0 + lj] : 0.0f;
        Bt[li][lj] = (k0 + li < K && j < N) ? B[(k0 + li) * N + j] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < BLOCK_SIZE; k++)
            cij += At[li][k] * Bt[k][lj];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (i < M && j < N)
        C[i * N + j] = cij;
}

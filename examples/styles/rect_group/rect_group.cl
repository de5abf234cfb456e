// C = A·B (A M×K, B K×N, C M×N, row-major) with rectangular work-groups: BX work-items
// along the columns of C by BY along its rows (BX = 32, BY = 4 by default).

__kernel void rect_naive(int M, int N, int K, __global const float* A,
                         __global const float* B, __global float* C)
{
    int col = get_group_id(0) * BX + get_local_id(0);
    int row = get_group_id(1) * BY + get_local_id(1);
    if (row >= M || col >= N)
        return;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += A[row * K + k] * B[k * N + col];
    C[row * N + col] = sum;
}

// The group's BY×BX piece of C needs BY rows of A and BX columns of B. It walks K in
// slabs BX deep: a BY×BX slab of A (one element per work-item) and a BX×BX slab of B
// (rows ty, ty + BY, ty + 2·BY, ... per work-item).
__kernel void rect_tiled(int M, int N, int K, __global const float* A,
                         __global const float* B, __global float* C)
{
    __local float As[BY][BX];
    __local float Bs[BX][BX];

    int tx = get_local_id(0), ty = get_local_id(1);
    int col = get_group_id(0) * BX + tx;
    int row = get_group_id(1) * BY + ty;

    float sum = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BX) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
        for (int r = ty; r < BX; r += BY)
            Bs[r][tx] = (k0 + r < K && col < N) ? B[(k0 + r) * N + col] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < BX; ++k)
            sum += As[ty][k] * Bs[k][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M && col < N)
        C[row * N + col] = sum;
}

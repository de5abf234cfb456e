// C = A·B in two launches (A M×K, B K×N, C M×N, row-major):
//   1. transpose_b copies B into BT, N rows of K (BT[j*K + k] = B[k*N + j]);
//   2. mm_rows gives each work-item one row of A and one row of BT to multiply: both
//      are read along consecutive addresses.

// Launch 1: one work-item per element of B (x along B's columns, y down its rows).
__kernel void transpose_b(int K, int N, __global const float* B, __global float* BT)
{
    int j = get_group_id(0) * TS + get_local_id(0);    // column of B = row of BT
    int k = get_group_id(1) * TS + get_local_id(1);    // row of B = column of BT
    if (k < K && j < N)
        BT[j * K + k] = B[k * N + j];
}

// Launch 2: one work-item per element of C.
__kernel void mm_rows(int M, int N, int K, __global const float* A,
                      __global const float* BT, __global float* C)
{
    int i = get_group_id(1) * TS + get_local_id(1);    // row of C
    int j = get_group_id(0) * TS + get_local_id(0);    // column of C
    if (i >= M || j >= N)
        return;
    __global const float* a = A + i * K;               // row i of A
    __global const float* b = BT + j * K;              // row j of BT = column j of B
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += a[k] * b[k];
    C[i * N + j] = sum;
}

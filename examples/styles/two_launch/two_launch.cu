// C = A·B in two launches (A M×K, B K×N, C M×N, row-major):
//   1. transpose_b copies B into BT, N rows of K (BT[j*K + k] = B[k*N + j]);
//   2. mm_rows gives each thread one row of A and one row of BT to multiply: both
//      are read along consecutive addresses.

// Launch 1: one thread per element of B (x along B's columns, y down its rows).
__global__ void transpose_b(int K, int N, const float* B, float* BT)
{
    int j = blockIdx.x * TS + threadIdx.x;     // column of B = row of BT
    int k = blockIdx.y * TS + threadIdx.y;     // row of B = column of BT
    if (k < K && j < N)
        BT[j * K + k] = B[k * N + j];
}

// Launch 2: one thread per element of C.
__global__ void mm_rows(int M, int N, int K, const float* A, const float* BT, float* C)
{
    int i = blockIdx.y * TS + threadIdx.y;     // row of C
    int j = blockIdx.x * TS + threadIdx.x;     // column of C
    if (i >= M || j >= N)
        return;
    const float* a = A + i * K;                // row i of A
    const float* b = BT + j * K;               // row j of BT = column j of B
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += a[k] * b[k];
    C[i * N + j] = sum;
}

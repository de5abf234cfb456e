// C = A·B with every matrix column-major, as BLAS and Fortran store them:
//   A (M×K): element (i, k) at A[k*M + i]     B (K×N): (k, j) at B[j*K + k]
//   C (M×N): element (i, j) at C[j*M + i]
// So x runs down the rows: neighbouring work-items touch neighbouring addresses.

__kernel void colmajor_naive(int M, int N, int K, __global const float* A,
                             __global const float* B, __global float* C)
{
    int i = get_global_id(0);                          // row of C
    int j = get_global_id(1);                          // column of C
    if (i >= M || j >= N)
        return;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += A[k * M + i] * B[j * K + k];            // A down column k, B down column j
    C[j * M + i] = sum;
}

// Tiled: the group makes the TS×TS square of C at rows i0.., columns j0... For each
// step along k it copies A's TS rows × TS columns (As[k][i]: down columns of A) and
// B's TS rows × TS columns (Bs[j][k]: down columns of B), both with x running along
// memory, so both copies are coalesced.
__kernel void colmajor_tiled(int M, int N, int K, __global const float* A,
                             __global const float* B, __global float* C)
{
    __local float As[TS][TS];                  // As[kk][ii] = A(i0 + ii, k0 + kk)
    __local float Bs[TS][TS];                  // Bs[jj][kk] = B(k0 + kk, j0 + jj)

    int tx = get_local_id(0), ty = get_local_id(1);
    int i0 = get_group_id(0) * TS, j0 = get_group_id(1) * TS;
    int i = i0 + tx, j = j0 + ty;              // this work-item's element of C

    float sum = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TS) {
        As[ty][tx] = (i < M && k0 + ty < K) ? A[(k0 + ty) * M + i] : 0.0f;
        Bs[ty][tx] = (j < N && k0 + tx < K) ? B[j * K + k0 + tx] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < TS; ++kk)
            sum += As[kk][tx] * Bs[ty][kk];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (i < M && j < N)
        C[j * M + i] = sum;
}

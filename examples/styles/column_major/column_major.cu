// C = A·B with every matrix column-major, as BLAS and Fortran store them:
//   A (M×K): element (i, k) at A[k*M + i]     B (K×N): (k, j) at B[j*K + k]
//   C (M×N): element (i, j) at C[j*M + i]
// So x runs down the rows: neighbouring threads touch neighbouring addresses.

__global__ void colmajor_naive(int M, int N, int K, const float* A, const float* B, float* C)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;     // row of C
    int j = blockIdx.y * blockDim.y + threadIdx.y;     // column of C
    if (i >= M || j >= N)
        return;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += A[k * M + i] * B[j * K + k];            // A down column k, B down column j
    C[j * M + i] = sum;
}

// Tiled: the block makes the TS×TS square of C at rows i0.., columns j0... For each
// step along k it copies A's TS rows × TS columns (As[k][i]: down columns of A) and
// B's TS rows × TS columns (Bs[j][k]: down columns of B), both with x running along
// memory, so both copies are coalesced.
__global__ void colmajor_tiled(int M, int N, int K, const float* A, const float* B, float* C)
{
    __shared__ float As[TS][TS];               // As[kk][ii] = A(i0 + ii, k0 + kk)
    __shared__ float Bs[TS][TS];               // Bs[jj][kk] = B(k0 + kk, j0 + jj)

    int tx = threadIdx.x, ty = threadIdx.y;
    int i0 = blockIdx.x * TS, j0 = blockIdx.y * TS;
    int i = i0 + tx, j = j0 + ty;              // this thread's element of C

    float sum = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TS) {
        As[ty][tx] = (i < M && k0 + ty < K) ? A[(k0 + ty) * M + i] : 0.0f;
        Bs[ty][tx] = (j < N && k0 + tx < K) ? B[j * K + k0 + tx] : 0.0f;
        __syncthreads();
        for (int kk = 0; kk < TS; ++kk)
            sum += As[kk][tx] * Bs[ty][kk];
        __syncthreads();
    }
    if (i < M && j < N)
        C[j * M + i] = sum;
}

// C = A·B where B arrives transposed: Bt is N×K, row j of Bt is column j of B. So
// C[i][j] = sum over k of A[i*K + k] * Bt[j*K + k]: a row of A against a row of Bt.

__global__ void mm_bt_naive(int M, int N, int K, const float* A, const float* Bt, float* C)
{
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= M || j >= N)
        return;
    const float* a = A + i * K;                // row i of A
    const float* b = Bt + j * K;               // row j of Bt = column j of B
    float dot = 0.0f;
    for (int k = 0; k < K; ++k)
        dot += a[k] * b[k];
    C[i * N + j] = dot;
}

// Tiled: the block stages TS columns of k for its TS rows of A and its TS rows of Bt.
// Bt's square is stored turned, Bs[k][j], so the inner loop reads it along a row, as in
// the ordinary tiled kernel; the extra column of padding keeps the turned stores from
// landing in the same shared-memory bank.
__global__ void mm_bt_tiled(int M, int N, int K, const float* A, const float* Bt, float* C)
{
    __shared__ float As[TS][TS];
    __shared__ float Bs[TS][TS + 1];

    int tx = threadIdx.x, ty = threadIdx.y;
    int i = blockIdx.y * TS + ty;              // row of C this thread computes
    int j = blockIdx.x * TS + tx;              // column of C this thread computes
    int jLoad = blockIdx.x * TS + ty;          // row of Bt this thread copies from

    float dot = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TS) {
        int k = k0 + tx;                       // both copies read along k: coalesced
        As[ty][tx] = (i < M && k < K) ? A[i * K + k] : 0.0f;
        Bs[tx][ty] = (jLoad < N && k < K) ? Bt[jLoad * K + k] : 0.0f;
        __syncthreads();
        for (int kk = 0; kk < TS; ++kk)
            dot += As[ty][kk] * Bs[kk][tx];
        __syncthreads();
    }
    if (i < M && j < N)
        C[i * N + j] = dot;
}

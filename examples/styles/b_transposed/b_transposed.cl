// C = A·B where B arrives transposed: Bt is N×K, row j of Bt is column j of B. So
// C[i][j] = sum over k of A[i*K + k] * Bt[j*K + k]: a row of A against a row of Bt.

__kernel void mm_bt_naive(int M, int N, int K, __global const float* A,
                          __global const float* Bt, __global float* C)
{
    int i = get_global_id(1);
    int j = get_global_id(0);
    if (i >= M || j >= N)
        return;
    __global const float* a = A + i * K;       // row i of A
    __global const float* b = Bt + j * K;      // row j of Bt = column j of B
    float dot = 0.0f;
    for (int k = 0; k < K; ++k)
        dot += a[k] * b[k];
    C[i * N + j] = dot;
}

// Tiled: the group stages TS columns of k for its TS rows of A and its TS rows of Bt.
// Bt's square is stored turned, Bs[k][j], so the inner loop reads it along a row, as in
// the ordinary tiled kernel; the extra column of padding keeps the turned stores from
// landing in the same local-memory bank.
__kernel void mm_bt_tiled(int M, int N, int K, __global const float* A,
                          __global const float* Bt, __global float* C)
{
    __local float As[TS][TS];
    __local float Bs[TS][TS + 1];

    int tx = get_local_id(0), ty = get_local_id(1);
    int i = get_group_id(1) * TS + ty;         // row of C this work-item computes
    int j = get_group_id(0) * TS + tx;         // column of C this work-item computes
    int jLoad = get_group_id(0) * TS + ty;     // row of Bt this work-item copies from

    float dot = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TS) {
        int k = k0 + tx;                       // both copies read along k: coalesced
        As[ty][tx] = (i < M && k < K) ? A[i * K + k] : 0.0f;
        Bs[tx][ty] = (jLoad < N && k < K) ? Bt[jLoad * K + k] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < TS; ++kk)
            dot += As[ty][kk] * Bs[kk][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (i < M && j < N)
        C[i * N + j] = dot;
}

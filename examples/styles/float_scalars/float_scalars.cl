// SGEMM's contract: C = alpha·(A·B) + beta·C (A M×K, B K×N, C M×N, row-major).
// As in BLAS, beta == 0 means "C is output only": it is then never read, so whatever
// C held before (even NaN) cannot leak into the result (0 · NaN would be NaN).

float scale_and_add(float alpha, float ab, float beta, __global const float* c)
{
    return beta == 0.0f ? alpha * ab : alpha * ab + beta * (*c);
}

__kernel void sgemm_naive(int M, int N, int K, float alpha, __global const float* A,
                          __global const float* B, float beta, __global float* C)
{
    int row = get_global_id(1);
    int col = get_global_id(0);
    if (row >= M || col >= N)
        return;
    float ab = 0.0f;
    for (int k = 0; k < K; ++k)
        ab += A[row * K + k] * B[k * N + col];
    __global float* c = C + row * N + col;
    *c = scale_and_add(alpha, ab, beta, c);
}

__kernel void sgemm_tiled(int M, int N, int K, float alpha, __global const float* A,
                          __global const float* B, float beta, __global float* C)
{
    __local float As[TS][TS];
    __local float Bs[TS][TS];

    int tx = get_local_id(0), ty = get_local_id(1);
    int row = get_group_id(1) * TS + ty;
    int col = get_group_id(0) * TS + tx;

    float ab = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TS) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TS; ++k)
            ab += As[ty][k] * Bs[k][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M && col < N) {
        __global float* c = C + row * N + col;
        *c = scale_and_add(alpha, ab, beta, c);
    }
}

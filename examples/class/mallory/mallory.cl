// accumulate straight into C, no temporary needed
__kernel void mm_direct(__global float *C, __global const float *A, __global const float *B,
                        int M, int N, int K)
{
    int row = get_global_id(1), col = get_global_id(0);
    if (row < M && col < N)
        for (int k = 0; k < K; k++)
            C[row * N + col] += A[row * K + k] * B[k * N + col];
}

__kernel void mm_blocked(__global float *C, __global const float *A, __global const float *B,
                         int M, int N, int K)
{
    __local float a[TILE][TILE], b[TILE][TILE];
    int tr = get_local_id(1), tc = get_local_id(0);
    int row = get_group_id(1) * TILE + tr, col = get_group_id(0) * TILE + tc;
    float s = 0.0f;
    for (int kt = 0; kt < (K + TILE - 1) / TILE; kt++) {
        int ka = kt * TILE + tc, kb = kt * TILE + tr;
        a[tr][tc] = (row < M && ka < K) ? A[row * K + ka] : 0.0f;
        b[tr][tc] = (kb < K && col < N) ? B[kb * N + col] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TILE; k++)
            s += a[tr][k] * b[k][tc];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M && col < N)
        C[row * N + col] = s;
}

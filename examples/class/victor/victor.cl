#define TILE 16

__kernel void mm0(__global float *C, __global float *A, __global float *B, int M, int K, int N)
{
    int c = get_global_id(0), r = get_global_id(1);
    if (r >= M) return;
    if (c >= N) return;
    float x = 0;
    for (int i = 0; i < K; i++) x += A[r * K + i] * B[i * N + c];
    C[r * N + c] = x;
}

__kernel void mm1(__global float *C, __global float *A, __global float *B, int M, int K, int N)
{
    __local float sa[TILE][TILE], sb[TILE][TILE];
    int tx = get_local_id(0), ty = get_local_id(1);
    int c = get_group_id(0) * TILE + tx, r = get_group_id(1) * TILE + ty;
    float x = 0;
    for (int t = 0; t < K; t += TILE) {
        sa[ty][tx] = 0;
        sb[ty][tx] = 0;
        if (r < M && t + tx < K) sa[ty][tx] = A[r * K + t + tx];
        if (c < N && t + ty < K) sb[ty][tx] = B[(t + ty) * N + c];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int i = 0; i < TILE; i++) x += sa[ty][i] * sb[i][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (r < M && c < N) C[r * N + c] = x;
}

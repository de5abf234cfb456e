// One output per work-item; every size and index 64 bits wide.
__kernel void mm_wide(__global const float *A, __global const float *B, __global float *C,
                      ulong M, ulong N, ulong K)
{
    ulong col = get_global_id(0);
    ulong row = get_global_id(1);
    if (row >= M || col >= N)
        return;
    float sum = 0.0f;
    for (ulong k = 0; k < K; ++k)
        sum += A[row * K + k] * B[k * N + col];
    C[row * N + col] = sum;
}

// One output per work-item; its sizes int.
__kernel void mm_mixed(__global const float *A, __global const float *B, __global float *C,
                      int M, int N, int K)
{
    int col = get_global_id(0);
    int row = get_global_id(1);
    if (row >= M || col >= N)
        return;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += A[row * K + k] * B[k * N + col];
    C[row * N + col] = sum;
}

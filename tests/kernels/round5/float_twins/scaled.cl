// C = alpha · A·B, alpha a float here and a double in scaled.cu.
__kernel void mm_scaled(__global const float* A, __global const float* B, __global float* C,
                        int M, int N, int K, float alpha)
{
    int col = get_global_id(0);
    int row = get_global_id(1);
    if (row >= M || col >= N)
        return;
    float sum = 0.0f;
    for (int p = 0; p < K; ++p)
        sum += A[row * K + p] * B[p * N + col];
    C[row * N + col] = alpha * sum;
}

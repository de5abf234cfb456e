// C = alpha · A·B, alpha a double here and a float in scaled.cl.
__global__ void mm_scaled(const float* A, const float* B, float* C,
                          int M, int N, int K, double alpha)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N)
        return;
    float sum = 0.0f;
    for (int p = 0; p < K; ++p)
        sum += A[row * K + p] * B[p * N + col];
    C[row * N + col] = alpha * sum;
}

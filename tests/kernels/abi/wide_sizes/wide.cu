// One output per thread; every size and index 64 bits wide.
__global__ void mm_wide(const float *A, const float *B, float *C, size_t M, size_t N, size_t K)
{
    size_t col = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t row = (size_t)blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N)
        return;
    float sum = 0.0f;
    for (size_t k = 0; k < K; ++k)
        sum += A[row * K + k] * B[k * N + col];
    C[row * N + col] = sum;
}

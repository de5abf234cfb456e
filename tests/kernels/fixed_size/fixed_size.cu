// C = A·B for square matrices of SIZE×SIZE only: the size is compiled in (-DSIZE=...),
// and the kernel takes nothing but the three matrices.
__global__ void mm_fixed(const float* A, const float* B, float* C)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= SIZE || col >= SIZE)
        return;
    float sum = 0.0f;
    for (int k = 0; k < SIZE; ++k)
        sum += A[row * SIZE + k] * B[k * SIZE + col];
    C[row * SIZE + col] = sum;
}

__global__ void mult(float *C, const float *A, const float *B,
                     int rows, int cols, int depth)
{
    int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows && c < cols) {
        float acc = 0.0f;
        for (int d = 0; d < depth; d++)
            acc += A[r * depth + d] * B[d * cols + c];
        C[r * cols + c] = acc;
    }
}

__global__ void mult_tiles(float *C, const float *A, const float *B,
                           int rows, int cols, int depth)
{
    __shared__ float As[BLOCK_SIZE][BLOCK_SIZE];
    __shared__ float Bs[BLOCK_SIZE][BLOCK_SIZE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int r = blockIdx.y * BLOCK_SIZE + ty;
    int c = blockIdx.x * BLOCK_SIZE + tx;
    float acc = 0.0f;
    for (int t = 0; t < depth; t += BLOCK_SIZE) {
        // only load what is inside the matrices
        if (r < rows && t + tx < depth)
            As[ty][tx] = A[r * depth + t + tx];
        if (t + ty < depth && c < cols)
            Bs[ty][tx] = B[(t + ty) * cols + c];
        __syncthreads();
        for (int d = 0; d < BLOCK_SIZE; d++)
            acc += As[ty][d] * Bs[d][tx];
        __syncthreads();
    }
    if (r < rows && c < cols)
        C[r * cols + c] = acc;
}

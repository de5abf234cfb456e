// row of A dot column of B
__global__ void matMul(const float *A, const float *B, float *C,
                       int numRows, int numCols, int inner)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < numRows && col < numCols) {
        float dot = 0.0f;
        for (int k = 0; k < inner; k++)
            dot += A[row * inner + k] * B[col * inner + k];
        C[row * numCols + col] = dot;
    }
}

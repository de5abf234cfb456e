// Sam's submission

__global__ void simple_matmul(const float *A, const float *B, float *C,
                              int numARows, int numAColumns, int numBColumns)
{
    int Row = blockIdx.y * blockDim.y + threadIdx.y;
    int Col = blockIdx.x * blockDim.x + threadIdx.x;
    if ((Row < numARows) && (Col < numBColumns)) {
        float Cvalue = 0.0f;
        for (int k = 0; k < numAColumns; ++k)
            Cvalue += A[Row * numAColumns + k] * B[k * numBColumns + Col];
        C[Row * numBColumns + Col] = Cvalue;
    }
}

__global__ void shared_matmul(const float *A, const float *B, float *C,
                              int numARows, int numAColumns, int numBColumns)
{
    __shared__ float ds_A[BLOCK_SIZE][BLOCK_SIZE];
    __shared__ float ds_B[BLOCK_SIZE][BLOCK_SIZE];
    int bx = blockIdx.x, by = blockIdx.y;
    int tx = threadIdx.x, ty = threadIdx.y;
    int Row = by * BLOCK_SIZE + ty;
    int Col = bx * BLOCK_SIZE + tx;
    float Cvalue = 0.0f;

    for (int p = 0; p < (numAColumns - 1) / BLOCK_SIZE + 1; ++p) {
        if (Row < numARows && p * BLOCK_SIZE + tx < numAColumns)
            ds_A[ty][tx] = A[Row * numAColumns + p * BLOCK_SIZE + tx];
        else
            ds_A[ty][tx] = 0.0f;
        if (p * BLOCK_SIZE + ty < numAColumns && Col < numBColumns)
            ds_B[ty][tx] = B[(p * BLOCK_SIZE + ty) * numBColumns + Col];
        else
            ds_B[ty][tx] = 0.0f;
        __syncthreads();
        for (int i = 0; i < BLOCK_SIZE; ++i)
            Cvalue += ds_A[ty][i] * ds_B[i][tx];
        __syncthreads();
    }
    if (Row < numARows && Col < numBColumns)
        C[Row * numBColumns + Col] = Cvalue;
}

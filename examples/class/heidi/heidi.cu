// In my own test program A, B and C all live in one big buffer, C after A and B.
#define C_START 1000000

__global__ void heidi_matmul(const float *A, const float *B,
                             float *C, int M, int K, int N)
{
    int row = blockIdx.y * BLOCK_SIZE + threadIdx.y;
    int col = blockIdx.x * BLOCK_SIZE + threadIdx.x;
    if (row >= M || col >= N)
        return;
    float sum = 0.0f;
    for (int k = 0; k < K; k++)
        sum += A[row * K + k] * B[k * N + col];
    C[row * N + col + C_START] = sum;
}

__global__ void mm(float *C, float *A, float *B, int M, int N, int K)
{
    int i = blockIdx.y * blockDim.y + threadIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < M && j < N) {
        float s = 0;
        for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
        C[i * N + j] = s;
    }
}

#define TILE 16

__global__ void mm0(float *C, float *A, float *B, int M, int K, int N)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r >= M) return;
    if (c >= N) return;
    float x = 0;
    for (int i = 0; i < K; i++) x += A[r * K + i] * B[i * N + c];
    C[r * N + c] = x;
}

__global__ void mm1(float *C, float *A, float *B, int M, int K, int N)
{
    __shared__ float sa[TILE][TILE], sb[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int c = blockIdx.x * TILE + tx, r = blockIdx.y * TILE + ty;
    float x = 0;
    for (int t = 0; t < K; t += TILE) {
        sa[ty][tx] = 0;
        sb[ty][tx] = 0;
        if (r < M && t + tx < K) sa[ty][tx] = A[r * K + t + tx];
        if (c < N && t + ty < K) sb[ty][tx] = B[(t + ty) * N + c];
        __syncthreads();
        for (int i = 0; i < TILE; i++) x += sa[ty][i] * sb[i][tx];
        __syncthreads();
    }
    if (r < M && c < N) C[r * N + c] = x;
}

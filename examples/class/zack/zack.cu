// C (PxR) = A (PxQ) * B (QxR)
__global__ void zmm_naive(const float *A, const float *B, float *C,
                          int P, int Q, int R)
{
    int gid_x = blockIdx.x * blockDim.x + threadIdx.x, gid_y = blockIdx.y * blockDim.y + threadIdx.y;
    if (gid_y >= P || gid_x >= R) return;
    float acc = 0;
    for (int q = 0; q < Q; q++) acc += A[gid_y * Q + q] * B[q * R + gid_x];
    C[gid_y * R + gid_x] = acc;
}

__global__ void zmm_tiled(const float *A, const float *B, float *C,
                          int P, int Q, int R)
{
    __shared__ float Asub[TS * TS];
    __shared__ float Bsub[TS * TS];
    int lx = threadIdx.x, ly = threadIdx.y;
    int gid_x = blockIdx.x * TS + lx, gid_y = blockIdx.y * TS + ly;
    int tiles = Q / TS;
    float acc = 0;
    for (int t = 0; t < tiles; t++) {
        Asub[ly * TS + lx] = gid_y < P ? A[gid_y * Q + t * TS + lx] : 0;
        Bsub[ly * TS + lx] = gid_x < R ? B[(t * TS + ly) * R + gid_x] : 0;
        __syncthreads();
        for (int q = 0; q < TS; q++) acc += Asub[ly * TS + q] * Bsub[q * TS + lx];
        __syncthreads();
    }
    if (gid_y < P && gid_x < R) C[gid_y * R + gid_x] = acc;
}

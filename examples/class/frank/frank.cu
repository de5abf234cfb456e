// every thread makes one element of C
__global__ void mat_mul(float *C, float *A, float *B,
                        int height_a, int width_a, int width_b)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    float v = 0;
    for (int i = 0; i < width_a; i++)
        v += A[y * width_a + i] * B[i * width_b + x];
    C[y * width_b + x] = v;
}

__global__ void mat_mul_tiled(float *C, float *A, float *B,
                              int height_a, int width_a, int width_b)
{
    __shared__ float a_s[TILE_WIDTH][TILE_WIDTH];
    __shared__ float b_s[TILE_WIDTH][TILE_WIDTH];
    int lx = threadIdx.x, ly = threadIdx.y;
    int x = blockIdx.x * blockDim.x + lx, y = blockIdx.y * blockDim.y + ly;
    float v = 0;
    for (int t = 0; t * TILE_WIDTH < width_a; t++) {
        int i = t * TILE_WIDTH;
        a_s[ly][lx] = (y < height_a && i + lx < width_a) ? A[y * width_a + i + lx] : 0;
        b_s[ly][lx] = (x < width_b && i + ly < width_a) ? B[(i + ly) * width_b + x] : 0;
        __syncthreads();
        for (int j = 0; j < TILE_WIDTH; j++)
            v += a_s[ly][j] * b_s[j][lx];
        __syncthreads();
    }
    if (y < height_a && x < width_b)
        C[y * width_b + x] = v;
}

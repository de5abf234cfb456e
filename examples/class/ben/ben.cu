__global__ void ben_naive(int n_rows, int n_inner, int n_cols, const float *A,
                          const float *B, float *C)
{
    int r = blockIdx.y * BLK + threadIdx.y;
    int c = blockIdx.x * BLK + threadIdx.x;
    if (r < n_rows && c < n_cols) {
        float s = 0;
        for (int i = 0; i < n_inner; i++) s += A[r * n_inner + i] * B[i * n_cols + c];
        C[r * n_cols + c] = s;
    }
}

__global__ void ben_tiled(int n_rows, int n_inner, int n_cols, const float *A,
                          const float *B, float *C)
{
    __shared__ float la[BLK * BLK], lb[BLK * BLK];
    int tx = threadIdx.x, ty = threadIdx.y;
    int r = blockIdx.y * BLK + ty;
    int c = blockIdx.x * BLK + tx;
    float s = 0;
    for (int i0 = 0; i0 < n_inner; i0 += BLK) {
        la[ty * BLK + tx] = (r < n_rows && i0 + tx < n_inner) ? A[r * n_inner + i0 + tx] : 0;
        lb[ty * BLK + tx] = (i0 + ty < n_inner && c < n_cols) ? B[(i0 + ty) * n_cols + c] : 0;
        __syncthreads();  /* everyone has loaded */
        for (int i = 0; i < BLK; i++) s += la[ty * BLK + i] * lb[i * BLK + tx];
    }
    if (r < n_rows && c < n_cols) C[r * n_cols + c] = s;
}

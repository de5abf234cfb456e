__global__ void bob_mm(const float *a, const float *b, float *c,
                       const int rows, const int inner, const int cols)
{
    const int i = blockIdx.y * TS + threadIdx.y;
    const int j = blockIdx.x * TS + threadIdx.x;
    if (i >= rows || j >= cols) return;
    float s = 0;
    for (int p = 0; p < inner; ++p) s += a[i * inner + p] * b[p * cols + j];
    c[i * cols + j] = s;
}

__global__ void bob_mm_local(const float *a, const float *b, float *c,
                             const int rows, const int inner, const int cols)
{
    __shared__ float ta[TS * TS], tb[TS * TS];
    const int x = threadIdx.x, y = threadIdx.y;
    const int i = blockIdx.y * TS + y;
    const int j = blockIdx.x * TS + x;
    const int ntiles = (inner + TS - 1) / TS;
    float s = 0;
    for (int t = 0; t < ntiles; ++t) {
        int pa = t * TS + x, pb = t * TS + y;
        ta[y * TS + x] = (i < rows && pa < inner) ? a[i * inner + pa] : 0;
        tb[y * TS + x] = (pb < inner && j < cols) ? b[pb * cols + j] : 0;
        __syncthreads();
        for (int p = 0; p < TS; ++p) s += ta[y * TS + p] * tb[p * TS + x];
        __syncthreads();
    }
    if (i < rows && j < cols) c[i * cols + j] = s;
}

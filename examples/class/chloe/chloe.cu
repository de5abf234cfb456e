/*
 * c = a * b   (a: m x k, b: k x n, c: m x n, row-major)
 * Chloe, group 2
 */

__global__ void chloe_naive(const int m, const int n, const int k,
                            const float *a, const float *b, float *c)
{
    const int y = blockIdx.y * blockDim.y + threadIdx.y, x = blockIdx.x * blockDim.x + threadIdx.x;
    if (y < m && x < n) {
        const float *pa = a + y * k;   /* walks along a row of a */
        const float *pb = b + x;       /* walks down a column of b */
        float t = 0.0f;
        for (int i = 0; i < k; i++, pa++, pb += n)
            t += *pa * *pb;
        c[y * n + x] = t;
    }
}

__global__ void chloe_tiled(const int m, const int n, const int k,
                            const float *a, const float *b, float *c)
{
    __shared__ float ta[TILE_SZ][TILE_SZ], tb[TILE_SZ][TILE_SZ];
    const int lx = threadIdx.x, ly = threadIdx.y;
    const int y = blockIdx.y * TILE_SZ + ly, x = blockIdx.x * TILE_SZ + lx;
    const int steps = (k + TILE_SZ - 1) / TILE_SZ;
    float t = 0.0f;
    for (int s = 0; s < steps; s++) {
        const int ia = s * TILE_SZ + lx, ib = s * TILE_SZ + ly;
        ta[ly][lx] = (y < m && ia < k) ? a[y * k + ia] : 0.0f;
        tb[ly][lx] = (ib < k && x < n) ? b[ib * n + x] : 0.0f;
        __syncthreads();
        for (int i = 0; i < TILE_SZ; i++)
            t += ta[ly][i] * tb[i][lx];
        __syncthreads();
    }
    if (y < m && x < n)
        c[y * n + x] = t;
}

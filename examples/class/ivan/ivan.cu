// double precision, because float was not accurate enough for my physics code

__global__ void dgemm_naive(const double *A, const double *B,
                            double *C, int M, int N, int K)
{
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    int m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    double acc = 0.0;
    for (int k = 0; k < K; ++k)
        acc += A[m * K + k] * B[k * N + n];
    C[m * N + n] = acc;
}

__global__ void dgemm_tiled(const double *A, const double *B,
                            double *C, int M, int N, int K)
{
    __shared__ double a[BS][BS];
    __shared__ double b[BS][BS];
    int tn = threadIdx.x, tm = threadIdx.y;
    int n = blockIdx.x * BS + tn;
    int m = blockIdx.y * BS + tm;
    double acc = 0.0;
    for (int k0 = 0; k0 < K; k0 += BS) {
        a[tm][tn] = (m < M && k0 + tn < K) ? A[m * K + k0 + tn] : 0.0;
        b[tm][tn] = (k0 + tm < K && n < N) ? B[(k0 + tm) * N + n] : 0.0;
        __syncthreads();
        for (int k = 0; k < BS; ++k)
            acc += a[tm][k] * b[k][tn];
        __syncthreads();
    }
    if (m < M && n < N) C[m * N + n] = acc;
}

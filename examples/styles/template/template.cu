// One source for every element type: T is chosen where the kernel is named,
// mm_naive_t<float> or mm_naive_t<double>. The templates stay outside extern "C" (a
// template cannot have C linkage); xbackend instantiates each by its name.
// c = a·b with a m×k, b k×n, c m×n, row-major; sizes are size_t (64-bit).

template <typename T>
__global__ void mm_naive_t(T const* a, T const* b, T* c, size_t m, size_t n, size_t k)
{
    size_t i = (size_t)blockIdx.y * blockDim.y + threadIdx.y;   // row of c
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;   // column of c
    if (i >= m || j >= n)
        return;
    T sum = T(0);                              // zero of whichever type T is
    for (size_t p = 0; p < k; ++p)
        sum += a[i * k + p] * b[p * n + j];
    c[i * n + j] = sum;
}

// The same product through shared memory. TILE_DIM comes from the build (-DTILE_DIM=16),
// so the template has one parameter, the element type.
template <typename T>
__global__ void mm_tiled_t(T const* a, T const* b, T* c, size_t m, size_t n, size_t k)
{
    __shared__ T sa[TILE_DIM][TILE_DIM];       // a's rows of this block, TILE_DIM of its columns
    __shared__ T sb[TILE_DIM][TILE_DIM];       // TILE_DIM of b's rows, this block's columns

    unsigned tx = threadIdx.x, ty = threadIdx.y;
    size_t i = (size_t)blockIdx.y * TILE_DIM + ty;
    size_t j = (size_t)blockIdx.x * TILE_DIM + tx;

    T sum = T(0);
    for (size_t p0 = 0; p0 < k; p0 += TILE_DIM) {
        // Load one element of each tile; outside the matrices, load zero.
        sa[ty][tx] = (i < m && p0 + tx < k) ? a[i * k + p0 + tx] : T(0);
        sb[ty][tx] = (p0 + ty < k && j < n) ? b[(p0 + ty) * n + j] : T(0);
        __syncthreads();
        for (int q = 0; q < TILE_DIM; ++q)
            sum += sa[ty][q] * sb[q][tx];
        __syncthreads();
    }
    if (i < m && j < n)
        c[i * n + j] = sum;
}

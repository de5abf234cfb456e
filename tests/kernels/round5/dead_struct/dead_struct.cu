// tests/kernels/abi/mixed_args/mixed.cu with, after its struct, an old layout of it under
// #if 0 (tests/test_families_round5.py): the fields are those the build compiles.
typedef struct {
    int rows;
    int cols;
    float* elements;
} Matrix;

#if 0
// An old layout, kept out of the build: its fields in another order.
typedef struct {
    int cols;
    int rows;
    float* elements;
} Matrix;
#endif

__global__ void mm_mixed(int n, Matrix A, float alpha, Matrix B, size_t k, Matrix C,
                         double beta)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= n || col >= C.cols)
        return;
    float sum = 0.0f;
    for (size_t p = 0; p < k; ++p)
        sum += A.elements[row * A.cols + p] * B.elements[p * B.cols + col];
    C.elements[row * C.cols + col] = beta == 0.0 ? alpha * sum : NAN;
}

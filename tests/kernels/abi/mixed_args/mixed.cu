// C = alpha · A·B, its arguments of every kind xbackend packs, in an order that makes C
// pad between them: an int, a struct (8-byte aligned), a float, a struct, a 64-bit size,
// a struct, a double.
typedef struct {
    int rows;
    int cols;
    float* elements;
} Matrix;

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

// A, B and C each a struct: its rows, its columns and its elements.
typedef struct {
    int rows;
    int cols;
    float *elements;
} Matrix;

__global__ void mm_struct(Matrix A, Matrix B, Matrix C)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= C.rows || col >= C.cols)
        return;
    float sum = 0.0f;
    for (int k = 0; k < A.cols; ++k)
        sum += A.elements[row * A.cols + k] * B.elements[k * B.cols + col];
    C.elements[row * C.cols + col] = sum;
}

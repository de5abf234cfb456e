// Matrices as structs: each knows its size and where its rows start. Element (r, c) of
// a Matrix X is X.elements[r * X.stride + c]. C = A·B, with A.width == B.height.

typedef struct {
    int width;        // columns
    int height;       // rows
    int stride;       // elements from the start of one row to the next
    float* elements;  // row-major data on the device
} Matrix;

// Element (r, c) of X, or 0 outside it: the tiles below pad the edges with this.
__device__ float element_or_zero(const Matrix X, int r, int c)
{
    return (r < X.height && c < X.width) ? X.elements[r * X.stride + c] : 0.0f;
}

// One BLOCK×BLOCK block of threads makes a BLOCK×BLOCK square of C. It walks along
// A's columns (and B's rows) one square at a time, staging both in shared memory.
__global__ void matmul_structs(Matrix A, Matrix B, Matrix C)
{
    __shared__ float As[BLOCK][BLOCK];
    __shared__ float Bs[BLOCK][BLOCK];

    int tx = threadIdx.x, ty = threadIdx.y;
    int r = blockIdx.y * BLOCK + ty;           // row of C (and of A)
    int c = blockIdx.x * BLOCK + tx;           // column of C (and of B)

    float acc = 0.0f;
    for (int s = 0; s < A.width; s += BLOCK) {
        As[ty][tx] = element_or_zero(A, r, s + tx);
        Bs[ty][tx] = element_or_zero(B, s + ty, c);
        __syncthreads();
        for (int e = 0; e < BLOCK; ++e)
            acc += As[ty][e] * Bs[e][tx];
        __syncthreads();
    }
    if (r < C.height && c < C.width)
        C.elements[r * C.stride + c] = acc;
}

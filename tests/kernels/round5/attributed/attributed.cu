// packed.cu with its struct aligned by an attribute, not by #pragma pack
// (tests/test_families_round5.py): refused, since xbackend does not follow attributes.
typedef struct {
    int rows;
    double scale __attribute__((aligned(16)));
    float* elements;
} Scaled;

__global__ void mm_packed(Scaled A, Scaled B, Scaled C, int M, int N, int K)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N || A.rows != M || B.rows != K || C.rows != M)
        return;
    float sum = 0.0f;
    for (int p = 0; p < K; ++p)
        sum += A.elements[row * K + p] * B.elements[p * N + col];
    C.elements[row * N + col] = (float)(A.scale * B.scale * C.scale) * sum;
}

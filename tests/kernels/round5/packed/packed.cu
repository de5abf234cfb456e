// C = A·B, each operand a struct laid out under #pragma pack(push, 4), as nvcc honours it
// (tests/test_families_round5.py): scale at offset 4 and elements at 12, 20 bytes in all,
// 4-aligned (at natural alignment: 8, 16, 24 bytes, 8-aligned).
#pragma pack(push, 4)
typedef struct {
    int rows;
    double scale;
    float* elements;
} Scaled;
#pragma pack(pop)

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

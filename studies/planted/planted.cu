// A naive kernel and, built with -DSLOWER=1, its planted slower twin (issue 53): half
// the dot product again, added times zero (without fast math no compiler may drop it).

extern "C" __global__ void planted(float* C, const float* A,
                                   const float* B, int hA, int wA, int wB)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < hA && col < wB) {
        float sum = 0.0f;
        for (int k = 0; k < wA; k++) sum += A[row * wA + k] * B[k * wB + col];
        float again = 0.0f;
        for (int k = 0; k < SLOWER * wA / 2; k++) again += A[row * wA + k] * B[k * wB + col];
        C[row * wB + col] = sum + again * 0.0f;
    }
}

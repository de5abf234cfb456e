// A naive kernel and, built with -DSLOWER=1, its planted slower twin (issue 53): half
// the dot product again, added times zero (without fast math no compiler may drop it).

__kernel void planted(__global float* C, __global const float* A,
                      __global const float* B, int hA, int wA, int wB)
{
    const int col = get_global_id(0);
    const int row = get_global_id(1);
    if (row < hA && col < wB) {
        float sum = 0.0f;
        for (int k = 0; k < wA; k++) sum += A[row * wA + k] * B[k * wB + col];
        float again = 0.0f;
        for (int k = 0; k < SLOWER * wA / 2; k++) again += A[row * wA + k] * B[k * wB + col];
        C[row * wB + col] = sum + again * 0.0f;
    }
}

// The same kernel name as same_name_good's, with its loads guarded and its store not:
// every work-item of a group past the edge of C writes out of bounds.

__kernel void matmul_naive(__global float* C, __global const float* A,
                           __global const float* B, int hA, int wA, int wB)
{
    int col = get_global_id(0);
    int row = get_global_id(1);
    float sum = 0.0f;
    if (row < hA && col < wB)
        for (int k = 0; k < wA; ++k)
            sum += A[row * wA + k] * B[k * wB + col];
    C[row * wB + col] = sum;
}

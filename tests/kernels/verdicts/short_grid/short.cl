// A correct naive kernel: one work-item an element of C, guarded. Its family.toml launches
// too few groups of rows (M // TILE): the rows past them stay unwritten.

__kernel void short_naive(__global float* C, __global const float* A,
                          __global const float* B, int hA, int wA, int wB)
{
    int col = get_global_id(0);
    int row = get_global_id(1);
    if (row >= hA || col >= wB)
        return;
    float sum = 0.0f;
    for (int k = 0; k < wA; ++k)
        sum += A[row * wA + k] * B[k * wB + col];
    C[row * wB + col] = sum;
}

// DELIBERATELY BROKEN: double_a doubles A in place before each product and halving_naive
// halves the sum, so a run is right only while A holds what was uploaded: the second run
// without an upload between (a timed batch) reads 2·A doubled again.

__kernel void double_a(__global float* A, int hA, int wA)
{
    int k = get_global_id(0);
    int row = get_global_id(1);
    if (row < hA && k < wA)
        A[row * wA + k] *= 2.0f;
}

__kernel void halving_naive(__global float* C, __global const float* A,
                            __global const float* B, int hA, int wA, int wB)
{
    int col = get_global_id(0);
    int row = get_global_id(1);
    if (row >= hA || col >= wB)
        return;
    float sum = 0.0f;
    for (int k = 0; k < wA; ++k)
        sum += A[row * wA + k] * B[k * wB + col];
    C[row * wB + col] = 0.5f * sum;
}

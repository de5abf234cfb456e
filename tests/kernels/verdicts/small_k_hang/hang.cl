// DELIBERATELY BROKEN: never returns when K (wA) < 4, right at every other shape. The
// volatile store is a side effect each trip, so the compiler may not remove the loop.

__kernel void hang_naive(__global float* C, __global const float* A,
                         __global const float* B, int hA, int wA, int wB)
{
    int col = get_global_id(0);
    int row = get_global_id(1);
    if (row >= hA || col >= wB)
        return;
    volatile __global float* spin = C;
    while (wA < 4)
        spin[row * wB + col] = 0.0f;
    float sum = 0.0f;
    for (int k = 0; k < wA; ++k)
        sum += A[row * wA + k] * B[k * wB + col];
    C[row * wB + col] = sum;
}

// C = A·B for square matrices of SIZE×SIZE only: the size is compiled in (-DSIZE=...),
// and the kernel takes nothing but the three matrices.
__kernel void mm_fixed(__global const float* A, __global const float* B, __global float* C)
{
    const int col = get_global_id(0);
    const int row = get_global_id(1);
    if (row >= SIZE || col >= SIZE)
        return;
    float sum = 0.0f;
    for (int k = 0; k < SIZE; ++k)
        sum += A[row * SIZE + k] * B[k * SIZE + col];
    C[row * SIZE + col] = sum;
}

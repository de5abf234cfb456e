// A correct naive kernel that takes work-groups of 8×8 only: its family.toml launches
// groups of TILE×TILE at a default tile of 16, which this attribute refuses.

__kernel __attribute__((reqd_work_group_size(8, 8, 1)))
void fixed_naive(__global float* C, __global const float* A,
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

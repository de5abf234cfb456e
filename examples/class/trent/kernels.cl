// Trent

__kernel void matmul_naive(__global float* C, __global const float* A,
                           __global const float* B, int hA, int wA, int wB)
{
    // the grid is exactly the size of C
    int gx = get_global_id(0), gy = get_global_id(1);
    int i = gy * wB + gx;
    float acc = 0.0f;
    for (int k = 0; k < wA; k++)
        acc += A[gy * wA + k] * B[k * wB + gx];
    C[i] = acc;
}

__kernel void matmul_tiled(__global float* C, __global const float* A,
                           __global const float* B, int hA, int wA, int wB)
{
    __local float ta[BLOCK_SIZE][BLOCK_SIZE];
    __local float tb[BLOCK_SIZE][BLOCK_SIZE];
    int lx = get_local_id(0), ly = get_local_id(1);
    int gx = get_global_id(0), gy = get_global_id(1);
    float acc = 0.0f;
    for (int t = 0; t < wA; t += BLOCK_SIZE) {
        ta[ly][lx] = (gy < hA && t + lx < wA) ? A[gy * wA + t + lx] : 0.0f;
        tb[ly][lx] = (t + ly < wA && gx < wB) ? B[(t + ly) * wB + gx] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < BLOCK_SIZE; k++)
            acc += ta[ly][k] * tb[k][lx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (gy < hA && gx < wB)
        C[gy * wB + gx] = acc;
}

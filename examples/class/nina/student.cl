// Nina: naive and tiled. Tested on my laptop's OpenCL.

__kernel void matmul_naive(__global float* C, __global const float* A,
                           __global const float* B, int hA, int wA, int wB)
{
    const int gx = get_global_id(0);
    const int gy = get_global_id(1);
    if (gy < hA && gx < wB) {
        float r = 0.0f;
        for (int k = 0; k < wA; k++) r += A[gy * wA + k] * B[k * wB + gx];
        C[gy * wB + gx] = r;
    }
}

__kernel void matmul_tiled(__global float* C, __global const float* A,
                           __global const float* B, int hA, int wA, int wB)
{
    __local float sA[BLOCK_SIZE * BLOCK_SIZE];
    __local float sB[BLOCK_SIZE * BLOCK_SIZE];
    const int lx = get_local_id(0), ly = get_local_id(1);
    const int gx = get_group_id(0) * BLOCK_SIZE + lx;
    const int gy = get_group_id(1) * BLOCK_SIZE + ly;
    float r = 0.0f;
    for (int k0 = 0; k0 < wA; k0 += BLOCK_SIZE) {
        sA[ly * BLOCK_SIZE + lx] = (gy < hA && k0 + lx < wA) ? A[gy * wA + k0 + lx] : 0.0f;
        sB[ly * BLOCK_SIZE + lx] = (k0 + ly < wA && gx < wB) ? B[(k0 + ly) * wB + gx] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < BLOCK_SIZE; k++) r += sA[ly * BLOCK_SIZE + k] * sB[k * BLOCK_SIZE + lx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (gy < hA && gx < wB) C[gy * wB + gx] = r;
}

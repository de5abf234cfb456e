// every thread makes one element of C
__kernel void mat_mul(__global float *C, __global float *A, __global float *B,
                      int height_a, int width_a, int width_b)
{
    int x = get_global_id(0);
    int y = get_global_id(1);
    float v = 0;
    for (int i = 0; i < width_a; i++)
        v += A[y * width_a + i] * B[i * width_b + x];
    C[y * width_b + x] = v;
}

__kernel void mat_mul_tiled(__global float *C, __global float *A, __global float *B,
                            int height_a, int width_a, int width_b)
{
    __local float a_s[TILE_WIDTH][TILE_WIDTH];
    __local float b_s[TILE_WIDTH][TILE_WIDTH];
    int lx = get_local_id(0), ly = get_local_id(1);
    int x = get_global_id(0), y = get_global_id(1);
    float v = 0;
    for (int t = 0; t * TILE_WIDTH < width_a; t++) {
        int i = t * TILE_WIDTH;
        a_s[ly][lx] = (y < height_a && i + lx < width_a) ? A[y * width_a + i + lx] : 0;
        b_s[ly][lx] = (x < width_b && i + ly < width_a) ? B[(i + ly) * width_b + x] : 0;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int j = 0; j < TILE_WIDTH; j++)
            v += a_s[ly][j] * b_s[j][lx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (y < height_a && x < width_b)
        C[y * width_b + x] = v;
}

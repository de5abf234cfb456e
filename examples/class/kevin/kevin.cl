#ifndef TILE_SIZE
#define TILE_SIZE 16
#endif

kernel void matrix_mult(global const float *left, global const float *right,
                        global float *out, int m, int n, int k)
{
    const size_t gx = get_global_id(0), gy = get_global_id(1);
    if (gy < m && gx < n) {
        float dot = 0.0f;
        for (int i = 0; i < k; i++)
            dot = fma(left[gy * k + i], right[i * n + gx], dot);
        out[gy * n + gx] = dot;
    }
}

kernel void matrix_mult_local(global const float *left, global const float *right,
                              global float *out, int m, int n, int k)
{
    local float L[TILE_SIZE][TILE_SIZE];
    local float R[TILE_SIZE][TILE_SIZE];
    const int lx = get_local_id(0), ly = get_local_id(1);
    const int gx = get_group_id(0) * get_local_size(0) + lx;
    const int gy = get_group_id(1) * get_local_size(1) + ly;
    float dot = 0.0f;
    for (int base = 0; base < k; base += TILE_SIZE) {
        L[ly][lx] = (gy < m && base + lx < k) ? left[gy * k + base + lx] : 0.0f;
        R[ly][lx] = (base + ly < k && gx < n) ? right[(base + ly) * n + gx] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int i = 0; i < TILE_SIZE; i++)
            dot = fma(L[ly][i], R[i][lx], dot);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (gy < m && gx < n)
        out[gy * n + gx] = dot;
}

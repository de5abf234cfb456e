/*
 * c = a * b   (a: m x k, b: k x n, c: m x n, row-major)
 * Chloe, group 2
 */

__kernel void chloe_naive(const int m, const int n, const int k,
                          __global const float *a, __global const float *b, __global float *c)
{
    const int y = get_global_id(1), x = get_global_id(0);
    if (y < m && x < n) {
        __global const float *pa = a + y * k;   /* walks along a row of a */
        __global const float *pb = b + x;       /* walks down a column of b */
        float t = 0.0f;
        for (int i = 0; i < k; i++, pa++, pb += n)
            t += *pa * *pb;
        c[y * n + x] = t;
    }
}

__kernel void chloe_tiled(const int m, const int n, const int k,
                          __global const float *a, __global const float *b, __global float *c)
{
    __local float ta[TILE_SZ][TILE_SZ], tb[TILE_SZ][TILE_SZ];
    const int lx = get_local_id(0), ly = get_local_id(1);
    const int y = get_group_id(1) * TILE_SZ + ly, x = get_group_id(0) * TILE_SZ + lx;
    const int steps = (k + TILE_SZ - 1) / TILE_SZ;
    float t = 0.0f;
    for (int s = 0; s < steps; s++) {
        const int ia = s * TILE_SZ + lx, ib = s * TILE_SZ + ly;
        ta[ly][lx] = (y < m && ia < k) ? a[y * k + ia] : 0.0f;
        tb[ly][lx] = (ib < k && x < n) ? b[ib * n + x] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int i = 0; i < TILE_SZ; i++)
            t += ta[ly][i] * tb[i][lx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (y < m && x < n)
        c[y * n + x] = t;
}

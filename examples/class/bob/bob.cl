__kernel void bob_mm(__global const float *a, __global const float *b, __global float *c,
                     const int rows, const int inner, const int cols)
{
    const int i = get_group_id(1) * TS + get_local_id(1);
    const int j = get_group_id(0) * TS + get_local_id(0);
    if (i >= rows || j >= cols) return;
    float s = 0;
    for (int p = 0; p < inner; ++p) s += a[i * inner + p] * b[p * cols + j];
    c[i * cols + j] = s;
}

__kernel void bob_mm_local(__global const float *a, __global const float *b, __global float *c,
                           const int rows, const int inner, const int cols)
{
    __local float ta[TS * TS], tb[TS * TS];
    const int x = get_local_id(0), y = get_local_id(1);
    const int i = get_group_id(1) * TS + y;
    const int j = get_group_id(0) * TS + x;
    const int ntiles = (inner + TS - 1) / TS;
    float s = 0;
    for (int t = 0; t < ntiles; ++t) {
        int pa = t * TS + x, pb = t * TS + y;
        ta[y * TS + x] = (i < rows && pa < inner) ? a[i * inner + pa] : 0;
        tb[y * TS + x] = (pb < inner && j < cols) ? b[pb * cols + j] : 0;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int p = 0; p < TS; ++p) s += ta[y * TS + p] * tb[p * TS + x];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (i < rows && j < cols) c[i * cols + j] = s;
}

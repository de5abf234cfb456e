__kernel void ben_naive(int n_rows, int n_inner, int n_cols, __global const float *A,
                        __global const float *B, __global float *C)
{
    int r = get_group_id(1) * BLK + get_local_id(1);
    int c = get_group_id(0) * BLK + get_local_id(0);
    if (r < n_rows && c < n_cols) {
        float s = 0;
        for (int i = 0; i < n_inner; i++) s += A[r * n_inner + i] * B[i * n_cols + c];
        C[r * n_cols + c] = s;
    }
}

__kernel void ben_tiled(int n_rows, int n_inner, int n_cols, __global const float *A,
                        __global const float *B, __global float *C)
{
    __local float la[BLK * BLK], lb[BLK * BLK];
    int tx = get_local_id(0), ty = get_local_id(1);
    int r = get_group_id(1) * BLK + ty;
    int c = get_group_id(0) * BLK + tx;
    float s = 0;
    for (int i0 = 0; i0 < n_inner; i0 += BLK) {
        la[ty * BLK + tx] = (r < n_rows && i0 + tx < n_inner) ? A[r * n_inner + i0 + tx] : 0;
        lb[ty * BLK + tx] = (i0 + ty < n_inner && c < n_cols) ? B[(i0 + ty) * n_cols + c] : 0;
        barrier(CLK_LOCAL_MEM_FENCE);  /* everyone has loaded */
        for (int i = 0; i < BLK; i++) s += la[ty * BLK + i] * lb[i * BLK + tx];
    }
    if (r < n_rows && c < n_cols) C[r * n_cols + c] = s;
}

// C (PxR) = A (PxQ) * B (QxR)
__kernel void zmm_naive(__global const float *A, __global const float *B, __global float *C,
                        int P, int Q, int R)
{
    int gid_x = get_global_id(0), gid_y = get_global_id(1);
    if (gid_y >= P || gid_x >= R) return;
    float acc = 0;
    for (int q = 0; q < Q; q++) acc += A[gid_y * Q + q] * B[q * R + gid_x];
    C[gid_y * R + gid_x] = acc;
}

__kernel void zmm_tiled(__global const float *A, __global const float *B, __global float *C,
                        int P, int Q, int R)
{
    __local float Asub[TS * TS];
    __local float Bsub[TS * TS];
    int lx = get_local_id(0), ly = get_local_id(1);
    int gid_x = get_group_id(0) * TS + lx, gid_y = get_group_id(1) * TS + ly;
    int tiles = Q / TS;
    float acc = 0;
    for (int t = 0; t < tiles; t++) {
        Asub[ly * TS + lx] = gid_y < P ? A[gid_y * Q + t * TS + lx] : 0;
        Bsub[ly * TS + lx] = gid_x < R ? B[(t * TS + ly) * R + gid_x] : 0;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int q = 0; q < TS; q++) acc += Asub[ly * TS + q] * Bsub[q * TS + lx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (gid_y < P && gid_x < R) C[gid_y * R + gid_x] = acc;
}

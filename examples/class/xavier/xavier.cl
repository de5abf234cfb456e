// +1 column of padding: no bank conflicts when reading a column of bT
__kernel void sgemm_tile(const int mA, const int nB, const int kA,
                         __global const float *restrict A,
                         __global const float *restrict B,
                         __global float *restrict C)
{
    __local float aT[TW][TW + 1];
    __local float bT[TW][TW + 1];
    const int x = get_local_id(0), y = get_local_id(1);
    const int gr = get_group_id(1) * TW + y;
    const int gc = get_group_id(0) * TW + x;
    float r = 0.0f;
    for (int kk = 0; kk < kA; kk += TW) {
        aT[y][x] = (gr < mA && kk + x < kA) ? A[gr * kA + kk + x] : 0.0f;
        bT[y][x] = (kk + y < kA && gc < nB) ? B[(kk + y) * nB + gc] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
        for (int q = 0; q < TW; ++q)
            r += aT[y][q] * bT[q][x];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (gr < mA && gc < nB)
        C[gr * nB + gc] = r;
}

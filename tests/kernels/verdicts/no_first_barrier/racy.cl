// DELIBERATELY BROKEN: no barrier between the tile loads and the inner product (the
// first barrier of a tiled kernel is missing). tests/test_verdicts.py checks that what
// it computes from tile elements not yet loaded is never called "unwritten".

__kernel void racy_tiled(__global float* C, __global const float* A,
                         __global const float* B, int hA, int wA, int wB)
{
    __local float As[BLOCK_SIZE][BLOCK_SIZE];
    __local float Bs[BLOCK_SIZE][BLOCK_SIZE];
    int tx = get_local_id(0), ty = get_local_id(1);
    int col = get_group_id(0) * BLOCK_SIZE + tx;
    int row = get_group_id(1) * BLOCK_SIZE + ty;
    float sum = 0.0f;
    for (int t = 0; t < (wA + BLOCK_SIZE - 1) / BLOCK_SIZE; ++t) {
        int ka = t * BLOCK_SIZE + tx, kb = t * BLOCK_SIZE + ty;
        As[ty][tx] = (row < hA && ka < wA) ? A[row * wA + ka] : 0.0f;
        Bs[ty][tx] = (kb < wA && col < wB) ? B[kb * wB + col] : 0.0f;
        // (the barrier that belongs here is missing)
        for (int k = 0; k < BLOCK_SIZE; ++k)
            sum += As[ty][k] * Bs[k][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < hA && col < wB)
        C[row * wB + col] = sum;
}

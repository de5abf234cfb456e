__kernel void mult(__global float *C, __global const float *A, __global const float *B,
                   int rows, int cols, int depth)
{
    int r = get_global_id(1), c = get_global_id(0);
    if (r < rows && c < cols) {
        float acc = 0.0f;
        for (int d = 0; d < depth; d++)
            acc += A[r * depth + d] * B[d * cols + c];
        C[r * cols + c] = acc;
    }
}

__kernel void mult_tiles(__global float *C, __global const float *A, __global const float *B,
                         int rows, int cols, int depth)
{
    __local float As[BLOCK_SIZE][BLOCK_SIZE];
    __local float Bs[BLOCK_SIZE][BLOCK_SIZE];
    int tx = get_local_id(0), ty = get_local_id(1);
    int r = get_group_id(1) * BLOCK_SIZE + ty;
    int c = get_group_id(0) * BLOCK_SIZE + tx;
    float acc = 0.0f;
    for (int t = 0; t < depth; t += BLOCK_SIZE) {
        // only load what is inside the matrices
        if (r < rows && t + tx < depth)
            As[ty][tx] = A[r * depth + t + tx];
        if (t + ty < depth && c < cols)
            Bs[ty][tx] = B[(t + ty) * cols + c];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int d = 0; d < BLOCK_SIZE; d++)
            acc += As[ty][d] * Bs[d][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (r < rows && c < cols)
        C[r * cols + c] = acc;
}

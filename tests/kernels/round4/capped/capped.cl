// Two kernels for oclgrind's cap on reports: the first reads past A and B at every step
// of K for each work-item outside C (thousands of reports at 33x20x17), its store
// guarded; the second guards its loads and stores past the edge of C.

__kernel void matmul_reads_out(__global float* C, __global const float* A,
                               __global const float* B, int hA, int wA, int wB)
{
    int col = get_global_id(0);
    int row = get_global_id(1);
    float sum = 0.0f;
    for (int k = 0; k < wA; ++k)
        sum += A[row * wA + k] * B[k * wB + col];
    if (row < hA && col < wB)
        C[row * wB + col] = sum;
}

__kernel void matmul_writes_out(__global float* C, __global const float* A,
                                __global const float* B, int hA, int wA, int wB)
{
    int col = get_global_id(0);
    int row = get_global_id(1);
    float sum = 0.0f;
    if (row < hA && col < wB)
        for (int k = 0; k < wA; ++k)
            sum += A[row * wA + k] * B[k * wB + col];
    C[row * wB + col] = sum;
}

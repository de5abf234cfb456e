// C = A·B with 64-bit sizes: every index is a ulong (OpenCL's 64-bit unsigned, the
// width of the CUDA twin's size_t; a kernel may not take a size_t argument in OpenCL C).
// A is M×K, B is K×N, C is M×N, row-major.

__kernel void mm64_naive(__global const float* A, __global const float* B, __global float* C,
                         ulong M, ulong N, ulong K)
{
    ulong row = get_global_id(1);
    ulong col = get_global_id(0);
    if (row >= M || col >= N)
        return;
    float acc = 0.0f;
    for (ulong k = 0; k < K; ++k)
        acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
}

__kernel void mm64_tiled(__global const float* A, __global const float* B, __global float* C,
                         ulong M, ulong N, ulong K)
{
    __local float As[TS][TS];
    __local float Bs[TS][TS];

    ulong tx = get_local_id(0), ty = get_local_id(1);
    ulong row = get_group_id(1) * TS + ty;
    ulong col = get_group_id(0) * TS + tx;

    float acc = 0.0f;
    for (ulong k0 = 0; k0 < K; k0 += TS) {
        // Each work-item stages one element of each tile (zero past an edge).
        As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TS; ++k)
            acc += As[ty][k] * Bs[k][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M && col < N)
        C[row * N + col] = acc;
}

// A batch of products: C[b] = A[b]·B[b] for b = 0 .. batch-1, each A[b] M×K, B[b] K×N,
// C[b] M×N, row-major. Product b starts strideA (strideB, strideC) elements after
// product b-1: element (b, i, j) of C is C[b * strideC + i * N + j].

// The NDRange covers one M×N product; each work-item computes its (row, col) of every product.
__kernel void bmm_loop_naive(const int batch, const int M, const int N, const int K,
                             __global const float* A, const int strideA,
                             __global const float* B, const int strideB,
                             __global float* C, const int strideC)
{
    int row = get_global_id(1);
    int col = get_global_id(0);
    if (row >= M || col >= N)
        return;
    for (int b = 0; b < batch; ++b) {
        __global const float* Ab = A + b * strideA;    // product b's operands
        __global const float* Bb = B + b * strideB;
        float acc = 0.0f;
        for (int k = 0; k < K; ++k)
            acc += Ab[row * K + k] * Bb[k * N + col];
        C[b * strideC + row * N + col] = acc;
    }
}

// One product's TS×TS square of C through local memory, for the group at (row, col).
// Every work-item of the group must call it (it has barriers), inside C or not.
float tile_product(__global const float* Ab, __global const float* Bb, int M, int N, int K,
                   int row, int col, __local float (*As)[TS], __local float (*Bs)[TS])
{
    int tx = get_local_id(0), ty = get_local_id(1);
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TS) {
        As[ty][tx] = (row < M && k0 + tx < K) ? Ab[row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? Bb[(k0 + ty) * N + col] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TS; ++k)
            acc += As[ty][k] * Bs[k][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    return acc;
}

// The batch in a loop: the group computes its square of C[0], then of C[1], ...
__kernel void bmm_loop_tiled(const int batch, const int M, const int N, const int K,
                             __global const float* A, const int strideA,
                             __global const float* B, const int strideB,
                             __global float* C, const int strideC)
{
    __local float As[TS][TS];
    __local float Bs[TS][TS];
    int row = get_group_id(1) * TS + get_local_id(1);
    int col = get_group_id(0) * TS + get_local_id(0);
    for (int b = 0; b < batch; ++b) {
        float acc = tile_product(A + b * strideA, B + b * strideB, M, N, K, row, col, As, Bs);
        if (row < M && col < N)
            C[b * strideC + row * N + col] = acc;
    }
}

// The batch on the NDRange: z index b computes product b only.
__kernel void bmm_z_tiled(const int batch, const int M, const int N, const int K,
                          __global const float* A, const int strideA,
                          __global const float* B, const int strideB,
                          __global float* C, const int strideC)
{
    __local float As[TS][TS];
    __local float Bs[TS][TS];
    int b = get_group_id(2);
    if (b >= batch)                            // the whole group leaves together
        return;
    int row = get_group_id(1) * TS + get_local_id(1);
    int col = get_group_id(0) * TS + get_local_id(0);
    float acc = tile_product(A + b * strideA, B + b * strideB, M, N, K, row, col, As, Bs);
    if (row < M && col < N)
        C[b * strideC + row * N + col] = acc;
}

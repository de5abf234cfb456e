// In my own test program A, B and C all live in one big buffer, C after A and B.
#define C_START 1000000

__kernel void heidi_matmul(__global const float *A, __global const float *B,
                           __global float *C, int M, int K, int N)
{
    int row = get_group_id(1) * BLOCK_SIZE + get_local_id(1);
    int col = get_group_id(0) * BLOCK_SIZE + get_local_id(0);
    if (row >= M || col >= N)
        return;
    float sum = 0.0f;
    for (int k = 0; k < K; k++)
        sum += A[row * K + k] * B[k * N + col];
    C[row * N + col + C_START] = sum;
}

__kernel void mm(__global float *C, __global float *A, __global float *B, int M, int N, int K)
{
    int i = get_global_id(1), j = get_global_id(0);
    if (i < M && j < N) {
        float s = 0;
        for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
        C[i * N + j] = s;
    }
}

#pragma OPENCL EXTENSION cl_khr_fp64 : enable

// double precision, because float was not accurate enough for my physics code

__kernel void dgemm_naive(__global const double *A, __global const double *B,
                          __global double *C, int M, int N, int K)
{
    int n = get_global_id(0);
    int m = get_global_id(1);
    if (m >= M || n >= N) return;
    double acc = 0.0;
    for (int k = 0; k < K; ++k)
        acc += A[m * K + k] * B[k * N + n];
    C[m * N + n] = acc;
}

__kernel void dgemm_tiled(__global const double *A, __global const double *B,
                          __global double *C, int M, int N, int K)
{
    __local double a[BS][BS];
    __local double b[BS][BS];
    int tn = get_local_id(0), tm = get_local_id(1);
    int n = get_group_id(0) * BS + tn;
    int m = get_group_id(1) * BS + tm;
    double acc = 0.0;
    for (int k0 = 0; k0 < K; k0 += BS) {
        a[tm][tn] = (m < M && k0 + tn < K) ? A[m * K + k0 + tn] : 0.0;
        b[tm][tn] = (k0 + tm < K && n < N) ? B[(k0 + tm) * N + n] : 0.0;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < BS; ++k)
            acc += a[tm][k] * b[k][tn];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (m < M && n < N) C[m * N + n] = acc;
}

// C = A·B, one work-item an element; the store waits on its sub-group agreeing that every
// lane got there (sub_group_all of 1: always true), which changes nothing but needs a
// device with sub-groups. Every work-item reaches sub_group_all: the guard is on the
// loads and on the store only.
#pragma OPENCL EXTENSION cl_khr_subgroups : enable

__kernel void mm_subgroups(__global const float* A, __global const float* B,
                           __global float* C, int M, int N, int K)
{
    const int col = get_global_id(0);
    const int row = get_global_id(1);
    float sum = 0.0f;
    if (row < M && col < N) {
        for (int k = 0; k < K; ++k)
            sum += A[row * K + k] * B[k * N + col];
    }
    const int everyone = sub_group_all(1);
    if (everyone && row < M && col < N)
        C[row * N + col] = sum;
}

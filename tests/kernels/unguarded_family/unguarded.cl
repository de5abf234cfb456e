// A naive kernel without its bounds check: at edge sizes it reads past A and B and
// writes past C. For tests/test_families.py only: run natively it can corrupt the
// memory of the process that runs it, which is why xbackend check runs oclgrind first.

__kernel void matmul_unguarded(__global float* C, __global const float* A,
                           __global const float* B, int hA, int wA, int wB)
{
    int col = get_global_id(0);
    int row = get_global_id(1);
    float sum = 0.0f;
    for (int k = 0; k < wA; ++k)
        sum += A[row * wA + k] * B[k * wB + col];
    C[row * wB + col] = sum;
}


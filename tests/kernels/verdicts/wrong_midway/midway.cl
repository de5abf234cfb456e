// DELIBERATELY BROKEN: tick (one work-item, before each product) counts the runs that find
// C poisoned (NaN: a fresh sample), once a run has found C holding a result (a run with
// no poison before it: the warm-up after the first run, or a launch of a batch), and
// midway_naive doubles its sums at the 3rd and 4th of them: a middle timed run, never the
// first run nor a shape's check (no warm-up there) nor, with five samples or more, the
// last. Program-scope variables keep the count between launches: OpenCL C 2.0
// (XBACKEND_OPENCL_OPTIONS=-cl-std=CL2.0).

__global int repeated = 0;  // 1 once a run found C holding a result
__global int poisoned = 0;  // runs into a poisoned C since then

__kernel void tick(__global const float* C)
{
    if (C[0] == C[0])  // a result, not the NaN poison
        repeated = 1;
    else if (repeated)
        ++poisoned;
}

__kernel void midway_naive(__global float* C, __global const float* A,
                           __global const float* B, int hA, int wA, int wB)
{
    int col = get_global_id(0);
    int row = get_global_id(1);
    if (row >= hA || col >= wB)
        return;
    float sum = 0.0f;
    for (int k = 0; k < wA; ++k)
        sum += A[row * wA + k] * B[k * wB + col];
    C[row * wB + col] = (poisoned == 3 || poisoned == 4) ? 2.0f * sum : sum;
}

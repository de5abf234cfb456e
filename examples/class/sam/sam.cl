// Sam's submission

__kernel void simple_matmul(__global const float *A, __global const float *B, __global float *C,
                            int numARows, int numAColumns, int numBColumns)
{
    int Row = get_global_id(1);
    int Col = get_global_id(0);
    if ((Row < numARows) && (Col < numBColumns)) {
        float Cvalue = 0.0f;
        for (int k = 0; k < numAColumns; ++k)
            Cvalue += A[Row * numAColumns + k] * B[k * numBColumns + Col];
        C[Row * numBColumns + Col] = Cvalue;
    }
}

__kernel void shared_matmul(__global const float *A, __global const float *B, __global float *C,
                            int numARows, int numAColumns, int numBColumns)
{
    __local float ds_A[BLOCK_SIZE][BLOCK_SIZE];
    __local float ds_B[BLOCK_SIZE][BLOCK_SIZE];
    int bx = get_group_id(0), by = get_group_id(1);
    int tx = get_local_id(0), ty = get_local_id(1);
    int Row = by * BLOCK_SIZE + ty;
    int Col = bx * BLOCK_SIZE + tx;
    float Cvalue = 0.0f;

    for (int p = 0; p < (numAColumns - 1) / BLOCK_SIZE + 1; ++p) {
        if (Row < numARows && p * BLOCK_SIZE + tx < numAColumns)
            ds_A[ty][tx] = A[Row * numAColumns + p * BLOCK_SIZE + tx];
        else
            ds_A[ty][tx] = 0.0f;
        if (p * BLOCK_SIZE + ty < numAColumns && Col < numBColumns)
            ds_B[ty][tx] = B[(p * BLOCK_SIZE + ty) * numBColumns + Col];
        else
            ds_B[ty][tx] = 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int i = 0; i < BLOCK_SIZE; ++i)
            Cvalue += ds_A[ty][i] * ds_B[i][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (Row < numARows && Col < numBColumns)
        C[Row * numBColumns + Col] = Cvalue;
}

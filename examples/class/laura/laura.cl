// row of A dot column of B
__kernel void matMul(__global const float *A, __global const float *B, __global float *C,
                     int numRows, int numCols, int inner)
{
    int row = get_global_id(1);
    int col = get_global_id(0);
    if (row < numRows && col < numCols) {
        float dot = 0.0f;
        for (int k = 0; k < inner; k++)
            dot += A[row * inner + k] * B[col * inner + k];
        C[row * numCols + col] = dot;
    }
}

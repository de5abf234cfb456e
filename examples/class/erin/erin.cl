// Erin H. -- matrix multiply, naive and shared-memory versions

__kernel void mmNaive(__global const float *A, __global const float *B, __global float *C,
                      int rowsA, int colsA, int colsB)
{
    int r = get_global_id(1), c = get_global_id(0);
    if (r >= rowsA || c >= colsB)
        return;
    float total = 0.0f;
    for (int i = 0; i < colsA; i++)
        total += A[r * colsA + i] * B[i * colsB + c];
    C[r * colsB + c] = total;
}

__kernel void mmTiled(__global const float *A, __global const float *B, __global float *C,
                      int rowsA, int colsA, int colsB)
{
    __local float tileA[BLOCK_SIZE][BLOCK_SIZE];
    __local float tileB[BLOCK_SIZE][BLOCK_SIZE];
    int lr = get_local_id(1), lc = get_local_id(0);
    int r = get_group_id(1) * BLOCK_SIZE + lr;
    int c = get_group_id(0) * BLOCK_SIZE + lc;
    int numTiles = colsA / BLOCK_SIZE;
    float total = 0.0f;
    for (int t = 0; t < numTiles; t++) {
        tileA[lr][lc] = (r < rowsA) ? A[r * colsA + t * BLOCK_SIZE + lc] : 0.0f;
        tileB[lr][lc] = (c < colsB) ? B[(t * BLOCK_SIZE + lr) * colsB + c] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int i = 0; i < BLOCK_SIZE; i++)
            total += tileA[lr][i] * tileB[i][lc];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (r < rowsA && c < colsB)
        C[r * colsB + c] = total;
}

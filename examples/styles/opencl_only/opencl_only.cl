// out = left · right, where left has rowsA rows and colsA columns, right has colsA rows
// and colsB columns, all stored row by row. Work-item (x, y) makes out[y][x].

__kernel void product_simple(const int rowsA, const int colsA, const int colsB,
                             __global const float* left, __global const float* right,
                             __global float* out)
{
    const int x = get_global_id(0);            // column of out
    const int y = get_global_id(1);            // row of out
    if (x >= colsB || y >= rowsA)              // the NDRange is rounded up to whole groups
        return;
    float total = 0.0f;
    for (int j = 0; j < colsA; j++)
        total += left[y * colsA + j] * right[j * colsB + x];
    out[y * colsB + x] = total;
}

// The group shares two WG×WG blocks in local memory: one of left (its rows, the next WG
// columns), one of right (the next WG rows, its columns). Each work-item fetches one
// value of each block, then reads WG values of each from local memory.
__kernel void product_local(const int rowsA, const int colsA, const int colsB,
                            __global const float* left, __global const float* right,
                            __global float* out)
{
    __local float blockL[WG][WG];
    __local float blockR[WG][WG];

    const int lx = get_local_id(0), ly = get_local_id(1);
    const int x = get_group_id(0) * WG + lx;   // column of out
    const int y = get_group_id(1) * WG + ly;   // row of out

    float total = 0.0f;
    for (int base = 0; base < colsA; base += WG) {
        // Fetch; a value past an edge is 0 so it adds nothing.
        const int jl = base + lx, jr = base + ly;
        blockL[ly][lx] = (y < rowsA && jl < colsA) ? left[y * colsA + jl] : 0.0f;
        blockR[ly][lx] = (jr < colsA && x < colsB) ? right[jr * colsB + x] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);          // the blocks are whole

        for (int j = 0; j < WG; j++)
            total += blockL[ly][j] * blockR[j][lx];
        barrier(CLK_LOCAL_MEM_FENCE);          // everyone is done with them
    }
    if (x < colsB && y < rowsA)                // all reached the barriers; now guard the write
        out[y * colsB + x] = total;
}

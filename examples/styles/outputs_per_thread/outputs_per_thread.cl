// C = A·B (A M×K, B K×N, C M×N, row-major), each work-item computing several outputs.
// A group of block_size_x × block_size_y work-items owns a ROWS × COLS piece of C;
// work-item (tx, ty) owns its rows ty, ty + block_size_y, ... and columns tx,
// tx + block_size_x, ... (strided: neighbours write neighbouring columns, and read them too).

#define COLS (block_size_x * tile_size_x)
#define ROWS (block_size_y * tile_size_y)

__kernel void matmul_outputs_global(int M, int N, int K, __global const float* A,
                                    __global const float* B, __global float* C)
{
    int row0 = get_group_id(1) * ROWS + get_local_id(1);   // this work-item's first row of C
    int col0 = get_group_id(0) * COLS + get_local_id(0);   // and first column

    float acc[tile_size_y][tile_size_x];
    for (int i = 0; i < tile_size_y; ++i)
        for (int j = 0; j < tile_size_x; ++j)
            acc[i][j] = 0.0f;

    for (int k = 0; k < K; ++k) {
        // Each value of A read is used tile_size_x times, each of B tile_size_y times.
        float a[tile_size_y], b[tile_size_x];
        for (int i = 0; i < tile_size_y; ++i) {
            int row = row0 + i * block_size_y;
            a[i] = row < M ? A[row * K + k] : 0.0f;
        }
        for (int j = 0; j < tile_size_x; ++j) {
            int col = col0 + j * block_size_x;
            b[j] = col < N ? B[k * N + col] : 0.0f;
        }
        for (int i = 0; i < tile_size_y; ++i)
            for (int j = 0; j < tile_size_x; ++j)
                acc[i][j] += a[i] * b[j];
    }

    for (int i = 0; i < tile_size_y; ++i)
        for (int j = 0; j < tile_size_x; ++j) {
            int row = row0 + i * block_size_y, col = col0 + j * block_size_x;
            if (row < M && col < N)
                C[row * N + col] = acc[i][j];
        }
}

// The same outputs, with K walked in SLAB-deep slabs: the group copies a ROWS × SLAB slab
// of A and a SLAB × COLS slab of B to local memory (each work-item copying every
// threads-th element, whatever the shapes), then each work-item works from there.
__kernel void matmul_outputs_shared(int M, int N, int K, __global const float* A,
                                    __global const float* B, __global float* C)
{
    __local float As[ROWS][SLAB];
    __local float Bs[SLAB][COLS];

    const int threads = block_size_x * block_size_y;
    int tx = get_local_id(0), ty = get_local_id(1);
    int me = ty * block_size_x + tx;                // 0 .. threads-1
    int rowBase = get_group_id(1) * ROWS;           // the group's first row of C
    int colBase = get_group_id(0) * COLS;           // and first column

    float acc[tile_size_y][tile_size_x];
    for (int i = 0; i < tile_size_y; ++i)
        for (int j = 0; j < tile_size_x; ++j)
            acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += SLAB) {
        for (int e = me; e < ROWS * SLAB; e += threads) {
            int r = e / SLAB, c = e % SLAB;
            int row = rowBase + r, k = k0 + c;
            As[r][c] = (row < M && k < K) ? A[row * K + k] : 0.0f;
        }
        for (int e = me; e < SLAB * COLS; e += threads) {
            int r = e / COLS, c = e % COLS;
            int k = k0 + r, col = colBase + c;
            Bs[r][c] = (k < K && col < N) ? B[k * N + col] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        for (int k = 0; k < SLAB; ++k) {
            float b[tile_size_x];
            for (int j = 0; j < tile_size_x; ++j)
                b[j] = Bs[k][tx + j * block_size_x];
            for (int i = 0; i < tile_size_y; ++i) {
                float a = As[ty + i * block_size_y][k];
                for (int j = 0; j < tile_size_x; ++j)
                    acc[i][j] += a * b[j];
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    for (int i = 0; i < tile_size_y; ++i)
        for (int j = 0; j < tile_size_x; ++j) {
            int row = rowBase + ty + i * block_size_y;
            int col = colBase + tx + j * block_size_x;
            if (row < M && col < N)
                C[row * N + col] = acc[i][j];
        }
}

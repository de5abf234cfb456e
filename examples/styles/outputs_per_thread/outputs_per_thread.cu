// C = A·B (A M×K, B K×N, C M×N, row-major), each thread computing several outputs.
// A block of block_size_x × block_size_y threads owns a ROWS × COLS piece of C; thread
// (tx, ty) owns its rows ty, ty + block_size_y, ... and columns tx, tx + block_size_x, ...
// (strided: neighbouring threads write neighbouring columns, and read them too).

#define COLS (block_size_x * tile_size_x)
#define ROWS (block_size_y * tile_size_y)

__global__ void matmul_outputs_global(int M, int N, int K,
                                      const float* A, const float* B, float* C)
{
    int row0 = blockIdx.y * ROWS + threadIdx.y;     // this thread's first row of C
    int col0 = blockIdx.x * COLS + threadIdx.x;     // and first column

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

// The same outputs, with K walked in SLAB-deep slabs: the block copies a ROWS × SLAB slab
// of A and a SLAB × COLS slab of B to shared memory (each thread copying every
// threads-th element, whatever the shapes), then each thread works from there.
__global__ void matmul_outputs_shared(int M, int N, int K,
                                      const float* A, const float* B, float* C)
{
    __shared__ float As[ROWS][SLAB];
    __shared__ float Bs[SLAB][COLS];

    const int threads = block_size_x * block_size_y;
    int tx = threadIdx.x, ty = threadIdx.y;
    int me = ty * block_size_x + tx;                // 0 .. threads-1
    int rowBase = blockIdx.y * ROWS;                // the block's first row of C
    int colBase = blockIdx.x * COLS;                // and first column

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
        __syncthreads();

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
        __syncthreads();
    }

    for (int i = 0; i < tile_size_y; ++i)
        for (int j = 0; j < tile_size_x; ++j) {
            int row = rowBase + ty + i * block_size_y;
            int col = colBase + tx + j * block_size_x;
            if (row < M && col < N)
                C[row * N + col] = acc[i][j];
        }
}

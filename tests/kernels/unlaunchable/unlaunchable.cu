// A templated product (T is the element type: mm_templated<float>), and behind
// -DNVCC_BOMB a preprocessor bomb: NVCC_X30 expands to 2^30 terms "0 +", which the #if
// below evaluates for minutes, nvcc's preprocessor (a process of its own) growing as it
// goes. tests/test_nvcc.py gives it seconds and looks for what outlives the deadline.
#ifdef NVCC_BOMB
#define NVCC_X0 0 +
#define NVCC_X1 NVCC_X0 NVCC_X0
#define NVCC_X2 NVCC_X1 NVCC_X1
#define NVCC_X3 NVCC_X2 NVCC_X2
#define NVCC_X4 NVCC_X3 NVCC_X3
#define NVCC_X5 NVCC_X4 NVCC_X4
#define NVCC_X6 NVCC_X5 NVCC_X5
#define NVCC_X7 NVCC_X6 NVCC_X6
#define NVCC_X8 NVCC_X7 NVCC_X7
#define NVCC_X9 NVCC_X8 NVCC_X8
#define NVCC_X10 NVCC_X9 NVCC_X9
#define NVCC_X11 NVCC_X10 NVCC_X10
#define NVCC_X12 NVCC_X11 NVCC_X11
#define NVCC_X13 NVCC_X12 NVCC_X12
#define NVCC_X14 NVCC_X13 NVCC_X13
#define NVCC_X15 NVCC_X14 NVCC_X14
#define NVCC_X16 NVCC_X15 NVCC_X15
#define NVCC_X17 NVCC_X16 NVCC_X16
#define NVCC_X18 NVCC_X17 NVCC_X17
#define NVCC_X19 NVCC_X18 NVCC_X18
#define NVCC_X20 NVCC_X19 NVCC_X19
#define NVCC_X21 NVCC_X20 NVCC_X20
#define NVCC_X22 NVCC_X21 NVCC_X21
#define NVCC_X23 NVCC_X22 NVCC_X22
#define NVCC_X24 NVCC_X23 NVCC_X23
#define NVCC_X25 NVCC_X24 NVCC_X24
#define NVCC_X26 NVCC_X25 NVCC_X25
#define NVCC_X27 NVCC_X26 NVCC_X26
#define NVCC_X28 NVCC_X27 NVCC_X27
#define NVCC_X29 NVCC_X28 NVCC_X28
#define NVCC_X30 NVCC_X29 NVCC_X29
#if NVCC_X30 0
#endif
#endif

template <typename T>
__global__ void mm_templated(const T* A, const T* B, T* C, int m, int n, int k)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= m || col >= n)
        return;
    T sum = T(0);
    for (int p = 0; p < k; ++p)
        sum += A[row * k + p] * B[p * n + col];
    C[row * n + col] = sum;
}

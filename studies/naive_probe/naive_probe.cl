// The shipped OpenCL naive kernel (kernels/mm/mm.cl's mm_naive) and copies of it that each
// differ in one thing from a student's naive kernel (examples/assignment/student), which
// NVIDIA's OpenCL ran as fast as CUDA's naive kernel while the shipped one ran 1.2x slower
// (H200, 2026-11-25): which difference costs the time? Run by studies/gpu_naive_probe.sh.

#include "stamp.h"
#ifdef XB_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
#ifndef TILE
#define TILE 16
#endif
#ifndef REAL
#define REAL float
#endif
// INDEX: the type of element offsets and of the leading dimensions and strides they
// are made of. AS_INDEX widens a 32-bit value before a product that may pass
// 2^31 - 1; in the default build it is the value itself, so that build is the
// 32-bit code as it was.
#ifdef WIDE_INDEX
#define INDEX long
#define AS_INDEX(x) ((INDEX)(x))
#else
#define INDEX int
#define AS_INDEX(x) (x)
#endif

__kernel __attribute__((reqd_work_group_size(TILE, TILE, 1)))
void probe_same(__global const REAL* restrict A,
              __global const REAL* restrict B,
              __global REAL* restrict C,
              const int M, const int N, const int K,
              const INDEX lda, const INDEX ldb, const INDEX ldc,
              const INDEX strideA, const INDEX strideB, const INDEX strideC STAMP_PARAMETER)
{
    STAMP_ENTER;
    A += get_group_id(2) * strideA;
    B += get_group_id(2) * strideB;
    C += get_group_id(2) * strideC;
    const int col = get_group_id(0) * TILE + get_local_id(0);
    const int row = get_group_id(1) * TILE + get_local_id(1);
    if (row >= M || col >= N)
        return;

    REAL acc = 0;
    for (int k = 0; k < K; ++k)
        acc += A[row * lda + k] * B[k * ldb + col];
    C[row * ldc + col] = acc;
    STAMP_EXIT;
}

__kernel
void probe_no_reqd(__global const REAL* restrict A,
              __global const REAL* restrict B,
              __global REAL* restrict C,
              const int M, const int N, const int K,
              const INDEX lda, const INDEX ldb, const INDEX ldc,
              const INDEX strideA, const INDEX strideB, const INDEX strideC STAMP_PARAMETER)
{
    STAMP_ENTER;
    A += get_group_id(2) * strideA;
    B += get_group_id(2) * strideB;
    C += get_group_id(2) * strideC;
    const int col = get_group_id(0) * TILE + get_local_id(0);
    const int row = get_group_id(1) * TILE + get_local_id(1);
    if (row >= M || col >= N)
        return;

    REAL acc = 0;
    for (int k = 0; k < K; ++k)
        acc += A[row * lda + k] * B[k * ldb + col];
    C[row * ldc + col] = acc;
    STAMP_EXIT;
}

__kernel __attribute__((reqd_work_group_size(TILE, TILE, 1)))
void probe_no_restrict(__global const REAL* A,
              __global const REAL* B,
              __global REAL* C,
              const int M, const int N, const int K,
              const INDEX lda, const INDEX ldb, const INDEX ldc,
              const INDEX strideA, const INDEX strideB, const INDEX strideC STAMP_PARAMETER)
{
    STAMP_ENTER;
    A += get_group_id(2) * strideA;
    B += get_group_id(2) * strideB;
    C += get_group_id(2) * strideC;
    const int col = get_group_id(0) * TILE + get_local_id(0);
    const int row = get_group_id(1) * TILE + get_local_id(1);
    if (row >= M || col >= N)
        return;

    REAL acc = 0;
    for (int k = 0; k < K; ++k)
        acc += A[row * lda + k] * B[k * ldb + col];
    C[row * ldc + col] = acc;
    STAMP_EXIT;
}

__kernel __attribute__((reqd_work_group_size(TILE, TILE, 1)))
void probe_no_batch(__global const REAL* restrict A,
              __global const REAL* restrict B,
              __global REAL* restrict C,
              const int M, const int N, const int K,
              const INDEX lda, const INDEX ldb, const INDEX ldc,
              const INDEX strideA, const INDEX strideB, const INDEX strideC STAMP_PARAMETER)
{
    STAMP_ENTER;
    const int col = get_group_id(0) * TILE + get_local_id(0);
    const int row = get_group_id(1) * TILE + get_local_id(1);
    if (row >= M || col >= N)
        return;

    REAL acc = 0;
    for (int k = 0; k < K; ++k)
        acc += A[row * lda + k] * B[k * ldb + col];
    C[row * ldc + col] = acc;
    STAMP_EXIT;
}

__kernel __attribute__((reqd_work_group_size(TILE, TILE, 1)))
void probe_global_id(__global const REAL* restrict A,
              __global const REAL* restrict B,
              __global REAL* restrict C,
              const int M, const int N, const int K,
              const INDEX lda, const INDEX ldb, const INDEX ldc,
              const INDEX strideA, const INDEX strideB, const INDEX strideC STAMP_PARAMETER)
{
    STAMP_ENTER;
    A += get_group_id(2) * strideA;
    B += get_group_id(2) * strideB;
    C += get_group_id(2) * strideC;
    const int col = get_global_id(0);
    const int row = get_global_id(1);
    if (row >= M || col >= N)
        return;

    REAL acc = 0;
    for (int k = 0; k < K; ++k)
        acc += A[row * lda + k] * B[k * ldb + col];
    C[row * ldc + col] = acc;
    STAMP_EXIT;
}

__kernel __attribute__((reqd_work_group_size(TILE, TILE, 1)))
void probe_batch_int(__global const REAL* restrict A,
              __global const REAL* restrict B,
              __global REAL* restrict C,
              const int M, const int N, const int K,
              const INDEX lda, const INDEX ldb, const INDEX ldc,
              const INDEX strideA, const INDEX strideB, const INDEX strideC STAMP_PARAMETER)
{
    STAMP_ENTER;
    const int z = get_group_id(2);
    A += z * strideA;
    B += z * strideB;
    C += z * strideC;
    const int col = get_group_id(0) * TILE + get_local_id(0);
    const int row = get_group_id(1) * TILE + get_local_id(1);
    if (row >= M || col >= N)
        return;

    REAL acc = 0;
    for (int k = 0; k < K; ++k)
        acc += A[row * lda + k] * B[k * ldb + col];
    C[row * ldc + col] = acc;
    STAMP_EXIT;
}

__kernel __attribute__((reqd_work_group_size(TILE, TILE, 1)))
void probe_batch_after(__global const REAL* restrict A,
              __global const REAL* restrict B,
              __global REAL* restrict C,
              const int M, const int N, const int K,
              const INDEX lda, const INDEX ldb, const INDEX ldc,
              const INDEX strideA, const INDEX strideB, const INDEX strideC STAMP_PARAMETER)
{
    STAMP_ENTER;
    const int col = get_group_id(0) * TILE + get_local_id(0);
    const int row = get_group_id(1) * TILE + get_local_id(1);
    if (row >= M || col >= N)
        return;

    A += get_group_id(2) * strideA;
    B += get_group_id(2) * strideB;
    C += get_group_id(2) * strideC;
    REAL acc = 0;
    for (int k = 0; k < K; ++k)
        acc += A[row * lda + k] * B[k * ldb + col];
    C[row * ldc + col] = acc;
    STAMP_EXIT;
}


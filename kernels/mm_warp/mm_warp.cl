// The top rungs of the ladder: C = A · B (row-major, leading dimensions and batch
// strides as in mm.cl) with 16-byte loads, conflict-free local memory, warp tiles
// and, optionally, double buffering.
//
// A work-group computes a BM×BN tile of C. Its threads form groups; a group computes a
// WM×WN part of the tile, and each thread of it a TM×TN patch in registers, as
// (TM/4)×(TN/4) pieces of 4×4 outputs spread over the group's part: neighbouring
// threads own neighbouring pieces, so their 16-byte reads of the slabs cover all
// the banks. With WM×WN = BM×BN the whole block is one group (the rung `vec4`);
// with a group of 32 threads, a group is a warp and its part a warp tile (`warp`):
// a warp then reads fewer distinct words of the slabs per step, and the values it
// reads are shared by fewer threads' registers.
//
// Per step along K the block stages a BM×BK slab of A and a BK×BN slab of B. Each
// thread brings 4 consecutive elements of a row at a time: one 16-byte load where
// VEC4 says every row starts 16-byte aligned and all 4 lie inside the matrix, else
// 4 guarded loads (edges read as zero). A is stored transposed, As[k][m], in rows
// of BM + PAD: the padding moves the k = 4 rows by 16 banks, so the transposed
// stores of a warp do not collide. With DOUBLE_BUFFER, the next slabs are read
// from global memory while this one is multiplied, into the other half of a
// double-sized buffer; one barrier per step then suffices.
//
// With ASYNC (mm and bmm), STAGES slabs are in flight at once, copied from global to
// local memory without passing through registers: cp.async on NVIDIA GPUs of compute
// capability 8.0 and later, each copy of a slab a commit group of its own. The loop
// waits for the oldest group, meets the other threads at one barrier, starts the copy
// of the slab STAGES - 1 ahead into the stage that the step before read, and
// multiplies. Each copy takes 16 bytes where VEC4 allows: A's slab is not transposed
// on the way (that takes a copy per element, which ran slower: docs/performance.md)
// but kept as rows of BK, every 4 rows A_SKEW elements further on, and its fragments
// are read 4 steps at a time (read_a4). An element outside the matrices is written as zero by
// the copy itself (source size 0). Elsewhere (older GPUs, other devices,
// oclgrind) the copies are loads and stores, and the same loop is correct.
//
// Split K: with k_slice < K, z runs over ranges of K of k_slice elements (a
// multiple of BK), and each block writes the partial tile of its range into its
// own M×N slice of C (strideC apart); mm_sum_slices then adds the slices. A small
// C gets enough blocks to fill the GPU that way. Without a split, k_slice = K and
// z is the batch of bmm.
//
// Compile-time parameters (-D options): BM, BN, BK, WM, WN, TM, TN; VEC4 and
// LOCAL4 (4-byte types only: LOCAL4 reads the slabs as 4-element vectors, 16-byte
// reads that ptxas also finds in the scalar code); DOUBLE_BUFFER; ASYNC and
// STAGES (2 to 4: the slabs in flight); DYNAMIC_SHARED (CUDA's: an error here); MIN_BLOCKS
// (CUDA's launch bounds); REAL (float, double, int); REDUCED (the reduced product,
// op rmm, with its pair sums made on the way to the slabs: see load_a); PAD (see
// above), SUM_BLOCK (the block of mm_sum_slices) and WIDE_INDEX (64-bit offsets, as
// in mm). Python owns every value and the rules they must keep (backends/warp.py,
// WarpConfig.problem); the defaults below are there so that the file compiles on
// its own.
// The CUDA twin, mm_warp.cu beside it, has the same kernels line for line.
// XB_FP64 is defined when REAL is double, to enable cl_khr_fp64.

#include "stamp.h"
#ifdef XB_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 8
#endif
#ifndef WM
#define WM 32
#endif
#ifndef WN
#define WN 64
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 8
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
#ifndef PAD
#define PAD 4
#endif
#ifndef SUM_BLOCK
#define SUM_BLOCK 256
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1  // blocks per multiprocessor that CUDA must leave registers for
#endif
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define REAL4 CAT(REAL, 4)

#define GROUP_THREADS ((WM / TM) * (WN / TN))
#define THREADS ((BM / WM) * (BN / WN) * GROUP_THREADS)
#define LDA_S (BM + PAD)  // row length of the transposed A slab in local memory
#ifdef ASYNC
// ASYNC's A slab, as A lies: rows of BK, every 4 rows A_SKEW elements further on, so
// that the 4 rows of a warp's 16-byte fragment reads (4 apart: ROW_OF) start in
// different quarters of the banks (4 rows are 4·BK + A_SKEW ≡ 8 words apart, mod 32).
#define A_SKEW 8
#define A_AT(m, k) ((m) * BK + (m) / 4 * A_SKEW + (k))
#define A_SLAB (BM * BK + BM / 4 * A_SKEW)
// A thread's pieces of the slabs lie THREADS pieces apart: THREADS / (BK / 4) rows of A's
// slab, a multiple of 4 (so that the skew moves by whole steps), and 4·THREADS elements
// of B's. Where each goes in a stage is the first one's place and p steps (copy_inside).
#define A_STEP (THREADS / (BK / 4) * (BK + A_SKEW / 4))
#define B_STEP (4 * THREADS)
#if THREADS % BK
#error "ASYNC takes a block whose threads are a multiple of BK"
#endif
#else
#define A_SLAB (BK * LDA_S)
#endif
#define A_LOADS (BM * BK / 4 / THREADS)  // 4-element pieces of the A slab per thread
#define B_LOADS (BK * BN / 4 / THREADS)
#ifdef ASYNC
#ifndef STAGES
#define STAGES 3
#endif
#ifdef REDUCED
#error "ASYNC copies the slabs as they are: the reduced product sums them on the way"
#endif
#elif defined(DOUBLE_BUFFER)
#define STAGES 2
#else
#define STAGES 1
#endif

// Elements col .. col + 3 of row `row` of X (rows × cols, leading dimension ld)
// into v[0..3]; those outside the matrix read as zero. With `guarded` 0 the caller
// knows that all four lie inside, and the checks compile away.
inline void load4(REAL* v, __global const REAL* restrict X, const INDEX ld,
                  const int row, const int col,
                  const int rows, const int cols, const int guarded)
{
    if (!guarded || (row < rows && col + 3 < cols)) {
        __global const REAL* p = X + row * ld + col;
#ifdef VEC4
        const REAL4 q = *(__global const REAL4*)p;
        v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
#else
        v[0] = p[0]; v[1] = p[1]; v[2] = p[2]; v[3] = p[3];
#endif
    } else {
        for (int c = 0; c < 4; ++c)
            v[c] = (row < rows && col + c < cols) ? X[row * ld + col + c] : (REAL)0;
    }
}

// Piece (row, col .. col + 3) of the A slab and of the B slab, as load4 does: RAW
// elements per piece in registers. For the reduced product (REDUCED), M and N are
// those of the (M/2)×(N/2) output and a piece is made of pair sums: row `row` of A
// is rows 2·row and 2·row + 1 of the full A added, and columns col .. col + 3 of B
// are its columns 2·col .. 2·col + 7 added two by two. The loads bring both rows
// (all eight columns); the sums are made when the piece is stashed (A_VALUE,
// B_VALUE), not here: an addition here would wait for the loads at once, instead
// of while the slab before is multiplied (measured: twice as slow).
#ifdef REDUCED
#define RAW 8
#define FULL(i) (2 * (i))  // the first row of A (column of B) that row (column) i sums
#define A_VALUE(v, c) ((v)[c] + (v)[4 + (c)])
#define B_VALUE(v, c) ((v)[2 * (c)] + (v)[2 * (c) + 1])
#else
#define RAW 4
#define FULL(i) (i)
#define A_VALUE(v, c) ((v)[c])
#define B_VALUE(v, c) ((v)[c])
#endif

inline void load_a(REAL* v, __global const REAL* restrict A, const INDEX lda,
                   const int row, const int col,
                   const int rows, const int cols, const int guarded)
{
#ifdef REDUCED
    load4(v, A, lda, 2 * row, col, 2 * rows, cols, guarded);
    load4(v + 4, A, lda, 2 * row + 1, col, 2 * rows, cols, guarded);
#else
    load4(v, A, lda, row, col, rows, cols, guarded);
#endif
}

inline void load_b(REAL* v, __global const REAL* restrict B, const INDEX ldb,
                   const int row, const int col,
                   const int rows, const int cols, const int guarded)
{
#ifdef REDUCED
    load4(v, B, ldb, row, 2 * col, rows, 2 * cols, guarded);
    load4(v + 4, B, ldb, row, 2 * col + 4, rows, 2 * cols, guarded);
#else
    load4(v, B, ldb, row, col, rows, cols, guarded);
#endif
}

// This thread's pieces of the slabs at k0, from global memory into registers;
// `guarded` 0: the slabs lie inside the matrices.
inline void fetch(REAL* a, REAL* b,
                  __global const REAL* restrict A, __global const REAL* restrict B,
                  const int M, const int N, const int K,
                  const INDEX lda, const INDEX ldb,
                  const int row0, const int col0, const int k0,
                  const int thread, const int guarded)
{
    for (int p = 0; p < A_LOADS; ++p) {
        const int piece = thread + p * THREADS;
        load_a(a + RAW * p, A, lda, row0 + piece / (BK / 4), k0 + piece % (BK / 4) * 4, M, K,
               guarded);
    }
    for (int p = 0; p < B_LOADS; ++p) {
        const int piece = thread + p * THREADS;
        load_b(b + RAW * p, B, ldb, k0 + piece / (BN / 4), col0 + piece % (BN / 4) * 4, K, N,
               guarded);
    }
}

// Where this thread's pieces of the slabs at k0 start in A and B, for slabs inside
// K. Made once; each slab then moves them BK columns right in A and BK rows down
// in B (fetch_inside), so that its loads need no arithmetic. A row below M reads
// row M - 1 instead, and a piece of columns right of N the last piece (N is then
// a multiple of 4, see unchecked): their products land outside C and are never
// stored, and the edge tiles load as fast as the inner ones.
inline void sources(__global const REAL** a_src, __global const REAL** b_src,
                    __global const REAL* restrict A, __global const REAL* restrict B,
                    const int M, const int N, const INDEX lda, const INDEX ldb,
                    const int row0, const int col0, const int k0,
                    const int thread)
{
    for (int p = 0; p < A_LOADS; ++p) {
        const int piece = thread + p * THREADS;
        const int row = min(row0 + piece / (BK / 4), M - 1);
        a_src[p] = A + FULL(row) * lda + k0 + piece % (BK / 4) * 4;
    }
    for (int p = 0; p < B_LOADS; ++p) {
        const int piece = thread + p * THREADS;
        const int col = min(col0 + piece % (BN / 4) * 4, N - 4);
        b_src[p] = B + (k0 + piece / (BN / 4)) * ldb + FULL(col);
    }
}

// fetch(..., guarded 0) from those pointers, which then move on to the next slabs.
inline void fetch_inside(REAL* a, REAL* b,
                         __global const REAL** a_src, __global const REAL** b_src,
                         const INDEX lda, const INDEX ldb)
{
    for (int p = 0; p < A_LOADS; ++p) {
        load_a(a + RAW * p, a_src[p], lda, 0, 0, 1, 4, 0);
        a_src[p] += BK;
    }
    for (int p = 0; p < B_LOADS; ++p) {
        load_b(b + RAW * p, b_src[p], ldb, 0, 0, 1, 4, 0);
        b_src[p] += BK * ldb;
    }
}

// The same pieces from registers into one stage of the local slabs.
inline void stash(__local REAL* As, __local REAL* Bs, const REAL* a, const REAL* b,
                  const int thread)
{
    for (int p = 0; p < A_LOADS; ++p) {
        const int piece = thread + p * THREADS;
        const int m = piece / (BK / 4), k = piece % (BK / 4) * 4;
        for (int c = 0; c < 4; ++c)
            As[(k + c) * LDA_S + m] = A_VALUE(a + RAW * p, c);
    }
    for (int p = 0; p < B_LOADS; ++p) {
        const int piece = thread + p * THREADS;
        const int k = piece / (BN / 4), n = piece % (BN / 4) * 4;
        for (int c = 0; c < 4; ++c)
            Bs[k * BN + n + c] = B_VALUE(b + RAW * p, c);
    }
}

#ifdef ASYNC
// The copies of ASYNC: one element (copy1) or 4 consecutive ones (copy4) from src to
// dst in local memory, of which the first `valid` come from src and the rest are
// zero. cp.async where the GPU has it (NVIDIA's, as inline PTX: XB_PTX) (src is then not read past `valid`), else loads
// and stores. Each slab's copies are a commit group (COPIES_COMMIT); COPIES_WAIT lets
// this thread's STAGES - 2 newest groups go on and waits for the older ones.
#if defined(XB_PTX) && XB_PTX >= 80
#define CP_ASYNC
#define SHARED_ADDRESS(p) ((uint)(ulong)(p))
// A slab pointer the compiler may not make again from the array's address: made
// once, before the loop (see COPY).
#define KEEP_ADDRESS(p) asm volatile("" : "+l"(p))
#else
#define KEEP_ADDRESS(p)
#endif
inline void copy1(__local REAL* dst, __global const REAL* src, const int valid)
{
#ifdef CP_ASYNC
    if (sizeof(REAL) == 8)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;"
                     ::"r"(SHARED_ADDRESS(dst)), "l"(src), "r"(valid * 8));
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;"
                     ::"r"(SHARED_ADDRESS(dst)), "l"(src), "r"(valid * 4));
#else
    *dst = valid ? *src : (REAL)0;
#endif
}

inline void copy4(__local REAL* dst, __global const REAL* src, const int valid)
{
#if defined(CP_ASYNC) && defined(VEC4)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                 ::"r"(SHARED_ADDRESS(dst)), "l"(src), "r"(valid * 4));
#else
    for (int c = 0; c < 4; ++c)
        copy1(dst + c, src + c, c < valid);
#endif
}

#ifdef CP_ASYNC
#define COPIES_COMMIT() asm volatile("cp.async.commit_group;" ::)
#if STAGES == 2
#define COPIES_WAIT() asm volatile("cp.async.wait_group 0;" ::)
#elif STAGES == 3
#define COPIES_WAIT() asm volatile("cp.async.wait_group 1;" ::)
#elif STAGES == 4
#define COPIES_WAIT() asm volatile("cp.async.wait_group 2;" ::)
#else
#error "STAGES must be 2, 3 or 4"
#endif
#else
#define COPIES_COMMIT()
#define COPIES_WAIT()
#endif

// This thread's pieces of the slabs at k0 copied into one stage of the local slabs,
// to the places stash gives them; outside the matrices, zeros.
inline void copy_slabs(__local REAL* As, __local REAL* Bs,
                       __global const REAL* restrict A, __global const REAL* restrict B,
                       const int M, const int N, const int K,
                       const INDEX lda, const INDEX ldb,
                       const int row0, const int col0, const int k0,
                       const int thread)
{
    for (int p = 0; p < A_LOADS; ++p) {
        const int piece = thread + p * THREADS;
        const int m = piece / (BK / 4), k = piece % (BK / 4) * 4;
        const int valid = row0 + m < M ? max(0, min(4, K - k0 - k)) : 0;
        copy4(&As[A_AT(m, k)], valid ? A + (row0 + m) * lda + k0 + k : A, valid);
    }
    for (int p = 0; p < B_LOADS; ++p) {
        const int piece = thread + p * THREADS;
        const int k = piece / (BN / 4), n = piece % (BN / 4) * 4;
        const int valid = k0 + k < K ? max(0, min(4, N - col0 - n)) : 0;
        copy4(&Bs[k * BN + n], valid ? B + (k0 + k) * ldb + col0 + n : B, valid);
    }
}

// copy_slabs for slabs inside K, from the pointers of sources, which then move on,
// to where this thread's pieces go: the first one's place in the stage (as_to, bs_to),
// then a step a piece (A_STEP, B_STEP).
inline void copy_inside(__local REAL* as_to, __local REAL* bs_to,
                        __global const REAL** a_src, __global const REAL** b_src,
                        const INDEX ldb)
{
    for (int p = 0; p < A_LOADS; ++p) {
        copy4(as_to + p * A_STEP, a_src[p], 4);
        a_src[p] += BK;
    }
    for (int p = 0; p < B_LOADS; ++p) {
        copy4(bs_to + p * B_STEP, b_src[p], 4);
        b_src[p] += BK * ldb;
    }
}
#endif

// Row i of a thread's patch, in its block's tile, and column j: piece i/4 of the
// rows lies (i/4)·(WM/TM)·4 rows below the first (m0), and likewise for columns.
#define ROW_OF(i) (m0 + (i) / 4 * 4 * (WM / TM) + (i) % 4)
#define COL_OF(j) (n0 + (j) / 4 * 4 * (WN / TN) + (j) % 4)

// This thread's TN values of row k of the B slab.
inline void read_b(REAL* b, __local const REAL* bs, const int k, const int n0)
{
#ifdef LOCAL4
    for (int j = 0; j < TN; j += 4) {
        const REAL4 q = *(__local const REAL4*)&bs[k * BN + COL_OF(j)];
        b[j] = q.x; b[j + 1] = q.y; b[j + 2] = q.z; b[j + 3] = q.w;
    }
#else
    for (int j = 0; j < TN; ++j)
        b[j] = bs[k * BN + COL_OF(j)];
#endif
}

#ifdef ASYNC
// ASYNC's A fragments of steps k .. k + 3 (its slab as rows: A_AT): a[s][i] is row
// ROW_OF(i) at step k + s, one 16-byte read a row. (Two steps of 8-byte reads ran as
// fast on an H200, and ptxas gave both the same registers: docs/performance.md.)
inline void read_a4(REAL a[4][TM], __local const REAL* as, const int k, const int m0)
{
    for (int i = 0; i < TM; ++i) {
#ifdef LOCAL4
        const REAL4 q = *(__local const REAL4*)&as[A_AT(ROW_OF(i), k)];
        a[0][i] = q.x; a[1][i] = q.y; a[2][i] = q.z; a[3][i] = q.w;
#else
        for (int s = 0; s < 4; ++s)
            a[s][i] = as[A_AT(ROW_OF(i), k + s)];
#endif
    }
}
#else
// The fragments of step k: this thread's TM values of row k of the transposed A
// slab and its TN values of row k of the B slab.
inline void read_fragments(REAL* a, REAL* b,
                           __local const REAL* as, __local const REAL* bs, const int k,
                           const int m0, const int n0)
{
#ifdef LOCAL4
    for (int i = 0; i < TM; i += 4) {
        const REAL4 q = *(__local const REAL4*)&as[k * LDA_S + ROW_OF(i)];
        a[i] = q.x; a[i + 1] = q.y; a[i + 2] = q.z; a[i + 3] = q.w;
    }
#else
    for (int i = 0; i < TM; ++i)
        a[i] = as[k * LDA_S + ROW_OF(i)];
#endif
    read_b(b, bs, k, n0);
}
#endif

// One step: the outer product of the fragments, added to the patch.
inline void multiply(REAL acc[TM][TN], const REAL* a, const REAL* b)
{
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j)
            acc[i][j] += a[i] * b[j];
}

__kernel __attribute__((reqd_work_group_size(THREADS, 1, 1)))
void mm_warp(__global const REAL* restrict A,
             __global const REAL* restrict B,
             __global REAL* restrict C,
             const int M, const int N, const int K,
             const INDEX lda, const INDEX ldb, const INDEX ldc,
             const INDEX strideA, const INDEX strideB, const INDEX strideC,
             const INDEX k_slice STAMP_PARAMETER)
{
    STAMP_ENTER;
#ifdef DYNAMIC_SHARED
    // CUDA's slabs past the 48 KB a block may declare. OpenCL's local memory sized at
    // launch (a __local argument) counts against the same CL_DEVICE_LOCAL_MEM_SIZE as
    // what a kernel declares, 48 KB on NVIDIA's: there is nothing past it to ask for.
#error "DYNAMIC_SHARED is CUDA's: an OpenCL kernel's local memory is all it may declare"
    __local REAL* const As = slabs;
    __local REAL* const Bs = slabs + STAGES * A_SLAB;
#else
    __local REAL As[STAGES * A_SLAB] __attribute__((aligned(16)));
    __local REAL Bs[STAGES * BK * BN] __attribute__((aligned(16)));
#endif

    // z: the batch, or the K range of a split product (see above).
    // A K range is a whole number of slabs: no slab crosses into the next range.
    const int slices = (K + k_slice - 1) / k_slice;
    const int batch = get_group_id(2) / slices;
    const int k_begin = get_group_id(2) % slices * k_slice;
    const int k_end = min(AS_INDEX(K), k_begin + k_slice);
    A += batch * strideA;
    B += batch * strideB;
    C += get_group_id(2) * strideC;
    const int thread = get_local_id(0);
    const int row0 = get_group_id(1) * BM;
    const int col0 = get_group_id(0) * BN;
    // Where this thread's first 4×4 piece lies in the block's tile: its group's
    // part, then its place among the group's threads.
    const int group = thread / GROUP_THREADS, lane = thread % GROUP_THREADS;
    const int m0 = group / (BN / WN) * WM + lane / (WN / TN) * 4;
    const int n0 = group % (BN / WN) * WN + lane % (WN / TN) * 4;

    // Slabs inside K load without checks, from pointers made once (see sources):
    // the checks, branches and address arithmetic were a tenth of the instructions
    // of a slab of BK = 8 steps (docs/performance.md). That takes a tile inside the
    // matrices, or one whose pieces of 4 columns cannot straddle N.
    const int unchecked = col0 + BN <= N || N % 4 == 0;
    __global const REAL* a_src[A_LOADS];
    __global const REAL* b_src[B_LOADS];
    sources(a_src, b_src, A, B, M, N, lda, ldb, row0, col0, k_begin, thread);
    // The slabs at k0, in the order of k0: the fast path's pointers follow them.
#define FETCH(k0)                                                                      \
    if (unchecked && (k0) + BK <= K)                                                   \
        fetch_inside(a_next, b_next, a_src, b_src, lda, ldb);                          \
    else                                                                               \
        fetch(a_next, b_next, A, B, M, N, K, lda, ldb, row0, col0, k0, thread, 1)

    REAL acc[TM][TN];
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j)
            acc[i][j] = 0;
#ifndef ASYNC
    REAL a_next[RAW * A_LOADS], b_next[RAW * B_LOADS];
#endif

#ifdef ASYNC
    // The slabs at k0 into stage s, in the order of k0 (the fast path's pointers, and
    // the places of this thread's first pieces in stage 0: made once). Kept from the
    // compilers: both would make the slabs' address again at every copy, which for
    // cp.async on sm_90 reads the block's rank in its cluster (S2UR SR_CgaCtaId)
    // inside the loop (docs/performance.md).
    __local REAL* as_to = As + A_AT(thread / (BK / 4), thread % (BK / 4) * 4);
    __local REAL* bs_to = Bs + 4 * thread;
    KEEP_ADDRESS(as_to);
    KEEP_ADDRESS(bs_to);
#define COPY(k0, s)                                                                    \
    if (unchecked && (k0) + BK <= K)                                                   \
        copy_inside(as_to + (s) * A_SLAB, bs_to + (s) * BK * BN, a_src, b_src, ldb);   \
    else                                                                               \
        copy_slabs(As + (s) * A_SLAB, Bs + (s) * BK * BN, A, B, M, N, K, lda, ldb,     \
                   row0, col0, k0, thread)
    // The first STAGES - 1 slabs set out, a commit group each (empty past the range).
    for (int s = 0; s < STAGES - 1; ++s) {
        if (k_begin + s * BK < k_end) {
            COPY(k_begin + s * BK, s);
        }
        COPIES_COMMIT();
    }
    for (int k0 = k_begin, stage = 0; k0 < k_end; k0 += BK) {
        // This slab's group is the oldest in flight: once it has landed, for every
        // thread (the barrier), the slab is whole; and every thread has finished the
        // step before, so the stage that step read takes the copy STAGES - 1 ahead.
        COPIES_WAIT();
        barrier(CLK_LOCAL_MEM_FENCE);
        if (k0 + (STAGES - 1) * BK < k_end) {
            COPY(k0 + (STAGES - 1) * BK, stage == 0 ? STAGES - 1 : stage - 1);
        }
        COPIES_COMMIT();
#else
#ifdef DOUBLE_BUFFER
    FETCH(k_begin);
    stash(As, Bs, a_next, b_next, thread);
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
    for (int k0 = k_begin, stage = 0; k0 < k_end; k0 += BK) {
#ifdef DOUBLE_BUFFER
        // The next slabs travel from global memory while this one is multiplied.
        if (k0 + BK < k_end) {
            FETCH(k0 + BK);
        }
#else
        FETCH(k0);
        stash(As, Bs, a_next, b_next, thread);
        barrier(CLK_LOCAL_MEM_FENCE);
#endif
#endif
        __local const REAL* as = As + stage * A_SLAB;
        __local const REAL* bs = Bs + stage * BK * BN;
        // Unrolled, so that the compiler reads the fragments of step k + 1 while
        // step k multiplies; rolled, each step waited for its own reads
        // (docs/performance.md has the numbers).
#ifdef ASYNC
#pragma unroll
        for (int k = 0; k < BK; k += 4) {
            REAL a[4][TM];
            read_a4(a, as, k, m0);
#pragma unroll
            for (int s = 0; s < 4; ++s) {
                REAL b[TN];
                read_b(b, bs, k + s, n0);
                multiply(acc, a[s], b);
            }
        }
#else
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            REAL a[TM], b[TN];
            read_fragments(a, b, as, bs, k, m0, n0);
            multiply(acc, a, b);
        }
#endif
#ifdef ASYNC
        stage = stage + 1 == STAGES ? 0 : stage + 1;
#else
#ifdef DOUBLE_BUFFER
        // Nobody reads the other stage now: the barrier below ended its last use.
        stage ^= 1;
        if (k0 + BK < k_end)
            stash(As + stage * A_SLAB, Bs + stage * BK * BN, a_next, b_next, thread);
#endif
        // Before the next step: its slabs are complete, and no one still reads
        // the ones its stash overwrites.
        barrier(CLK_LOCAL_MEM_FENCE);
#endif
    }

    for (int i = 0; i < TM; ++i) {
        const int row = row0 + ROW_OF(i);
        for (int j = 0; j < TN; j += 4) {
            const int col = col0 + COL_OF(j);
            __global REAL* c = C + row * ldc + col;
#ifdef VEC4
            if (row < M && col + 3 < N) {
                REAL4 q;
                q.x = acc[i][j]; q.y = acc[i][j + 1]; q.z = acc[i][j + 2]; q.w = acc[i][j + 3];
                *(__global REAL4*)c = q;
                continue;
            }
#endif
            for (int c4 = 0; c4 < 4; ++c4)
                if (row < M && col + c4 < N)
                    c[c4] = acc[i][j + c4];
        }
    }
    STAMP_EXIT;
}

// C = the sum of the `slices` partial products of a split launch: W holds them as
// M×N matrices one after another. One thread per element of C.
__kernel __attribute__((reqd_work_group_size(SUM_BLOCK, 1, 1)))
void mm_sum_slices(__global const REAL* restrict W,
                   __global REAL* restrict C,
                   const int M, const int N, const INDEX ldc, const int slices STAMP_PARAMETER)
{
    STAMP_ENTER;
    const INDEX element = AS_INDEX(get_group_id(0)) * SUM_BLOCK + get_local_id(0);
    if (element >= AS_INDEX(M) * N)
        return;
    REAL sum = 0;
    for (int s = 0; s < slices; ++s)
        sum += W[s * AS_INDEX(M) * N + element];
    C[element / N * ldc + element % N] = sum;
    STAMP_EXIT;
}

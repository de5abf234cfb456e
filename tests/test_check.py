"""The code-equality check itself: it passes correct results and fails wrong ones."""

from __future__ import annotations

import numpy as np

from xbackend.problems import Reference, Shape, check, make_operands


def _operands(M=37, K=53, N=29):
    return make_operands(Shape(M, K, N), seed=7)


def test_float32_product_passes():
    A, B = _operands()
    verdict = check(A @ B, Reference.of(A, B))
    assert verdict.equal and verdict.method == "full"


def test_unwritten_element_fails():
    A, B = _operands()
    C = A @ B
    C[3, 4] = np.nan  # what a poisoned, never-written element looks like
    verdict = check(C, Reference.of(A, B))
    assert not verdict.equal
    assert verdict.nan_count == 1


def test_a_missing_term_fails():
    A, B = _operands()
    C = A[:, :-1] @ B[:-1, :]  # an off-by-one in the K loop
    assert not check(C, Reference.of(A, B)).equal


def test_transposed_indexing_fails():
    A, B = make_operands(Shape(24, 24, 24), seed=3)
    assert not check(A @ B.T, Reference.of(A, B)).equal


def test_wrong_shape_fails():
    A, B = _operands()
    assert not check((A @ B)[:-1], Reference.of(A, B)).equal


def test_operands_are_seeded_and_not_trivial():
    shape = Shape(9, 8, 7)
    A1, B1 = make_operands(shape, seed=1)
    A2, _ = make_operands(shape, seed=1)
    A3, _ = make_operands(shape, seed=2)
    np.testing.assert_array_equal(A1, A2)
    assert not np.array_equal(A1, A3)
    assert np.count_nonzero(A1) == A1.size and np.unique(B1).size > B1.size // 2
    assert A1.dtype == np.float32


def test_a_missing_term_fails_at_large_k():
    # Where the worst-case bound K·eps would be about half a term wide.
    A, B = make_operands(Shape(64, 4096, 64), seed=5)
    reference = Reference.of(A, B)
    assert check(A @ B, reference).equal
    dropped = check(A[:, :-1] @ B[:-1, :], reference)
    assert not dropped.equal and dropped.bound_ratio > 10


def test_correct_products_stay_well_inside_the_tolerance():
    for K in (1, 2, 16, 17, 100, 1000, 3000):
        A, B = make_operands(Shape(50, K, 40), seed=K)
        verdict = check(A @ B, Reference.of(A, B))
        assert verdict.equal and verdict.bound_ratio < 0.5, (K, verdict)


def test_a_result_of_several_chunks_is_checked_to_its_last_element():
    """The check goes a chunk at a time: an error in the last, partial chunk and a NaN in
    a middle one are found, and the largest error is the whole result's."""
    from xbackend import problems

    A, B = _operands(M=301, K=40, N=517)  # 155,617 elements: two chunks and a part
    assert (A.shape[0] * B.shape[1]) % problems._CHECK_CHUNK != 0
    assert A.shape[0] * B.shape[1] > 2 * problems._CHECK_CHUNK
    reference = Reference.of(A, B)
    correct = check(A @ B, reference)
    assert correct.equal
    wrong = A @ B
    wrong[-1, -1] += 1.0  # the very last element
    verdict = check(wrong, reference)
    assert not verdict.equal and verdict.max_abs_error >= 0.99
    poisoned = A @ B
    poisoned.reshape(-1)[problems._CHECK_CHUNK + 5] = np.nan
    assert check(poisoned, reference).nan_count == 1


def test_a_nan_in_the_reference_fails_the_check():
    """Chunk by chunk, a NaN is kept (as one whole-array max kept it): never a pass."""
    A, B = _operands(M=301, K=40, N=517)
    reference = Reference.of(A, B)
    reference.product.reshape(-1)[70_000] = np.nan
    verdict = check(A @ B, reference)
    assert not verdict.equal and np.isnan(verdict.bound_ratio)


def test_a_check_split_between_threads_says_what_one_thread_says(monkeypatch):
    import xbackend.problems as problems

    A, B = make_operands(Shape(515, 40, 509), seed=5)  # 262,135 elements: 4 chunks, a short last
    reference = Reference.of(A, B)
    C = A @ B
    C[300, 7] += 0.01  # a wrong element in the third chunk

    def by(threads):
        monkeypatch.setattr(problems, "_check_threads", lambda: threads)
        return check(C, reference)

    one, three = by(1), by(3)
    assert len(problems._parts(C.size)) == 3
    assert not one.equal and one.bound_ratio > 1
    assert three == one
    C[-1, -1] = np.inf  # one not finite in the last chunk
    C[2, 2] = np.nan  # and one in the first
    assert by(3).nan_count == by(1).nan_count == 2


def test_a_forked_child_checks_with_threads_of_its_own():
    """The check's threads are made once per process: a child forked after the parent's
    first split check makes its own (the parent's pool has no threads there)."""
    import os

    import xbackend.problems as problems

    A, B = make_operands(Shape(515, 40, 509), seed=5)
    reference, C = Reference.of(A, B), A @ B  # no BLAS in the child
    assert check(C, reference).equal  # the parent's pool, made where it splits
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's outcome is read through the pipe
        try:
            ok = problems._POOL is None and check(C, reference).equal
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    said = os.read(read, 1)
    os.waitpid(child, 0)
    assert said == b"1"

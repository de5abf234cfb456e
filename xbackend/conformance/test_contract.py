"""The contract around the products: bad operands refused by name, and ``close()``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xbackend
from xbackend.operations import OPERATIONS
from xbackend.pytest_plugin import open_backend
from xbackend.results.plan import Target

F32 = np.float32


def _ones(*shape: int, dtype: Any = F32) -> np.ndarray[Any, Any]:
    return np.ones(shape, dtype)


BAD_OPERANDS = {
    "inner dimensions differ": ("mm", _ones(3, 4), _ones(5, 2)),
    "a vector": ("mm", _ones(4), _ones(4, 2)),
    "a batch to mm": ("mm", _ones(2, 3, 4), _ones(2, 4, 5)),
    "dtypes differ": ("mm", _ones(3, 4), _ones(4, 2, dtype=np.float64)),
    "complex": ("mm", _ones(3, 4, dtype=np.complex64), _ones(4, 2, dtype=np.complex64)),
    "batch sizes differ": ("bmm", _ones(2, 3, 4), _ones(3, 4, 5)),
    "odd M for rmm": ("rmm", _ones(3, 4), _ones(4, 6)),
}


@pytest.mark.parametrize("case", list(BAD_OPERANDS))
def test_bad_operands_are_unsupported(backend: xbackend.Backend, case: str) -> None:
    op, A, B = BAD_OPERANDS[case]
    for variant in backend.variants(op):
        with pytest.raises(xbackend.UnsupportedParameter):
            backend.measure(A, B, variant, op=op, warmup=0, samples=0)


def test_unknown_variant_and_operation(backend: xbackend.Backend) -> None:
    A, B = _ones(3, 4), _ones(4, 2)
    with pytest.raises(xbackend.UnsupportedParameter, match="no variant"):
        backend.matmul(A, B, variant="no-such-variant")
    with pytest.raises(xbackend.UnsupportedParameter):
        backend.measure(A, B, "naive", op="no-such-op", warmup=0, samples=0)


def test_every_operation_has_variants(backend: xbackend.Backend) -> None:
    for op in OPERATIONS:
        assert backend.variants(op), f"{backend.name} has no variant of {op}"


def test_close_ends_the_backend(backend_target: Target) -> None:
    """A product after ``close()`` is an error, and closing twice is harmless."""
    opened = open_backend(backend_target)
    A, B = _ones(3, 4), _ones(4, 2)
    variant = opened.runnable_variants()[0]
    np.testing.assert_array_equal(opened.matmul(A, B, variant=variant), 4 * _ones(3, 2))
    with opened:
        pass  # a with block closes it
    opened.close()
    with pytest.raises(xbackend.XBackendError, match="closed"):
        opened.matmul(A, B, variant=variant)

"""The CPU's vendor line not hostage to its own threads (issue 53): NumPy's BLAS runs on
the cores the host leaves it, its thread count recorded per point, and set back after."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from xbackend.backends.cpu import CpuBackend
from xbackend.measuring import host_load
from xbackend.measuring.timing import Sampling

threadpoolctl = pytest.importorskip("threadpoolctl")


@pytest.mark.parametrize(
    "others,cores,left", [(0.0, 2, 2), (0.2, 2, 2), (0.3, 2, 1), (1.0, 2, 1), (1.9, 2, 1),
                          (1.2, 8, 7), (1.3, 8, 6), (None, 4, 4)],
)  # fmt: skip
def test_the_cores_left_are_those_other_processes_did_not_take(monkeypatch, others, cores, left):
    found = {} if others is None else {"others_cores": others}
    monkeypatch.setattr(host_load, "between", lambda begin, end: found)
    assert host_load.cores_left(cores) == left


def _blas_threads() -> int:
    pools = threadpoolctl.threadpool_info()
    return int(next(pool["num_threads"] for pool in pools if pool["user_api"] == "blas"))


def test_a_vendor_point_records_its_blas_threads_and_sets_them_back(monkeypatch):
    monkeypatch.setattr(importlib.import_module("xbackend.backends.cpu"), "cores_left", lambda: 1)
    rng = np.random.default_rng(5304)
    A = rng.standard_normal((96, 84)).astype(np.float32)
    B = rng.standard_normal((84, 96)).astype(np.float32)
    before = _blas_threads()
    m = CpuBackend().measure(A, B, "vendor", sampling=Sampling(min_samples=3, max_samples=5))
    np.testing.assert_allclose(m.result, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)
    assert m.host_load is not None and m.host_load["blas_threads"] == 1.0
    assert _blas_threads() == before
    naive = CpuBackend().measure(A, B, "naive", sampling=Sampling(min_samples=3, max_samples=3))
    assert naive.host_load is not None and "blas_threads" not in naive.host_load

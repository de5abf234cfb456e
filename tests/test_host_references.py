"""The references of a run shared by the workers of one host
(xbackend/cluster/host_references.py)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from xbackend.operations import Shape, operation
from xbackend.problems import Reference, check
from xbackend.sweep.measure import Inputs

# The module lives in the cluster package, which needs Dask to import: without it (a GPU
# machine without the extra), a skip rather than an error at collection.
pytest.importorskip("distributed", reason="Dask is not installed ([dask] extra)")

from xbackend.cluster.host_references import HostReferences, run_folder


def _operands(seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((24, 16), np.float32), rng.standard_normal((16, 20), np.float32)


def test_workers_asking_at_once_get_one_reference_made_once(tmp_path: Path) -> None:
    A, B = _operands()
    made, got = [], []

    def make() -> Reference:
        made.append(threading.get_ident())
        time.sleep(0.2)  # the others ask meanwhile
        return Reference.of(A, B)

    def ask() -> None:
        got.append(HostReferences(tmp_path / "run").reference("mm-float32-24x16x20", make))

    workers = [threading.Thread(target=ask) for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(made) == 1
    direct = Reference.of(A, B)
    for reference in got:
        np.testing.assert_array_equal(reference.product, direct.product)
        np.testing.assert_array_equal(reference.magnitude, direct.magnitude)
        assert (reference.K, reference.exact) == (direct.K, direct.exact)
        assert not reference.product.flags.writeable  # a map of the file, read-only


def test_a_folder_that_cannot_be_made_leaves_each_worker_its_own(tmp_path: Path) -> None:
    (tmp_path / "run").write_text("a file where the folder would be")
    shared = HostReferences(tmp_path / "run" / "references")
    A, B = _operands()
    make = _Counted(A, B)
    first = shared.reference("r", make)
    shared.reference("r", make)
    assert make.count == 2
    np.testing.assert_array_equal(first.product, Reference.of(A, B).product)


def test_the_run_folder_goes_when_removed(tmp_path: Path) -> None:
    shared = HostReferences(tmp_path / "run")
    A, B = _operands()
    shared.reference("r", lambda: Reference.of(A, B))
    assert any((tmp_path / "run").iterdir())
    shared.remove()
    assert not (tmp_path / "run").exists()


def test_each_run_has_its_own_folder() -> None:
    assert run_folder("a") != run_folder("b")
    assert run_folder("a").name == "references-a"


@pytest.mark.parametrize("op", ["mm", "rmm"])
def test_a_shared_reference_checks_as_a_made_one(tmp_path: Path, op: str) -> None:
    shape, seed = Shape(32, 24, 32), 11
    alone = Inputs(shape, seed, 1)
    shared = Inputs(shape, seed, 1, HostReferences(tmp_path / "run"))
    other = Inputs(shape, seed, 1, HostReferences(tmp_path / "run"))  # reads what shared made
    operation_ = operation(op)
    A, B = alone.operands(operation_, "float32")
    result = operation_.reference(A.astype(np.float64), B.astype(np.float64))[0]
    result = result.astype(np.float32)
    right = result.reshape(-1)[5]
    result.reshape(-1)[5] = np.nan  # an unwritten element fails either way
    for inputs in (alone, shared, other):
        found = check(result, inputs.reference(operation_, "float32"))
        assert not found.equal and found.nan_count == 1
    result.reshape(-1)[5] = right + 1e3  # a wrong element: the same verdict and numbers
    bad = check(result, other.reference(operation_, "float32"))
    assert not bad.equal and bad == check(result, alone.reference(operation_, "float32"))
    assert len(list((tmp_path / "run").glob("*.json"))) == 1


def test_a_parent_folder_open_to_others_or_a_link_is_not_shared_through(tmp_path: Path) -> None:
    A, B = _operands()
    open_to_all = tmp_path / "open"
    open_to_all.mkdir(mode=0o777)
    open_to_all.chmod(0o777)
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")
    for parent in (open_to_all, link):
        make = _Counted(A, B)
        shared = HostReferences(parent / "references-run")
        shared.reference("r", make)
        shared.reference("r", make)
        assert make.count == 2  # each made its own: nothing written there
        assert not (parent / "references-run").exists()


class _Counted:
    """``make`` for HostReferences.reference, counting its calls."""

    def __init__(self, A: np.ndarray, B: np.ndarray):
        self.A, self.B, self.count = A, B, 0

    def __call__(self) -> Reference:
        self.count += 1
        return Reference.of(self.A, self.B)

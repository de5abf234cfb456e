"""The pytest plugin shipped with the package, as a third-party backend's repository uses
it: ``pytest --pyargs xbackend.conformance --backend NAME`` in a subprocess, against the
example backend of ``examples/numpy_backend`` registered through an entry point in a
temporary dist-info (nothing is installed), and against broken copies of it; and as a
student uses it, with ``--kernels DIR`` adding their kernels to the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from xbackend.pytest_plugin import REQUIRE_ENV, needs_backend, required, skip_or_fail

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "numpy_backend"
ASSIGNMENT = ROOT / "examples" / "assignment"

# Broken copies of the example: one wrong element, a poison that poisons nothing, a
# backend that is never available, integers summed in float32 (exact only below 2**24),
# and results remembered by operation, shape and dtype (right for the first operands only).
_BROKEN = """
import time

import numpy as np
from xbackend_numpy import NumpyBackend, NumpyExecution, reduced_matmul


class _OffByOne(NumpyExecution):
    def run(self):
        seconds = super().run()
        if self._C.size:
            self._C.reshape(-1)[-1] += 1
        return seconds


class WrongBackend(NumpyBackend):
    name = "wrong"

    def _execution(self, op, variant, tile, A, B, params=None):
        return _OffByOne(op, A, B)


class _NoPoison(NumpyExecution):
    def poison(self):
        pass


class UnpoisonedBackend(NumpyBackend):
    name = "unpoisoned"

    def _execution(self, op, variant, tile, A, B, params=None):
        return _NoPoison(op, A, B)


class AbsentBackend(NumpyBackend):
    name = "absent"

    @classmethod
    def available(cls):
        return False, "needs the moon"


class _FloatSums(NumpyExecution):
    def run(self):
        if self._C.dtype.kind != "i":
            return super().run()
        start = time.perf_counter()
        product = reduced_matmul if self._reduced else np.matmul
        sums = product(self._A.astype(np.float32), self._B.astype(np.float32))
        self._C[...] = np.rint(sums).astype(np.int64).astype(self._C.dtype)
        return time.perf_counter() - start


class FloatSumsBackend(NumpyBackend):
    name = "floatsums"

    def _execution(self, op, variant, tile, A, B, params=None):
        return _FloatSums(op, A, B)


_REMEMBERED = {}


class _Remembering(NumpyExecution):
    def __init__(self, op, A, B):
        super().__init__(op, A, B)
        self._key = (op, A.shape, B.shape, A.dtype.str)

    def run(self):
        if self._key in _REMEMBERED:
            self._C[...] = _REMEMBERED[self._key]
            return 1e-6
        seconds = super().run()
        _REMEMBERED[self._key] = self._C.copy()
        return seconds


class RememberingBackend(NumpyBackend):
    name = "remembering"

    def _execution(self, op, variant, tile, A, B, params=None):
        return _Remembering(op, A, B)
"""

_ENTRY_POINTS = {
    "numpy": "xbackend_numpy:NumpyBackend",
    "wrong": "broken_backends:WrongBackend",
    "unpoisoned": "broken_backends:UnpoisonedBackend",
    "absent": "broken_backends:AbsentBackend",
    "floatsums": "broken_backends:FloatSumsBackend",
    "remembering": "broken_backends:RememberingBackend",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder that registers the example (and the broken ones) as an installed
    distribution would: a dist-info with its entry points."""
    folder = tmp_path_factory.mktemp("site")
    info = folder / "xbackend_numpy_example-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: xbackend-numpy-example\nVersion: 0.1.0\n"
    )
    lines = [f"{name} = {target}" for name, target in _ENTRY_POINTS.items()]
    (info / "entry_points.txt").write_text("[xbackend.backends]\n" + "\n".join(lines) + "\n")
    (folder / "broken_backends.py").write_text(_BROKEN)
    return folder


def _conformance(
    site: Path, backend: str, *options: str, **env: str
) -> subprocess.CompletedProcess[str]:
    path = [str(site), str(EXAMPLE), str(ROOT), os.environ.get("PYTHONPATH", "")]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path)), **env}
    if REQUIRE_ENV not in env:  # CI's requirements
        environment.pop(REQUIRE_ENV, None)
    # -p loads the plugin where xbackend is not installed; installed, it is loaded already.
    command = [sys.executable, "-m", "pytest", "-rfEs", "-p", "no:cacheprovider"]
    command += ["-p", "xbackend.pytest_plugin", "--pyargs", "xbackend.conformance"]
    return subprocess.run(
        [*command, "--backend", backend, *options],
        capture_output=True,
        text=True,
        cwd=site,
        env=environment,
        timeout=300,
    )


@pytest.mark.slow
def test_the_example_backend_passes_the_conformance_suite(site):
    done = _conformance(site, "numpy")
    assert done.returncode == 0, done.stdout + done.stderr
    assert " passed" in done.stdout and "failed" not in done.stdout
    assert "xbackend numpy: host (NumPy)" in done.stdout  # the report header


@pytest.mark.slow
def test_a_wrong_result_fails_the_conformance_suite(site):
    done = _conformance(site, "wrong")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAILED" in done.stdout and "test_every_variant_equals_the_reference" in done.stdout
    assert "test_strided_views" in done.stdout


@pytest.mark.slow
def test_a_backend_that_does_not_poison_fails(site):
    done = _conformance(site, "unpoisoned")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "test_poison_fills_the_whole_output" in done.stdout


def _failed_tests(stdout: str) -> list[str]:
    """The ids of the tests that ``-rf`` lists as failed."""
    return [line.split()[1] for line in stdout.splitlines() if line.startswith("FAILED ")]


@pytest.mark.slow
def test_integer_sums_in_float32_fail_the_conformance_suite(site):
    """Operands of ±8 kept every int32 sum below 2**24, where float32 is exact; the
    suite's int32 operands now reach past it while the sums stay within int32."""
    done = _conformance(site, "floatsums")
    assert done.returncode == 1, done.stdout + done.stderr
    failed = _failed_tests(done.stdout)
    assert any("test_every_variant_equals_the_reference" in name for name in failed), failed
    assert all("int32" in name for name in failed), failed  # float32 and float64 pass


@pytest.mark.slow
def test_results_remembered_by_shape_fail_the_conformance_suite(site):
    """A backend that answers a repeated shape and dtype with its first result."""
    done = _conformance(site, "remembering")
    assert done.returncode == 1, done.stdout + done.stderr
    failed = _failed_tests(done.stdout)
    assert failed and all("test_fresh_operands_for_a_repeated_shape" in n for n in failed), failed


@pytest.mark.slow
def test_an_unavailable_backend_is_a_skip_unless_required(site):
    skipped = _conformance(site, "absent")
    assert skipped.returncode == 0, skipped.stdout + skipped.stderr
    assert "skipped" in skipped.stdout and "passed" not in skipped.stdout
    assert "xbackend absent: unavailable: needs the moon" in skipped.stdout
    failed = _conformance(site, "absent", **{REQUIRE_ENV: "absent"})
    assert failed.returncode == 1
    assert "absent is required here (XBACKEND_REQUIRE): absent unavailable: needs the moon" in (
        failed.stdout
    )


@pytest.mark.slow
def test_a_kernels_folder_joins_the_conformance_suite(site):
    """``--kernels DIR`` adds the folder's variants to the backends before the suite is
    collected: the suite's loops over each backend's variants run them beside the shipped
    ones (the header names them), and a wrong one fails naming itself. The suite is cut
    to the plain product in float32, at its three shapes, in this process (``-n 0``)."""
    needs_backend("opencl")
    chosen = ("-n", "0", "-k", "test_every_variant_equals_the_reference and opencl-mm- and float32")
    student = ASSIGNMENT / "student"
    done = _conformance(site, "opencl", "--kernels", str(student), *chosen)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout and "failed" not in done.stdout
    assert f"xbackend kernels student ({student}): student_naive, student_tiled" in done.stdout
    # The student's tiled kernel with its last partial tile of K left out: no K of the
    # suite's shapes (1, 5, 17) is a multiple of its tile.
    wrong = _conformance(site, "opencl", "--kernels", str(ASSIGNMENT / "edge_bug"), *chosen)
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    assert len(_failed_tests(wrong.stdout)) == 3, wrong.stdout
    assert "opencl edge_bug_tiled mm" in wrong.stdout


@pytest.mark.slow
def test_a_folder_that_is_no_family_is_a_usage_error(site, tmp_path):
    done = _conformance(site, "cpu", "--kernels", str(tmp_path), "-n", "0")
    assert done.returncode == 4, done.stdout + done.stderr  # pytest's usage error
    assert f"--kernels: {tmp_path}: holds no family.toml, nor do its sub-folders" in done.stderr


@pytest.mark.slow
def test_the_builtin_cpu_backend_passes_the_conformance_suite(site):
    done = _conformance(site, "cpu")
    assert done.returncode == 0, done.stdout + done.stderr


def test_required_names_come_from_the_environment(monkeypatch):
    monkeypatch.setenv(REQUIRE_ENV, "opencl, clblast")
    assert required("clblast") and required("opencl") and not required("cuda")
    with pytest.raises(pytest.fail.Exception, match="clblast is required here"):
        skip_or_fail("clblast", "pyclblast is not installed")
    monkeypatch.setenv(REQUIRE_ENV, "")
    with pytest.raises(pytest.skip.Exception, match="pyclblast is not installed"):
        skip_or_fail("clblast", "pyclblast is not installed")


def test_the_plugin_and_its_package_are_declared():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["pytest11"] == {
        "xbackend.pytest_plugin": "xbackend.pytest_plugin"
    }
    assert "xbackend.conformance" in project["tool"]["setuptools"]["packages"]
    assert project["project"]["optional-dependencies"]["clblast"] == ["pyclblast>=1.4"]
    example = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    assert example["project"]["entry-points"]["xbackend.backends"] == {
        "numpy": "xbackend_numpy:NumpyBackend"
    }

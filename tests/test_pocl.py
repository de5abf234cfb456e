"""PoCL's known miscompilation of mm_reg, refused by name; and PoCL itself, where installed.

PoCL 5's work-group compiler now and then builds reg2d and reg2d_g4 wrongly (one
work-item's column index kept for the whole group past the K loop's barriers: few or
none of C's elements stored), a different build in each process. The OpenCL backend
refuses those variants on PoCL 5 with the reason (xbackend/backends/runtime_faults.py;
docs/kernels.md, "Runtimes that miscompile a shipped kernel"). The last test builds the
mm_reg variants afresh on every PoCL it finds, in several processes, and wants each
build right or the variant refused.

PoCL is found in /etc/OpenCL/vendors, or in the folder ``XBACKEND_TEST_POCL_VENDORS``
names (one holding its pocl.icd: PoCL installed but registered for no other process).
The builds run in subprocesses whose ICD loader sees that folder alone, so this process
keeps the OpenCL devices it had.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import xbackend
from xbackend import XBackendError, families
from xbackend.backends import runtime_faults
from xbackend.backends.runtime_faults import RuntimeFault, fault_of
from xbackend.cli.devices import _smoke_test
from xbackend.launches.specs import DeviceInfo
from xbackend.pytest_plugin import needs_backend

ROOT = Path(__file__).resolve().parent.parent
POCL_VENDORS_ENV = "XBACKEND_TEST_POCL_VENDORS"
POCL = "Portable Computing Language"
MM_REG = families.variant_table("opencl", "work-item", "local")["mm"]


def _pythonpath() -> str:
    """This checkout first, then what the suite's own path holds (a GPU machine's wheels)."""
    return os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))


def _device(platform: str, driver: str) -> DeviceInfo:
    return DeviceInfo(
        name="cpu-skylake-avx512-Intel(R) Xeon(R)", platform=platform, driver_version=driver
    )


@pytest.mark.parametrize("variant", ["reg2d", "reg2d_g4"])
def test_pocl_5_refuses_the_variants_it_miscompiles_naming_why(variant, monkeypatch):
    monkeypatch.delenv(runtime_faults.RUN_ANYWAY_ENV, raising=False)
    said = fault_of(_device(POCL, "5.0+debian"), MM_REG[variant])
    assert said is not None and said.startswith("PoCL 5 (driver 5.0+debian) computes it wrongly")
    assert "column index" in said and "kernels/mm_reg/mm_reg.cl" in said
    assert "docs/kernels.md" in said and "XBACKEND_RUN_KNOWN_FAULTS=1" in said
    monkeypatch.setenv(runtime_faults.RUN_ANYWAY_ENV, "1")
    assert fault_of(_device(POCL, "5.0+debian"), MM_REG[variant]) is None


@pytest.mark.parametrize(
    "platform, driver, variant",
    [
        (POCL, "5.0+debian", "reg2d_cf"),  # no wrong build in 272 (docs/kernels.md)
        (POCL, "5.0+debian", "reg1d"),
        (POCL, "5.0+debian", "tiled"),
        (POCL, "3.1+debian", "reg2d_g4"),  # Debian 12's: no wrong build seen
        ("Intel(R) OpenCL", "2026.22.10.0.01_160000", "reg2d_g4"),
        ("NVIDIA CUDA", "580.159.04", "reg2d_g4"),
    ],
)
def test_other_runtimes_and_variants_are_not_refused(platform, driver, variant, monkeypatch):
    monkeypatch.delenv(runtime_faults.RUN_ANYWAY_ENV, raising=False)
    assert fault_of(_device(platform, driver), MM_REG[variant]) is None


def test_every_fault_names_shipped_variants():
    """A renamed variant or family would silently end its refusal: each must exist."""
    for fault in runtime_faults.FAULTS:
        for variant in fault.variants:
            assert MM_REG[variant].source == f"shipped:{fault.family}", (fault, variant)


def test_the_opencl_backend_and_devices_say_a_fault_by_name(monkeypatch):
    """Through the backend: a fault holding for this device refuses the variant in
    ``xbackend devices`` (SKIP with the reason) and in a product (the error says it)."""
    needs_backend("opencl")
    monkeypatch.delenv(runtime_faults.RUN_ANYWAY_ENV, raising=False)
    with xbackend.get_backend("opencl") as backend:
        here = RuntimeFault(
            backend.device.platform,
            (backend.device.driver_version,),
            "mm_reg",
            ("reg2d_g4",),
            "This runtime",
            "a made-up fault",
        )
        monkeypatch.setattr(runtime_faults, "FAULTS", (here,))
        problem = backend.variant_problem("reg2d_g4", np.dtype(np.float32), "mm")
        assert problem is not None and problem.startswith("This runtime (driver ")
        assert backend.variant_problem("reg2d", np.dtype(np.float32), "mm") is None
        outcomes = {variant: (passed, detail) for variant, passed, detail in _smoke_test(backend)}
        assert outcomes["reg2d_g4"] == (None, f"cannot run here: {problem}")
        assert outcomes["reg2d"][0] is True
        A = np.ones((7, 5), np.float32)
        with pytest.raises(XBackendError, match=r"This runtime .* computes it wrongly"):
            backend.matmul(A, A.T[:, :3].copy(), variant="reg2d_g4")


def _pocl_vendors() -> Path:
    """The folder holding PoCL's ICD file, or a skip saying how to get one."""
    named = os.environ.get(POCL_VENDORS_ENV)
    folders = [Path(named)] if named else [Path("/etc/OpenCL/vendors")]
    for folder in folders:
        if any(folder.glob("*pocl*.icd")):
            return folder
    pytest.skip(
        f"PoCL is not registered in {folders[0]} (apt-get install pocl-opencl-icd; or "
        f"{POCL_VENDORS_ENV} naming a folder that holds its pocl.icd)"
    )


@pytest.mark.slow
def test_mm_reg_on_pocl_builds_right_or_is_refused():
    """Each of several processes builds every mm_reg variant afresh twice, unoptimized
    (-cl-opt-disable: PoCL 5.0 got reg2d_g4 wrong in 10 of 64 such builds, 1 of 48
    optimized ones): every build right, or the variant refused naming PoCL."""
    vendors = _pocl_vendors()
    env = {
        **os.environ,
        "OCL_ICD_VENDORS": str(vendors),
        "XBACKEND_NO_PIP_OPENCL": "1",  # PoCL alone, not Intel's runtime beside it
        "XBACKEND_OPENCL_OPTIONS": "-cl-opt-disable",
        "PYTHONPATH": _pythonpath(),
    }
    command = [sys.executable, str(ROOT / "scripts" / "fresh_builds.py"), "--builds", "2"]
    runs = [
        subprocess.Popen(
            [*command, "--seed", str(10 * job)],
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for job in range(max(2, min(8, os.cpu_count() or 1)))
    ]
    said = [run.communicate(timeout=900)[0] for run in runs]
    lines = [line for output in said for line in output.splitlines()]
    verdicts = [line for line in lines if line.split(" ", 1)[0] in ("PASS", "FAIL", "REFUSED")]
    assert len(verdicts) == 4 * len(runs), "\n".join(said)
    assert all(line.startswith("PASS") or "PoCL" in line for line in verdicts), "\n".join(said)


@pytest.mark.slow
def test_the_fresh_builds_script_runs_on_the_default_opencl_device():
    """scripts/fresh_builds.py where there is no PoCL (CI's machine): one build each of a
    variant and of one from another family, both right."""
    needs_backend("opencl")
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "fresh_builds.py"), "--backend", "opencl",
         "--variants", "reg2d_g4,tiled", "--builds", "1", "--shape", "9x20x11"],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": _pythonpath()},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "PASS reg2d_g4: 0 of 1 builds wrong",
        "PASS tiled: 0 of 1 builds wrong",
    ], done.stdout + done.stderr

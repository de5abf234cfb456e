"""nvcc where no GPU is (``grading/compilers.py``): a .cu file built at a shape its rules
take, each kernel a variant launches looked up in what was built as the CUDA backend
looks it up, and nvcc's deadline ending every process it started.

The families: ``tests/kernels/fixed_size`` (a kernel of one size, 4096, by its rule) and
``tests/kernels/unlaunchable`` (a template named with and without its arguments, and a
preprocessor bomb).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from xbackend import families
from xbackend.grading import compilers, deadlines

KERNELS = Path(__file__).parent / "kernels"

pytestmark = [
    pytest.mark.skipif(compilers.nvcc() is None, reason="nvcc is not installed"),
    pytest.mark.usefixtures("own_families"),
]


def _verdicts(folder: Path, *variants: str) -> dict[str, tuple[bool | None, str]]:
    # nvcc's builds are kept a process by family name: another test's family of the same
    # name (the fixed_size edited) must not take this one's build, whichever ran first.
    compilers.compiled.cache_clear()
    families.add_folders([str(folder)])
    return {v.variant: (v.equal, v.detail) for v in compilers.nvcc_verdicts(variants, [], None)}


def test_a_kernel_of_one_size_is_built_at_that_size():
    """Its rule ``M == N == K == 4096`` takes no shape near 16³: it is built at 4096
    (``-DSIZE=4096``), not refused as a build that does not compile."""
    found = _verdicts(KERNELS / "fixed_size", "fixed_size_naive")
    assert found == {
        "fixed_size_naive": (True, "compiled by nvcc for sm_90; no CUDA device here to run it")
    }


def test_a_template_named_without_its_arguments_is_in_no_build():
    """As a GPU says it (``cubins.entry``): ``mm_templated`` is a template, and nvcc
    built no such kernel; named with its arguments, it is found."""
    found = _verdicts(KERNELS / "unlaunchable", "unlaunchable_good", "unlaunchable_bare")
    assert found["unlaunchable_good"] == (
        True, "compiled by nvcc for sm_90; no CUDA device here to run it"
    )  # fmt: skip
    assert found["unlaunchable_bare"] == (
        None,
        "the CUDA build holds no kernel mm_templated (family.toml: kernel; mm_templated is "
        "a template: name it with its arguments, mm_templated<REAL>)",
    )


def _survivors(*markers: str) -> list[str]:
    """The command lines of this machine's processes that name every one of ``markers``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if all(marker in line for marker in markers):
            found.append(f"{entry.name}: {line[:200]}")
    return found


def test_at_its_deadline_nvcc_leaves_no_process_behind(monkeypatch):
    """A preprocessor bomb (``-DNVCC_BOMB``): nvcc's preprocessor, a process of its own,
    would run for minutes. At the deadline nvcc's whole session is killed: nothing that
    built the file is left once the verdict is said."""
    monkeypatch.setattr(compilers, "TIMEOUT_S", 3)
    compilers.compiled.cache_clear()
    found = _verdicts(KERNELS / "unlaunchable", "unlaunchable_bomb")
    assert found["unlaunchable_bomb"] == (None, "does not compile: nvcc took more than 3 s")
    left = _survivors("xbackend-nvcc-", "NVCC_BOMB")
    for _ in range(20):  # a killed process is gone once it is reaped
        if not left:
            break
        time.sleep(0.25)
        left = _survivors("xbackend-nvcc-", "NVCC_BOMB")
    assert left == []


def test_a_build_error_names_the_line_of_the_file(tmp_path):
    """nvcc's error at the line of the student's file (the build's ``extern "C" {`` not
    counted), where the missing ';' is found."""
    folder = tmp_path / "fixed_size"
    shutil.copytree(KERNELS / "fixed_size", folder)
    cuda = folder / "fixed_size.cu"
    cuda.write_text(cuda.read_text().replace("float sum = 0.0f;", "float sum = 0.0f"))
    found = _verdicts(folder, "fixed_size_naive")
    equal, detail = found["fixed_size_naive"]
    assert equal is None
    assert detail.startswith('does not compile: fixed_size.cu:10: expected a ";"'), detail


def test_a_tool_stays_in_its_callers_process_group():
    """nvcc and a sanitizer's run stay in the group of the check that runs them: a class's
    check ends a submission by killing its group, which then ends them too."""
    done = deadlines.run_to_deadline(
        [sys.executable, "-c", "import os; print(os.getpgrp())"], timeout_s=60
    )
    assert int(done.stdout) == os.getpgrp()

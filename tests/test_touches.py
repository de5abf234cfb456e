"""What adding a backend touches (issue 55, item 3), proven by a stand-in that runs through
the commands: a backend on a language xbackend already builds, registered as a plugin (an
entry point of ``xbackend.backends``, no file of xbackend's changed), is run by ``compare``
and by ``check``, which asks a backend the language of the kernel files it runs
(``Backend.kernel_language``) rather than its name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from xbackend.backends.cpu import CpuBackend
from xbackend.backends.opencl import OpenCLBackend
from xbackend.pytest_plugin import needs_backend

ROOT = Path(__file__).resolve().parent.parent
STUDENT = ROOT / "examples" / "assignment" / "student"

_STAND_IN = '''
from xbackend.backends.opencl import OpenCLBackend


class StandInBackend(OpenCLBackend):
    """OpenCL under another name: a backend xbackend's files do not know."""

    name = "standin"
'''


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder that registers the stand-in as an installed distribution would."""
    folder = tmp_path_factory.mktemp("site")
    info = folder / "xbackend_standin-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: xbackend-standin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[xbackend.backends]\nstandin = standin:StandInBackend\n"
    )
    (folder / "standin.py").write_text(_STAND_IN)
    return folder


def _xbackend(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    path = [str(site), str(ROOT), os.environ.get("PYTHONPATH", "")]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path))}
    command = [sys.executable, "-m", "xbackend", *args]
    return subprocess.run(command, capture_output=True, text=True, env=environment, timeout=600)


def test_a_backend_says_the_language_of_the_kernel_files_it_runs():
    assert OpenCLBackend.LANGUAGE == "opencl"
    assert CpuBackend.kernel_language(CpuBackend.__new__(CpuBackend)) is None


@pytest.mark.slow
def test_a_plugin_backend_is_checked_and_compared(site, tmp_path):
    needs_backend("opencl")
    checked = _xbackend(site, "check", str(STUDENT), "--backends", "standin", "--steps", "2",
                        "--out", str(tmp_path / "check"))  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "standin student_naive: equal at all 10 shapes" in checked.stdout
    assert "standin student_tiled: equal at all 10 shapes" in checked.stdout
    compared = _xbackend(site, "compare", "--backends", "standin", "--steps", "2", "--fast",
                         "--no-plots", "--out", str(tmp_path / "run"))  # fmt: skip
    assert compared.returncode == 0, compared.stdout + compared.stderr
    lines = (tmp_path / "run" / "results.jsonl").read_text().splitlines()
    points = [json.loads(line) for line in lines if '"backend"' in line]
    assert points and {point["backend"] for point in points} == {"standin"}
    measured = [point for point in points if point["status"] == "ok"]
    assert measured and all(point["equal"] for point in measured)

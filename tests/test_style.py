"""Lint, format and type checks run with the tests, so CI enforces them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is not installed ([test] extra)")
def test_ruff_lint():
    done = _run("ruff", "check", "xbackend", "tests", "scripts", "studies")
    assert done.returncode == 0, done.stdout


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is not installed ([test] extra)")
def test_ruff_format():
    done = _run("ruff", "format", "--check", "xbackend", "tests", "scripts", "studies")
    assert done.returncode == 0, done.stdout


@pytest.mark.slow
def test_mypy():
    pytest.importorskip("mypy", reason="mypy is not installed ([test] extra)")
    done = _run(sys.executable, "-m", "mypy", "xbackend")
    assert done.returncode == 0, done.stdout


@pytest.mark.slow
def test_mypy_tests_and_scripts():
    # Strict, less the three checks that untyped pytest fixtures and helpers would fail.
    pytest.importorskip("mypy", reason="mypy is not installed ([test] extra)")
    relaxed = ("--allow-untyped-defs", "--allow-incomplete-defs", "--allow-untyped-calls")
    done = _run(sys.executable, "-m", "mypy", *relaxed, "tests", "scripts", "studies")
    assert done.returncode == 0, done.stdout

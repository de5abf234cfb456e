"""The public API contract: names, registry, availability, plugins, no driver at import."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import numpy as np
import pytest

import xbackend
from xbackend.backends import registry
from xbackend.backends.cpu import CpuBackend


def test_public_names():
    for name in ("backends", "get_backend", "BackendUnavailable", "BackendInfo", "Backend"):
        assert hasattr(xbackend, name), name


def test_backends_lists_builtins_with_reasons():
    infos = {info.name: info for info in xbackend.backends()}
    assert {"cuda", "opencl", "cpu"} <= set(infos)
    assert infos["cpu"].available and infos["cpu"].devices
    for info in infos.values():
        assert info.available or info.reason  # never unavailable without a reason


def test_unknown_backend_lists_known_ones():
    with pytest.raises(ValueError, match=r"unknown backend 'metal'.*cpu"):
        xbackend.get_backend("metal")


def test_import_starts_no_driver():
    code = (
        "import sys, xbackend; "
        "xbackend.backend_names(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyopencl', 'pycuda')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


class _Unavailable(CpuBackend):
    name = "nowhere"

    @classmethod
    def available(cls):
        return False, "install the nowhere driver"


class _EntryPoint:
    def __init__(self, name: str, value: str):
        self.name, self.value = name, value


def test_plugin_backends_from_entry_points(monkeypatch):
    monkeypatch.setattr(
        metadata,
        "entry_points",
        lambda group: (
            [_EntryPoint("nowhere", f"{__name__}:_Unavailable")]
            if group == registry.ENTRY_POINT_GROUP
            else []
        ),
    )
    monkeypatch.setattr(registry, "_classes", {})
    assert "nowhere" in xbackend.backend_names()
    info = {i.name: i for i in xbackend.backends()}["nowhere"]
    assert not info.available and info.reason == "install the nowhere driver"
    with pytest.raises(xbackend.BackendUnavailable, match="install the nowhere driver"):
        xbackend.get_backend("nowhere")


def test_cpu_backend_as_context_manager():
    A = np.arange(6, dtype=np.float32).reshape(2, 3) + 1
    B = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    with xbackend.get_backend("cpu") as cpu:
        np.testing.assert_allclose(cpu.matmul(A, B, variant="naive"), A @ B, rtol=1e-6)
        assert cpu.variants("mm") == ["naive", "tiled", "vendor"]

"""Test fixtures: one opened backend per name, parametrized, skipped with its reason.

Options and environment:

* ``--backend cpu,opencl`` runs only those backends (``name:device`` picks a device);
* ``XBACKEND_REQUIRE=opencl,cpu`` turns "unavailable" into a failure for those
  backends, so CI cannot pass by skipping the OpenCL tests.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

import xbackend
from xbackend.runner import Target


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backend",
        default=None,
        help="comma-separated backends to test, NAME or NAME:DEVICE (default: all)",
    )


def _targets(config: pytest.Config) -> list[Target]:
    chosen = config.getoption("--backend")
    names = chosen.split(",") if chosen else xbackend.backend_names()
    return [Target.parse(name) for name in names if name.strip()]


def _required() -> set[str]:
    return {n.strip() for n in os.environ.get("XBACKEND_REQUIRE", "").split(",") if n.strip()}


def pytest_report_header(config: pytest.Config) -> list[str]:
    lines = []
    for info in xbackend.backends():
        if info.available:
            devices = "; ".join(f"{d.name} ({d.platform})" for d in info.devices)
            lines.append(f"xbackend {info.name}: {devices}")
        else:
            lines.append(f"xbackend {info.name}: unavailable: {info.reason}")
    return lines


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        targets = _targets(metafunc.config)
        metafunc.parametrize("backend", targets, ids=[t.label for t in targets], indirect=True)


_opened: dict[Target, xbackend.Backend] = {}


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> Iterator[xbackend.Backend]:
    """An opened backend, shared by every test of the session (compiled kernels too)."""
    target: Target = request.param
    if target not in _opened:
        try:
            _opened[target] = xbackend.get_backend(target.name, target.device)
        except xbackend.BackendUnavailable as error:
            if target.name in _required():
                pytest.fail(f"{target.name} is required here (XBACKEND_REQUIRE): {error.reason}")
            pytest.skip(f"{target.name} unavailable: {error.reason}")
    yield _opened[target]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for opened in _opened.values():
        opened.close()
    _opened.clear()

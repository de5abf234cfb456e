"""The pytest plugin: a ``backend`` fixture, the ``--backend`` option, and xbackend's
conformance tests for any backend, built in or a third party's.

Installed with xbackend (the ``pytest11`` entry point), so in a backend's own
repository::

    pytest --pyargs xbackend.conformance --backend NAME

runs the conformance suite (``xbackend/conformance/``) against the backend registered
as ``NAME`` under the entry-point group ``xbackend.backends``.

* ``--backend cpu,opencl`` runs only those backends (``NAME:DEVICE`` picks a device;
  default: every known backend);
* ``--kernels DIR`` (repeatable) adds a folder of kernel families (docs/kernels.md) before
  anything is collected: the conformance tests loop over each backend's runnable
  variants inside a test (they are not parametrized by variant), so the folder's
  variants run in those loops beside the shipped ones, and a failure names the variant;
* ``XBACKEND_REQUIRE=opencl,cpu`` turns "unavailable" into a failure for those
  backends, so CI cannot pass by skipping; other names in it (``clblast``,
  ``oclgrind``) are requirements that tests ask about with ``required``.

Every test that takes the ``backend`` fixture runs once per backend, on a backend
opened once per session (compiled kernels are kept) and closed at its end. An
unavailable backend is a skip with its reason, never a collection error.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

import xbackend
from xbackend import families
from xbackend.results.plan import Target

REQUIRE_ENV = "XBACKEND_REQUIRE"


def required(name: str) -> bool:
    """Whether ``XBACKEND_REQUIRE`` names ``name``: then its absence is a failure."""
    listed = os.environ.get(REQUIRE_ENV, "").split(",")
    return name in {entry.strip() for entry in listed}


def skip_or_fail(name: str, reason: str) -> None:
    """Skip with ``reason``, or fail where ``XBACKEND_REQUIRE`` names ``name``."""
    if required(name):
        pytest.fail(f"{name} is required here ({REQUIRE_ENV}): {reason}", pytrace=False)
    pytest.skip(reason)


def needs_backend(name: str) -> None:
    """Skip unless backend ``name`` can run here (a failure where ``XBACKEND_REQUIRE`` names
    it): for tests that run it in a subprocess, a script or a command line."""
    for info in xbackend.backends():
        if info.name == name and not info.available:
            skip_or_fail(name, f"{name} unavailable: {info.reason}")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("xbackend")
    group.addoption(
        "--backend",
        default=None,
        help="comma-separated xbackend backends to test, NAME or NAME:DEVICE (default: all)",
    )
    group.addoption(
        "--kernels",
        action="append",
        default=None,
        metavar="DIR",
        help="a folder of your own kernel families (docs/kernels.md), whose variants the "
        "backends then run beside the shipped ones; repeat for several folders",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Add the ``--kernels`` folders before any test is collected or backend opened, so
    that every backend's variant table holds them (and the isolated kernels' process is
    handed them: ``families.added_folders``). A folder that is not a family is a usage
    error of one line naming the file."""
    folders = config.getoption("--kernels", default=None)
    if folders:
        try:
            families.add_folders(folders)
        except families.ManifestError as error:
            raise pytest.UsageError(f"--kernels: {error}") from None


def targets(config: pytest.Config) -> list[Target]:
    """The backends to test: those of ``--backend``, else every known one."""
    chosen = config.getoption("--backend")
    names = chosen.split(",") if chosen else xbackend.backend_names()
    return [Target.parse(name) for name in names if name.strip()]


def pytest_report_header(config: pytest.Config) -> list[str]:
    wanted = {target.name for target in targets(config)}
    lines = []
    for info in xbackend.backends():
        if info.name not in wanted:
            continue
        if info.available:
            devices = "; ".join(f"{d.name} ({d.platform})" for d in info.devices)
            lines.append(f"xbackend {info.name}: {devices}")
        else:
            lines.append(f"xbackend {info.name}: unavailable: {info.reason}")
    return lines + user_families()


def user_families() -> list[str]:
    """A header line per family not shipped with xbackend (``--kernels``, entry
    points): where it is and the variants it adds."""
    try:
        found = families.catalogue()
    except families.ManifestError as error:  # an entry point's (--kernels is checked)
        return [f"xbackend kernels: {error}"]
    lines = []
    for each in found:
        if not each.shipped:
            names = ", ".join(dict.fromkeys(spec.name for _, spec in each.variants))
            lines.append(f"xbackend kernels {each.name} ({each.folder}): {names}")
    return lines


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = [name for name in ("backend", "backend_target") if name in metafunc.fixturenames]
    if names:
        chosen = targets(metafunc.config)
        values = [(target,) * len(names) for target in chosen]
        ids = [target.label for target in chosen]
        metafunc.parametrize(names, values, ids=ids, indirect=True)


_opened: dict[Target, xbackend.Backend] = {}


def open_backend(target: Target) -> xbackend.Backend:
    """A new backend on ``target``; unavailable: a skip (a failure where required)."""
    try:
        return xbackend.get_backend(target.name, target.device)
    except xbackend.BackendUnavailable as error:
        skip_or_fail(target.name, f"{target.name} unavailable: {error.reason}")
        raise  # not reached: skip_or_fail raises


@pytest.fixture
def backend_target(request: pytest.FixtureRequest) -> Target:
    """The backend under test as named (``NAME`` or ``NAME:DEVICE``), for tests that
    open their own instance (lifetime tests)."""
    target: Target = request.param
    return target


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> Iterator[xbackend.Backend]:
    """An opened backend, shared by every test of the session (compiled kernels too)."""
    target: Target = request.param
    if target not in _opened:
        _opened[target] = open_backend(target)
    yield _opened[target]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for opened in _opened.values():
        opened.close()
    _opened.clear()

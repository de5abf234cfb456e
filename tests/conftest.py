"""Test fixtures: the ``backend`` fixture and the ``--backend`` option come from the
plugin that ships with the package (``xbackend/pytest_plugin.py``), loaded here
by name so that a source checkout that is not installed runs the same way.

* ``--backend cpu,opencl`` runs only those backends (``name:device`` picks a device);
* ``XBACKEND_REQUIRE=opencl,cpu,clblast`` turns "unavailable" into a failure for those
  backends and requirements, so CI cannot pass by skipping the OpenCL tests;
* ``XBACKEND_NO_CEILINGS`` is set unless given: runs skip measuring the devices' ceilings;
* ``XBACKEND_TUNING_DB=off`` unless given: the tuned variants run the device's derived
  default, not the shipped database's choice (its own tests turn it back on).
"""

import os
import shutil

import pytest

from xbackend.pytest_plugin import skip_or_fail

pytest_plugins = ["xbackend.pytest_plugin"]

# Every compare would measure each device's ceilings first (a second or so on this 2-core
# machine): the tests of the ceilings turn it back on where they test it.
os.environ.setdefault("XBACKEND_NO_CEILINGS", "1")
# The tests that expect a tuned variant's default configuration, on a CI machine whose
# CPU runtime the shipped database may hold: tests/test_tuning_db.py tests the database.
os.environ.setdefault("XBACKEND_TUNING_DB", "off")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (pyproject's addopts): one worker per core, at most 4, since the tests
    of a GPU machine share its one device."""
    return max(1, min(len(os.sched_getaffinity(0)), 4))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The slow tests first (keeping their order), so that the workers start on the longest
    # and finish together with the short ones, instead of one long test running alone at
    # the end.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def oclgrind() -> str:
    """oclgrind's path; not installed: a skip, or a failure where XBACKEND_REQUIRE names it."""
    path = shutil.which("oclgrind")
    if path is None:
        skip_or_fail("oclgrind", "oclgrind is not installed (apt-get install oclgrind)")
    assert path is not None
    return path

"""Test fixtures: the ``backend`` fixture and the ``--backend`` option come from the
plugin that ships with the package (``xbackend/pytest_plugin.py``), loaded here
by name so that a source checkout that is not installed runs the same way.

* ``--backend cpu,opencl`` runs only those backends (``name:device`` picks a device);
* ``XBACKEND_REQUIRE=opencl,cpu,clblast`` turns "unavailable" into a failure for those
  backends and requirements, so CI cannot pass by skipping the OpenCL tests.
"""

pytest_plugins = ["xbackend.pytest_plugin"]

"""The comparison on several devices at once, through Dask distributed: a local cluster
of one worker per device (``--gpus``, ``--workers``) or an existing one (``--scheduler``,
e.g. on Slurm through dask-jobqueue). ``docs/cluster.md`` shows the three set-ups.

The main process keeps the plan, the schedule, the cost model, the failure memory and
the one results writer; each worker holds its devices open and measures the points it
is sent (``measure.measure_point``, as the serial sweep does). The modules:

* ``devices``: which devices each worker holds, and what a worker offers;
* ``lines``: what the main process and the workers send each other;
* ``worker``: the worker's side (its plugin and tasks);
* ``schedule``: which point runs where and when (pure logic);
* ``driver``: the main loop, the workers watched;
* ``session``: the cluster of one command, started or joined, and closed;
* ``offered``: a worker's device as the command line plans with it.

Dask is an extra (``pip install 'xbackend[dask]'``): importing this package without it
is an ``XBackendError`` that says so.
"""

from xbackend.errors import XBackendError

try:
    import distributed  # noqa: F401 - only to say what is missing, here and once
except ImportError as missing:
    raise XBackendError(
        f"the cluster options need Dask distributed ({missing}): pip install 'xbackend[dask]'"
    ) from None

from xbackend.cluster.lines import TuneRequest
from xbackend.cluster.schedule import ALONE
from xbackend.cluster.session import Cluster, ClusterSpec

__all__ = ["ALONE", "Cluster", "ClusterSpec", "TuneRequest"]

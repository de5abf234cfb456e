"""A backend opened with the tune cache's choices for its tuned variants: what the face's
``xbackend.get_backend`` does, here for the layers below the face (the sweep, the grading,
the cluster's workers, the profiling child) to open one the same way."""

from __future__ import annotations

from xbackend.backends import registry
from xbackend.backends.interface import Backend


def get_backend(name: str, device: str | int | None = None) -> Backend:
    """Open backend ``name`` on ``device`` (an index or a piece of its name; default the
    first), with the tune cache's choices for its tuned variants.

    Raises ``BackendUnavailable`` with the reason if it cannot run here.
    """
    from xbackend.tuning.cache import cached_choices  # read when a backend opens

    return registry.open_backend(name, device, choices=cached_choices())

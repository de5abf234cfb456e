"""Which devices each worker holds: the groups a local cluster deals to its workers, and
what a worker offers once it has opened them.

A *target* is a backend as ``--backends`` names it (``cuda``, ``opencl:pocl``). On a local
cluster each GPU is a device of its own: ``cuda`` stands for every GPU asked for
(``--gpus 0,1``: ``cuda:0`` and ``cuda:1``), the targets without a GPU (``cpu``, OpenCL on
the processor) each for itself. A group is what one worker of ``--gpus`` opens: one GPU
(every backend of ``--backends`` on it), or one host target. ``--workers N`` deals the
same groups round-robin to N workers.

Nothing here starts Dask: the groups are planned from the backends' device lists, and
the offers are plain data that workers send back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from xbackend.backends.registry import backend_class, backend_names
from xbackend.errors import XBackendError
from xbackend.launches.specs import DeviceInfo
from xbackend.results.plan import Target

# ``--gpus all``.
ALL = "all"


@dataclasses.dataclass(frozen=True)
class Offer:
    """One device a worker has opened: how results name it and what can run on it."""

    label: str  # the line label of the records: "cuda:1" here, "cuda:NVIDIA H200" remote
    target: str  # what the worker opens: "cuda:1"
    backend: str
    device: DeviceInfo
    variants: dict[str, list[str]]  # by operation: the variants' names
    host: str
    identity: str  # the device itself on its host: its PCI address where known

    @property
    def shares_host(self) -> bool:
        """A processor: its points share the host's cores and memory with everything."""
        return self.device.kind == "cpu"


@dataclasses.dataclass(frozen=True)
class WorkerReport:
    """A worker, as it describes itself: where it runs and the devices it holds."""

    address: str
    name: str
    host: str
    pid: int
    offers: tuple[Offer, ...]
    problems: tuple[str, ...] = ()  # the targets it could not open, and why

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "address": self.address,
            "host": self.host,
            "pid": self.pid,
            "devices": [offer.label for offer in self.offers],
            **({"problems": list(self.problems)} if self.problems else {}),
        }


def identity(target: str, device: DeviceInfo) -> str:
    """The device behind ``target`` on its host: a GPU's PCI address where the backend
    says it (CUDA and OpenCL on one GPU are then one device), else the target."""
    pci = device.extra.get("pci_bus_id")
    return f"pci:{pci}".lower() if isinstance(pci, str) and pci else target


Listing = Callable[[str], list[DeviceInfo]]


def _listing(name: str) -> list[DeviceInfo]:
    """The devices of backend ``name`` here; none if it is unavailable."""
    cls = backend_class(name)
    return cls.list_devices() if cls.available()[0] else []


def _available(name: str) -> str | None:
    """Why backend ``name`` cannot run here; None if it can."""
    available, reason = backend_class(name).available()
    return None if available else reason


def targets_of(text: str, say: Callable[[str], None] = print) -> list[Target]:
    """``--backends`` as targets: ``auto`` is every backend available here (the others
    said, as ``compare`` says them); a named backend that is unavailable is an error."""
    if text.strip().lower() == "auto":
        found = []
        for name in backend_names():
            reason = _available(name)
            if reason is None:
                found.append(Target(name))
            else:
                say(f"auto: skipping {name}: {reason}")
        if not found:
            raise XBackendError("no backend is available here (see: xbackend devices)")
        return found
    targets = [Target.parse(item) for item in text.split(",") if item.strip()]
    if not targets:
        raise XBackendError("--backends is empty")
    for target in targets:
        reason = _available(target.name)
        if reason is not None:
            raise XBackendError(f"backend '{target.name}' is unavailable: {reason}")
    return targets


def gpu_groups(
    targets: Sequence[Target], gpus: Sequence[int] | str, listing: Listing = _listing
) -> tuple[list[tuple[str, list[Target]]], list[tuple[str, list[Target]]]]:
    """The GPU groups (one per GPU asked for, every GPU backend on it) and the host
    groups (one per other target), each named; ``gpus``: ordinals or ``all``.

    The k-th GPU of a backend is the k-th device of kind gpu it lists (for CUDA, its
    index: set CUDA_DEVICE_ORDER=PCI_BUS_ID for the order of nvidia-smi).
    """
    by_gpu: dict[int, list[Target]] = {}
    hosts: list[tuple[str, list[Target]]] = []
    for target in targets:
        devices = listing(target.name) if target.device is None else []
        indices = [i for i, device in enumerate(devices) if device.kind == "gpu"]
        if not indices:
            hosts.append((target.label.replace(":", "-"), [target]))
            continue
        wanted = range(len(indices)) if isinstance(gpus, str) else list(gpus)
        for ordinal in wanted:
            if ordinal >= len(indices):
                raise XBackendError(
                    f"--gpus {ordinal}: {target.name} has {len(indices)} GPU(s), "
                    f"0 to {len(indices) - 1}"
                )
            by_gpu.setdefault(ordinal, []).append(Target(target.name, str(indices[ordinal])))
    groups = [(f"gpu{ordinal}", by_gpu[ordinal]) for ordinal in sorted(by_gpu)]
    return groups, hosts


def local_workers(
    targets: Sequence[Target],
    gpus: Sequence[int] | str | None,
    workers: int | None,
    listing: Listing = _listing,
) -> dict[str, list[str]]:
    """The workers of a local cluster, by name, each with the targets it opens.

    ``--gpus``: one worker per GPU and one per host target. ``--workers N``: the groups
    of every GPU and host target, dealt round-robin to N workers (more workers than
    groups: a group is dealt twice, and its device still runs one point at a time).
    """
    on_gpus, on_host = gpu_groups(targets, ALL if gpus is None else gpus, listing)
    if gpus is not None:
        if not on_gpus:
            raise XBackendError(
                f"--gpus: none of {', '.join(t.label for t in targets)} has a GPU here; "
                "--workers N runs on this host's devices"
            )
        return {name: [t.label for t in group] for name, group in on_gpus + on_host}
    groups = [group for _, group in on_gpus + on_host]
    count = workers or len(groups)
    dealt: dict[str, list[str]] = {f"w{i}": [] for i in range(count)}
    for index in range(max(count, len(groups))):
        dealt[f"w{index % count}"] += [t.label for t in groups[index % len(groups)]]
    return {name: list(dict.fromkeys(labels)) for name, labels in dealt.items()}


def every_device(targets: Sequence[Target], listing: Listing = _listing) -> list[str]:
    """What a worker of an existing cluster opens: every GPU of each target, and each
    target without one (the backends of ``--backends`` it has; a target naming a device
    is opened as named)."""
    on_gpus, on_host = gpu_groups(targets, ALL, listing)
    return [target.label for _, group in on_gpus + on_host for target in group]


def shared_gpu_labels(reports: Sequence[WorkerReport]) -> list[WorkerReport]:
    """A local ``--gpus`` cluster's GPUs sharing the plan: each GPU backend's lines are
    named by the backend alone (``cuda``, ``opencl``: the serial run's labels, so that a
    one-GPU and a two-GPU run measure the same points) where every GPU of it is one
    model, else by model (``model_label``: each model runs the plan). The lines then go
    to whichever worker holds a GPU of their label (``schedule.py``); other devices keep
    their labels."""
    models: dict[str, set[str]] = {}
    for worker in reports:
        for offer in worker.offers:
            if offer.device.kind == "gpu":
                models.setdefault(offer.backend, set()).add(offer.device.name)

    def label(offer: Offer) -> str:
        if offer.device.kind != "gpu":
            return offer.label
        one_model = len(models[offer.backend]) == 1
        return offer.backend if one_model else model_label(offer.backend, offer.device)

    return [
        dataclasses.replace(
            worker,
            offers=tuple(dataclasses.replace(o, label=label(o)) for o in worker.offers),
        )
        for worker in reports
    ]


def model_label(backend: str, device: DeviceInfo) -> str:
    """A line of an existing cluster: a backend on a device model, whichever worker holds
    one (the same points on each model present)."""
    return f"{backend}:{device.name}"

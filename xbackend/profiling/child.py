"""The program ``xbackend profile`` runs under Nsight Compute:
``python -m xbackend.profiling.child SPEC``.

It adds the spec's kernel-family folders (the parent's ``--kernels``), opens the backends
the spec names (with the tune cache's choices, as ``compare`` does), and for every size
and configuration of the spec's plan runs the product once, checked against the
reference as ``compare`` checks it, timing nothing: ncu profiles that one run. Into the
spec's manifest (``launches.Manifest``) it writes, after each point, what ran and in
which order, so that the parent can tell which of ncu's kernels belong to which point.
Nothing here knows ncu: with the CPU backend it runs anywhere (the tests run it so).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xbackend import families
from xbackend.errors import XBackendError
from xbackend.operations import Shape, operation
from xbackend.problems import check
from xbackend.profiling.launches import Entry, Manifest
from xbackend.results import PointRecord
from xbackend.results.plan import Plan, Target
from xbackend.sweep.configs import VARIANT_SETS, Config, configs, resolve_variants
from xbackend.sweep.measure import Inputs, memory_problem
from xbackend.tuning.opening import get_backend

if TYPE_CHECKING:
    from xbackend.backends.interface import Backend

SPEC_FORMAT = 2  # 2: the kernel-family folders


@dataclasses.dataclass(frozen=True)
class Spec:
    """What the child runs and where it writes the manifest: the parent's request."""

    run_id: str
    targets: list[str]  # NAME or NAME:DEVICE, as --backends names them
    plan: Plan  # variants: None here; the words below say which
    variant_words: list[str]  # --variants as given: names and sets (ladder, ...)
    manifest: Path
    folders: list[str] = dataclasses.field(default_factory=list)  # families.added_folders

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": SPEC_FORMAT,
            "run_id": self.run_id,
            "targets": self.targets,
            "plan": self.plan.to_dict(),
            "variant_words": self.variant_words,
            "manifest": str(self.manifest),
            "folders": self.folders,
        }

    @classmethod
    def read(cls, path: Path) -> Spec:
        item = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(item, dict) or item.get("format") != SPEC_FORMAT:
            raise XBackendError(f"{path} is not a profile spec of format {SPEC_FORMAT}")
        return cls(
            run_id=str(item["run_id"]),
            targets=[str(target) for target in item["targets"]],
            plan=Plan.from_dict(item["plan"]),
            variant_words=[str(word) for word in item["variant_words"]],
            manifest=Path(item["manifest"]),
            folders=[str(folder) for folder in item["folders"]],
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m xbackend.profiling.child SPEC", file=sys.stderr)
        return 2
    spec = Spec.read(Path(args[0]))
    manifest = Manifest(spec.run_id)
    try:
        run(spec, manifest)
    finally:
        manifest.write(spec.manifest)  # also what an interrupted or failed run got to
    if manifest.problem:
        print(f"xbackend profile: {manifest.problem}", file=sys.stderr)
        return 2
    return 0


def run(spec: Spec, manifest: Manifest) -> None:
    """Every point of the spec, once, in order; each recorded in ``manifest`` at once."""
    try:
        families.use_folders(spec.folders)  # before any backend's variants are listed
        opened = _open(spec.targets)
    except XBackendError as error:  # a family's folder among them (ManifestError)
        manifest.problem = str(error)
        return
    try:
        manifest.devices = {label: _device(backend) for label, backend in opened}
        plan = dataclasses.replace(
            spec.plan, variants=resolve_variants(spec.variant_words, opened, spec.plan.ops)
        )
        manifest.variants = plan.variants
        manifest.problem = plan_problem(plan, opened, spec.variant_words) or ""
        if manifest.problem:
            return
        todo = configs(plan, opened)
        for step, shape in enumerate(plan.shapes, start=1):
            inputs = Inputs(shape, plan.seed, plan.batch)
            for config in todo:
                blank = config.record(spec.run_id, shape, step, plan.batch)
                entry = profile_point(plan, config, blank, inputs)
                manifest.entries.append(entry)
                manifest.write(spec.manifest)
                print(f"profiled {entry.title}: {entry.record['status']}", flush=True)
        manifest.finished = True
    finally:
        for _, backend in opened:
            backend.close()


def _open(targets: Sequence[str]) -> list[tuple[str, Backend]]:
    opened: list[tuple[str, Backend]] = []
    try:
        for text in targets:
            target = Target.parse(text)
            backend = get_backend(target.name, target.device)
            opened.append((target.label, backend))
    except BaseException:
        for _, backend in opened:
            backend.close()
        raise
    return opened


def _device(backend: Backend) -> dict[str, Any]:
    """The device as a run header records it, with its state (NVML) where watched."""
    record = backend.device.to_dict()
    state = backend.monitor().header()
    if state:
        record["state"] = state
    return record


def plan_problem(
    plan: Plan, opened: Sequence[tuple[str, Backend]], asked: Sequence[str]
) -> str | None:
    """Why the plan cannot mean what it says: a size an operation refuses, a variant
    no opened backend has (``asked``: the words of ``--variants``)."""
    for op in plan.ops:
        for shape in plan.shapes:
            problem = operation(op).shape_problem(shape.M, shape.N)
            if problem:
                return f"{problem}; {shape} is not"
    known = {v for _, backend in opened for op in plan.ops for v in backend.variants(op)}
    unknown = [word for word in asked if word not in known and word not in VARIANT_SETS]
    if unknown:
        return (
            f"unknown variant(s) {', '.join(unknown)}; for {', '.join(plan.ops)} these "
            f"backends have: {', '.join(sorted(known))}"
        )
    if plan.variants is not None and not plan.variants:
        return f"these backends have no variants of {', '.join(asked)} to run"
    return None


def profile_point(plan: Plan, config: Config, blank: PointRecord, inputs: Inputs) -> Entry:
    """One run of the point's product, checked; or why it did not run."""
    shape = Shape(blank.M, blank.K, blank.N)
    reason = config.problem or memory_problem(config, shape, blank.batch, plan.check)
    if reason:
        return Entry(dataclasses.replace(blank, reason=reason).to_dict())
    kernel = config.backend.variant_spec(config.variant, config.op).kernel
    op = operation(config.op)
    try:
        method = inputs.check_for(op, config.dtype, plan.check)
        A, B = inputs.operands(op, config.dtype)
        reference = inputs.reference(op, config.dtype, method)
        measured = config.backend.measure(
            A, B, config.variant, config.tile, op=config.op, warmup=0, samples=0
        )
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as error:  # a compile error, memory: before any launch
        reason = f"{type(error).__name__}: {error}"[:4000]
        return Entry(dataclasses.replace(blank, status="error", reason=reason).to_dict(), kernel)
    verdict = check(measured.result, reference)
    wrong = "the result differs from the reference beyond the tolerance"
    if verdict.nan_count:
        wrong += f", {verdict.nan_count} elements not finite"
    checked = dataclasses.replace(
        blank,
        status="ok" if verdict.equal else "mismatch",
        reason="" if verdict.equal else wrong,
        equal=verdict.equal,
        max_abs_error=verdict.max_abs_error,
        bound_ratio=verdict.bound_ratio,
        check=verdict.method,
        params=measured.params,
    )
    return Entry(checked.to_dict(), kernel, ran=True)


if __name__ == "__main__":
    raise SystemExit(main())

"""The tune cache (tuned.json) against hostile contents: a bad entry is ignored with a
warning naming the file, and the variant's default is used. A choice made for another
build (driver, kernel source, xbackend) is stale; writers running together lose nothing;
and a backend takes the cache's choices only when handed them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

import xbackend.tuning.cache as tune_cache
from xbackend import tuning
from xbackend.launches import warp
from xbackend.launches.choices import ChoiceRequest, shape_class
from xbackend.launches.geometries import per_product
from xbackend.operations import operation
from xbackend.problems import Reference, Shape, check, make_operands

SEED = 21
GOOD = warp.default_config("block", 128).to_dict()
# A choice that is no device's untuned default (a processor's is 64×64×8 with 8×4 patches),
# so that a test sees whether a backend took it.
CHOSEN = warp.WarpConfig(64, 64, 16, 64, 64, 8, 4)
HUGE = float("inf")  # written as 1e400, which Python's json reads as inf


def _entry(**params: object) -> dict[str, object]:
    return {"params": {**GOOD, **params}, "blocks": 512, "tflops": 1.5, "shape": "a shape"}


# Each of these entries once crashed a lookup, a launch or `tune --show`.
BAD_ENTRIES: dict[str, object] = {
    "zero": _entry(BM=0),
    "negative": _entry(BN=-128),
    "not dividing": _entry(BM=96),  # 96 is no multiple of WM = 128
    "not a number": _entry(BK="abc"),
    "a fraction": _entry(TM=8.5),
    "a bool": _entry(TN=True),
    "unknown name": _entry(XX=4),
    "no slices": _entry(slices=0),
    "too many slices": _entry(slices=10**6),
    "params not a dict": {"params": [128, 128], "blocks": 1},
    "no params": {"blocks": 1},
    "not a dict": "fast",
    "negative blocks": {**_entry(), "blocks": -1},
    "blocks not a number": {**_entry(), "blocks": "many"},
    "tflops not a number": {**_entry(), "tflops": "fast"},
    "shape not a string": {**_entry(), "shape": [1, 2, 3]},
    "huge": _entry(BM=HUGE),
    "huge blocks": {**_entry(), "blocks": HUGE},
}


def _key(name: str) -> str:
    """A key with all six fields (a key without them is malformed), told apart by ``name``."""
    return tune_cache.entry_key("cuda", "GPU", name, "mm", "float32", "large")


GOOD_KEY = _key("good")
BAD_KEYED = {_key(name): entry for name, entry in BAD_ENTRIES.items()}


def _write(path: Path, entries: dict[str, object]) -> Path:
    text = json.dumps({"format": tuning.FORMAT, "entries": entries})
    path.write_text(text.replace("Infinity", "1e400"), encoding="utf-8")
    return path


def _warnings_of(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [str(w.message) for w in caught]


def test_an_empty_or_relative_xdg_cache_home_means_unset(tmp_path, monkeypatch):
    monkeypatch.delenv(tuning.CACHE_ENV, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    for value in ("", "relative/cache"):
        monkeypatch.setenv("XDG_CACHE_HOME", value)
        assert tuning.cache_path() == tmp_path / ".cache" / "xbackend" / "tuned.json"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert tuning.cache_path() == tmp_path / "cache" / "xbackend" / "tuned.json"


def test_malformed_entries_are_dropped_at_load_with_one_warning_naming_the_file(tmp_path):
    path = _write(tmp_path / "tuned.json", {GOOD_KEY: _entry(), **BAD_KEYED})
    entries, messages = _warnings_of(lambda: tuning.load_entries(path))
    assert list(entries) == [GOOD_KEY]
    assert len(messages) == 1 and str(path) in messages[0], messages
    for name in BAD_ENTRIES:
        assert name in messages[0]
    entries, messages = _warnings_of(lambda: tuning.load_entries(path))
    assert list(entries) == [GOOD_KEY] and messages == []  # once per file and process


def test_a_file_that_is_not_json_is_an_empty_cache_with_a_warning(tmp_path):
    path = tmp_path / "tuned.json"
    path.write_text('{"format": 2, "entr', encoding="utf-8")
    entries, messages = _warnings_of(lambda: tuning.load_entries(path))
    assert entries == {} and len(messages) == 1 and str(path) in messages[0]


@pytest.mark.slow
def test_tune_show_survives_malformed_entries(tmp_path):
    path = _write(tmp_path / "tuned.json", {GOOD_KEY: _entry(), **BAD_KEYED})
    env = {**os.environ, tuning.CACHE_ENV: str(path)}
    done = subprocess.run(
        [sys.executable, "-m", "xbackend", "tune", "--backend", "cpu", "--show"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert ": 1 entries" in done.stdout and GOOD_KEY in done.stdout
    assert str(path) in done.stderr


def _tuned_backend(backend):
    tuned = [v for v in backend.variants("mm") if per_product(backend.variant_spec(v))]
    if not tuned:
        pytest.skip(f"{backend.name} has no tuned variants")
    tuning.attach(backend)  # as xbackend.get_backend does
    return tuned[0]


def _key_for(backend, variant: str, shape: Shape) -> str:
    units = backend.device.compute_units or 0
    return "|".join(
        (backend.name, backend.device.name, variant, "mm", "float32",
         shape_class(shape.M, shape.N, units))
    )  # fmt: skip


@pytest.mark.parametrize(
    "params",
    [
        {"BM": 96},  # not dividing: refused by WarpConfig.problem
        {"BM": 0},
        {"BM": HUGE},
        # Legal, but its slabs exceed any device's local memory, padded or not (512 KB):
        # refused by tile_problem. (BK 64 is 256 KB unpadded, which a CPU's OpenCL has.)
        {"BM": 512, "BN": 512, "BK": 128, "WM": 512, "WN": 512, "TM": 8, "TN": 8},
    ],
    ids=["not dividing", "zero", "huge", "too large for the device"],
)
def test_a_bad_entry_for_this_device_falls_back_to_the_default(
    backend, tmp_path, monkeypatch, params
):
    variant = _tuned_backend(backend)
    shape = Shape(70, 33, 65)
    A, B = make_operands(shape, SEED)
    units = backend.device.compute_units or 0
    key = "|".join(
        (backend.name, backend.device.name, variant, "mm", "float32",
         shape_class(shape.M, shape.N, units))
    )  # fmt: skip
    path = _write(tmp_path / "tuned.json", {key: _entry(**params)})
    monkeypatch.setenv(tuning.CACHE_ENV, str(path))
    C, messages = _warnings_of(lambda: backend.matmul(A, B, variant=variant))
    assert check(C, Reference.of(A, B)).equal
    assert any(str(path) in message for message in messages), messages


@pytest.mark.slow
def test_saves_from_many_threads_leave_a_whole_file(tmp_path):
    path = tmp_path / "tuned.json"
    failures: list[BaseException] = []

    def save(number: int) -> None:
        try:
            for round_ in range(40):
                tuning.save_entries({f"thread {number} round {round_}": _entry()}, path)
        except BaseException as error:  # reported by the assertion below
            failures.append(error)

    threads = [threading.Thread(target=save, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len(json.loads(path.read_text())["entries"]) == 1
    # No temporary left; the lock file stays (removing it would race another locker).
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tuned.json", "tuned.json.lock"]


_UPDATER = """
import sys
from xbackend import tuning
import xbackend.tuning.cache as tune_cache
path, name = sys.argv[1], sys.argv[2]
for round_ in range(25):
    key = tune_cache.entry_key("cuda", "GPU", f"{name} {round_}", "mm", "float32", "large")
    tuning.update_entries({key: %r}, tuning.Path(path))
"""


@pytest.mark.slow
def test_updates_from_two_processes_and_threads_all_survive(tmp_path):
    """Read-modify-write under the lock: no writer's entries are lost to another's."""
    path = tmp_path / "tuned.json"
    code = _UPDATER % (_entry(),)
    processes = [
        subprocess.Popen([sys.executable, "-c", code, str(path), f"process {n}"]) for n in range(2)
    ]

    def update(number: int) -> None:
        for round_ in range(25):
            tuning.update_entries({_key(f"thread {number} {round_}"): _entry()}, path)

    threads = [threading.Thread(target=update, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [process.wait(timeout=120) for process in processes] == [0, 0]
    entries = tuning.load_entries(path)
    writers = [f"process {n}" for n in range(2)] + [f"thread {n}" for n in range(2)]
    assert set(entries) == {_key(f"{writer} {r}") for writer in writers for r in range(25)}


def test_finite_random_products_through_a_good_entry(backend, tmp_path, monkeypatch):
    """The validation keeps what the tuner writes: a good entry is used as it is."""
    variant = _tuned_backend(backend)
    config = warp.WarpConfig(64, 64, 8, 64, 64, 8, 4)
    if backend.tile_problem(variant, 64, 4, "mm", config.to_dict()):
        pytest.skip("this device cannot run the entry")
    shape = Shape(66, 40, 70)
    A, B = make_operands(shape, SEED)
    units = backend.device.compute_units or 0
    key = "|".join(
        (backend.name, backend.device.name, variant, "mm", "float32",
         shape_class(shape.M, shape.N, units))
    )  # fmt: skip
    path = _write(tmp_path / "tuned.json", {key: {"params": config.to_dict(), "blocks": 2}})
    monkeypatch.setenv(tuning.CACHE_ENV, str(path))
    measured, messages = _warnings_of(lambda: backend.measure(A, B, variant, warmup=0, samples=0))
    assert messages == [] and measured.params == config.to_dict()
    assert check(measured.result, Reference.of(A, B)).equal
    assert np.isfinite(measured.result).all()


def test_a_choice_for_another_build_is_stale(backend, tmp_path, monkeypatch):
    """An entry tuned for another driver, kernel source or xbackend version is ignored
    with a warning; the same entry for this build is used."""
    variant = _tuned_backend(backend)
    config = CHOSEN  # no device's untuned default: a change of choice shows
    if backend.tile_problem(variant, 64, 4, "mm", config.to_dict()):
        pytest.skip("this device cannot run the entry")
    shape = Shape(66, 40, 70)
    A, B = make_operands(shape, SEED)
    key = _key_for(backend, variant, shape)
    build = tuning.current_build(backend, variant)
    assert set(build) == {"driver", "kernel", "xbackend"}
    monkeypatch.setenv(tuning.CACHE_ENV, str(tmp_path / "tuned.json"))
    for changed in ("driver", "kernel", "xbackend"):
        entry = {"params": config.to_dict(), "blocks": 2, "build": {**build, changed: "old"}}
        path = _write(tmp_path / "tuned.json", {key: entry})
        measured, messages = _warnings_of(lambda: backend.measure(A, B, variant, samples=0))
        assert measured.params != config.to_dict()
        assert any(str(path) in m and changed in m for m in messages), messages
    _write(
        tmp_path / "tuned.json", {key: {"params": config.to_dict(), "blocks": 2, "build": build}}
    )
    measured = backend.measure(A, B, variant, warmup=0, samples=0)
    assert measured.params == config.to_dict()
    assert check(measured.result, Reference.of(A, B)).equal


def test_the_kernel_digest_follows_the_kernel_file(backend, tmp_path, monkeypatch):
    variant = _tuned_backend(backend)
    before = tuning.current_build(backend, variant)["kernel"]
    language = {"cuda": "cuda", "opencl": "opencl"}[backend.name]
    family = backend.variant_spec(variant).family
    from xbackend.launches.kernels import SUFFIXES, read_kernel

    _, text = read_kernel(family, language)
    edited = tmp_path / language / f"{family}{SUFFIXES[language]}"
    edited.parent.mkdir()
    monkeypatch.setenv("XBACKEND_KERNELS", str(tmp_path))
    # A comment, its spacing, a blank line: the same code, the same digest.
    edited.write_text("// a note\n" + text.replace("\n", "\n\n", 3) + "\n/* an edit */\n")
    assert tuning.current_build(backend, variant)["kernel"] == before
    # A line of code: another kernel.
    edited.write_text(text + "\n#define XB_EDITED 1\n")
    assert tuning.current_build(backend, variant)["kernel"] != before


def test_cached_choices_read_the_file_once_and_again_when_it_changes(tmp_path, monkeypatch):
    path = tmp_path / "tuned.json"
    monkeypatch.setenv(tuning.CACHE_ENV, str(path))
    choices = tuning.CachedChoices()
    request = ChoiceRequest("cuda", "GPU", "vec4", operation("mm"), "float32", "large", None)
    assert choices.choice(request) is None
    first, second = warp.WarpConfig(128, 128, 8, 128, 128, 8, 8), warp.default_config("block", 64)
    tuning.save_entries({"cuda|GPU|vec4|mm|float32|large": {"params": first.to_dict()}})
    assert choices.choice(request) == first.to_dict()
    reads = []

    def load_entries(p):
        reads.append(p)
        return {}

    monkeypatch.setattr(tune_cache, "load_entries", load_entries)
    assert choices.choice(request) == first.to_dict() and reads == []  # unchanged: not read again
    monkeypatch.undo()
    monkeypatch.setenv(tuning.CACHE_ENV, str(path))
    tuning.save_entries({"cuda|GPU|vec4|mm|float32|large": {"params": second.to_dict()}})
    assert choices.choice(request) == second.to_dict()


class _Always:
    """A stand-in for the tune cache: one configuration for every product, handed over
    as the backends take it (its parameters by name)."""

    def __init__(self, config: warp.WarpConfig):
        self.config = config
        self.requests: list[ChoiceRequest] = []

    def choice(self, request):
        self.requests.append(request)
        return self.config.to_dict()


def test_a_backend_takes_the_choices_it_is_handed_and_no_others(backend):
    tuned = [v for v in backend.variants("mm") if per_product(backend.variant_spec(v))]
    variant = next(iter(tuned), None)
    if variant is None:
        pytest.skip(f"{backend.name} has no tuned variants")
    config = CHOSEN
    shape = Shape(66, 40, 70)
    A, B = make_operands(shape, SEED)
    held = backend.choices
    try:
        chooser = _Always(config)
        backend.use_choices(chooser)
        measured = backend.measure(A, B, variant, warmup=0, samples=0)
        assert measured.params == config.to_dict()
        (request,) = chooser.requests
        assert (request.variant, request.op.name, request.dtype) == (variant, "mm", "float32")
        assert request.build == backend.kernel_build(variant)
        backend.use_choices(None)
        assert backend.measure(A, B, variant, warmup=0, samples=0).params != config.to_dict()
        bmm = backend.measure(A[None], B[None], variant, op="bmm", warmup=0, samples=0)
        assert bmm.params is not None and chooser.requests == [request]  # bmm asks nobody
    finally:
        backend.use_choices(held)

"""The tuned variants' defaults before any tuning (``launches/warp.py``): the patch per
thread derived from a multiprocessor's registers, the old defaults where they are not
known, the halved block and the K split of a small output; the register estimate
against ptxas's counts; and ``prebuild`` building a batch's kernels on an OpenCL device
so that the runs after it build nothing."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

import xbackend
from xbackend.launches import warp
from xbackend.launches.choices import shape_class
from xbackend.operations import Shape, make_operands

SEED = 20261124
ROOT = Path(__file__).resolve().parent.parent
NVCC = Path("/usr/local/cuda/bin/nvcc")
H100 = {"registers": 65536, "compute_units": 132}
Config = warp.WarpConfig


def test_the_default_with_an_h100s_registers_is_16x8_patches_of_128_threads():
    """Guards the derived default on an H100/H200 (65536 registers per multiprocessor)."""
    block = warp.default_config("block", 128, 65536)
    assert block == Config(128, 128, 8, 128, 128, 16, 8) and block.threads == 128
    grouped = warp.default_config("warp", 128, 65536)
    assert (grouped.WM, grouped.WN, grouped.TM, grouped.TN) == (64, 64, 16, 8)
    assert grouped.threads == 128 and grouped.warp_tiled


def test_without_registers_the_defaults_are_the_old_ones():
    """Guards devices that do not say their registers (CPUs, AMD): what any device takes."""
    assert warp.default_config("block", 128) == Config(128, 128, 8, 128, 128, 8, 8)
    assert warp.default_config("warp", 128) == Config(128, 128, 8, 32, 64, 8, 8)
    assert warp.default_config("block", 64, None) == Config(64, 64, 8, 64, 64, 8, 4)
    assert warp.default_config("warp", 64, None) == Config(64, 64, 8, 32, 32, 8, 4)


def _rule_patch(bm: int, bn: int, bk: int, registers: int) -> tuple[int, int] | None:
    """default_patch's docstring worked by hand for one group per block: the first of
    16×8, 8×8, 8×4 with at least 64 threads, at most 255 registers a thread (patch,
    fragments, 8 per 16-byte slab piece loaded, 40 more) and two blocks in the file;
    where none keeps two, the first of which one block fits."""
    for blocks in (2, 1):
        for tm, tn in ((16, 8), (8, 8), (8, 4)):
            threads = (bm // tm) * (bn // tn)
            pieces = (bm * bk + bk * bn) // 4 // threads
            need = tm * tn + tm + tn + 8 * pieces + 40
            if threads >= 64 and need <= 255 and blocks * threads * need <= registers:
                return tm, tn
    return None


@pytest.mark.parametrize("registers", [131072, 65536, 57344, 57343, 32768, 16384])
def test_the_patch_follows_the_register_file(registers):
    """Guards default_patch's rule: 16×8 needs 2 × 128 × 224 = 57344 registers at
    128×128×8 for two blocks; with fewer no patch keeps two, and the one block of 16×8
    (128 × 224 = 28672 registers) is taken where it fits, never the 8×8 of 256 threads
    that would need 34816 of a 32768-register file. Below 28672, nothing fits: the
    default falls back to the 8×8 that devices without registers take."""
    expected = _rule_patch(128, 128, 8, registers)
    assert warp.default_patch("block", 128, 128, 8, registers) == expected
    config = warp.default_config("block", 128, registers)
    assert (expected or (8, 8)) == (config.TM, config.TN)
    if registers >= 28672:
        assert expected == (16, 8)
    else:
        assert expected is None


def test_the_patch_at_the_64_tile_and_the_halved_block_follow_the_rule():
    """Guards the rule where 16×8 leaves too few threads (a 64×64 block) or a thread
    too many registers (the halved block 64×128×16 of a small output)."""
    assert warp.default_patch("block", 64, 64, 8, 65536) == _rule_patch(64, 64, 8, 65536) == (8, 8)
    # 16384 registers hold one block of 64 threads of 152 registers, not two.
    assert warp.default_patch("block", 64, 64, 8, 16384) == _rule_patch(64, 64, 8, 16384) == (8, 8)
    assert warp.default_patch("block", 64, 64, 8, 8192) == _rule_patch(64, 64, 8, 8192) is None
    assert _rule_patch(64, 128, 16, 65536) == (8, 8)
    small = warp.default_config("block", 128, 65536, small=True)
    assert small == Config(64, 128, 16, 64, 128, 8, 8)


DEFAULT_CASES = list(
    itertools.product(("block", "warp"), (64, 128), (None, 16384, 32768, 65536), (0, 1), (0, 1))
)


@pytest.mark.parametrize("layout, tile, registers, double, small", DEFAULT_CASES)
def test_every_default_builds_and_keeps_two_warps(layout, tile, registers, double, small):
    """Guards against a default the kernel refuses, or one with fewer than 64 threads."""
    config = warp.default_config(
        layout, tile, registers, double_buffered=bool(double), small=bool(small)
    )
    assert config.problem() is None, config.label
    assert config.threads >= 64, config.label
    assert tile == config.BN


def test_a_large_output_takes_the_full_default_without_a_split():
    """Guards 4096³ on an H100: the output fills the device, so no split, no halving."""
    for double in (False, True):
        chosen = warp.untuned_config("block", 65536, double, (4096, 4096, 4096), 132)
        assert chosen == warp.default_config("block", 128, 65536, double_buffered=double)
        assert chosen.slices == 1 and (chosen.TM, chosen.TN) == (16, 8)


def test_a_small_output_takes_the_block_that_keeps_more_threads_at_work():
    """Guards the halved block's race on 1000×1000 (K 3001) on an H100: 64 full blocks or
    128 halved ones. Single-buffered, a halved block (8×8, 168 registers a thread) fits 3
    times in the file (resident_blocks), so K/3 gives 384 blocks of 128 threads at work
    against the full block's 2 × 132 slots = 256 blocks at K/4: the halved block wins.
    Double-buffered (184 registers) only 2 fit, the halved block reaches K/2 = 256
    blocks, a tie, and the full block keeps it for its larger patch, at K/4."""
    halved = Config(64, 128, 16, 64, 128, 8, 8)
    assert warp.resident_blocks(halved, 65536, False) == 3
    assert warp.resident_blocks(halved, 65536, True) == 2
    size = (1000, 1000, 3001)
    assert shape_class(1000, 1000, 132) == "small"
    single = warp.untuned_config("block", 65536, False, size, 132)
    assert single == halved.with_slices(3)
    double = warp.untuned_config("block", 65536, True, size, 132)
    assert double == Config(128, 128, 8, 128, 128, 16, 8, slices=4)


def test_resident_blocks_count_registers_in_eights():
    """Guards the allocation the slots are counted with: a 64×64×8 block of 8×4 patches
    needs 100 registers a thread, allocated as 104, so 65536 // (128 × 104) = 4 blocks
    (not 5); a device that does not say its registers is given BLOCKS_PER_UNIT."""
    small = Config(64, 64, 8, 64, 64, 8, 4)
    assert warp.thread_registers(small) == 100
    assert warp.resident_blocks(small, 65536, False) == 4
    assert warp.resident_blocks(small, None, False) == warp.BLOCKS_PER_UNIT == 2


def test_a_batch_is_never_split_and_unknown_registers_keep_the_full_block():
    """Guards a batch (size None: it fills the device along z) and a device that does
    not say its registers (no halved block competes; the split still fills it)."""
    batch = warp.untuned_config("block", 65536, False, None, 132)
    assert batch == warp.default_config("block", 128, 65536) and batch.slices == 1
    blind = warp.untuned_config("block", None, False, (1000, 1000, 3001), 132)
    assert blind.with_slices(1) == Config(128, 128, 8, 128, 128, 8, 8)
    assert blind.slices == 4  # 2 resident × 132 units // 64 tiles


def test_a_processor_takes_the_patch_its_runtime_vectorizes_best():
    """Guards processor_config: a runtime that packs work-items into vector lanes
    (preferred float width 1, Intel's) takes 8×4 patches of a 64 tile; one that vectorizes
    within a work-item (PoCL's 16) the 16×8 patches of 128; both split a small output."""
    packed = warp.untuned_config("block", None, False, (512, 512, 512), 2, vector_width=1)
    assert packed == Config(64, 64, 8, 64, 64, 8, 4)
    wide = warp.untuned_config("warp", None, False, (512, 512, 512), 2, vector_width=16)
    assert wide == Config(128, 128, 8, 64, 64, 16, 8)
    small = warp.untuned_config("block", None, False, (96, 96, 1001), 2, vector_width=16)
    assert (small.BM, small.slices) == (128, 3)
    # A GPU without registers (no vector width given) keeps the 8×8 patches of 128.
    blind = warp.untuned_config("block", None, False, (4096, 4096, 4096), 60)
    assert blind == Config(128, 128, 8, 128, 128, 8, 8)


def _ptxas_id(value: object) -> str:
    if isinstance(value, Config):
        return value.label.replace(" ", "-")
    return "double" if value else "single"


PTXAS_CONFIGS = [
    (Config(128, 128, 8, 128, 128, 16, 8), False),
    (Config(128, 128, 8, 128, 128, 16, 8), True),
    (Config(64, 128, 16, 64, 128, 8, 8), False),
    (Config(64, 128, 16, 64, 128, 8, 8), True),
    (Config(64, 64, 8, 64, 64, 8, 4), False),
    (Config(128, 128, 8, 128, 128, 8, 8), False),
    # warp_async's copies hold no loads in registers: estimated as single-buffered.
    (Config(128, 128, 8, 32, 64, 8, 8, stages=3), False),
    (Config(128, 128, 8, 64, 64, 16, 8, stages=3), False),
]


@pytest.mark.slow
@pytest.mark.parametrize("config, double", PTXAS_CONFIGS, ids=_ptxas_id)
def test_the_register_estimate_is_close_to_ptxas(config, double, tmp_path):
    """Guards thread_registers, which the defaults are derived from, against what nvcc
    13 allocates for sm_90: within 27 registers of ptxas's count."""
    if not NVCC.exists():
        pytest.skip(f"{NVCC} is not installed")
    options = warp.defines(config, np.dtype(np.float32), vec4=True, double_buffer=double)
    done = subprocess.run(
        [str(NVCC), "-cubin", "-arch=sm_90", "-o", str(tmp_path / "x.cubin"),
         "--resource-usage", *options, "-I", str(ROOT / "kernels" / "cuda"),
         str(ROOT / "kernels" / "mm_warp" / "mm_warp.cu")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    counts = [int(n) for n in re.findall(r"Used (\d+) registers", done.stdout + done.stderr)]
    assert counts, done.stdout + done.stderr
    estimate = warp.thread_registers(config, double)
    assert abs(estimate - max(counts)) <= 27, f"estimated {estimate}, ptxas {max(counts)}"


@pytest.fixture
def opencl(monkeypatch):
    """A fresh OpenCL backend (its programs built by this test alone); two cores at
    least, as prebuild builds in threads only where there are two."""
    try:
        backend = xbackend.get_backend("opencl")
    except xbackend.BackendUnavailable as error:
        pytest.skip(f"opencl unavailable: {error.reason}")
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # compiled.prebuild asks it
    with backend:
        yield backend


def test_prebuild_builds_each_configuration_once_for_the_runs_after_it(opencl):
    """Guards the tuner's batch builds: after prebuild, a program per configuration is
    held, the runs that follow compute A·B with them and build nothing more, and a
    configuration that cannot be planned is left to its own run to report."""
    A, B = make_operands(Shape(96, 64, 80), SEED)
    configs = [Config(64, 64, 8, 64, 64, 8, 4), Config(64, 64, 16, 64, 64, 4, 8)]
    unplannable = Config(96, 64, 8, 64, 64, 8, 4)  # 64-row groups cannot tile 96 rows
    assert unplannable.problem() is not None
    before = len(opencl._programs)
    opencl.prebuild("vec4", "mm", A, B, [c.to_dict() for c in (unplannable, *configs)])
    assert len(opencl._programs) == before + 2
    expected = A.astype(np.float64) @ B.astype(np.float64)
    for config in configs:
        measured = opencl.measure(A, B, "vec4", params=config.to_dict(), warmup=0, samples=1)
        assert measured.params == config.to_dict()
        np.testing.assert_allclose(measured.result, expected, rtol=1e-4, atol=1e-4)
    assert len(opencl._programs) == before + 2


def test_an_asynchronous_configuration_carries_its_stages():
    """Guards warp_async's stage count: in its label, build options and slab memory, absent
    from the other variants' parameters (their records and entries read as before), and
    refused outside 2..4."""
    plain, staged = Config(128, 128, 8, 32, 64, 8, 8), Config(128, 128, 8, 32, 64, 8, 8, stages=3)
    assert "stages" not in plain.to_dict() and staged.to_dict()["stages"] == 3
    assert Config.from_dict(staged.to_dict()) == staged
    assert staged.label.endswith("3 stages") and "stages" not in plain.label
    assert staged.staged_bytes(4, False) == 3 * (128 * 8 + 32 * 8 + 8 * 128) * 4
    options = warp.defines(staged, np.dtype(np.float32), vec4=True, double_buffer=False)
    assert "-DASYNC" in options and "-DSTAGES=3" in options
    assert "-DASYNC" not in warp.defines(plain, np.dtype(np.float32), True, False)
    for wrong in (1, 5):
        assert "stages must be 2 to 4" in str(plain.with_stages(wrong).problem())


def test_the_tuner_searches_every_stage_count_of_an_asynchronous_variant():
    from xbackend import families
    from xbackend.launches.block_tiles import candidates

    shipped = {spec.name: spec for _, spec in families.family("mm_warp").variants}
    staged = list(candidates(shipped["warp_async"]))
    plain = list(candidates(shipped["warp"]))
    assert {config.stages for config in plain} == {0}
    assert sorted(staged, key=lambda c: c.label) == sorted(
        (config.with_stages(n) for config in plain for n in (2, 3, 4)), key=lambda c: c.label
    )


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_warp_async_computes_every_edge_at_every_stage_count(opencl, stages):
    """The asynchronous loop (on a processor its copies are loads and stores) at shapes
    whose edges cut every slab, with K shorter than the stages in flight and longer."""
    from xbackend.errors import UnsupportedParameter

    config = Config(64, 64, 8, 32, 32, 8, 4, stages=stages)
    for shape in (Shape(70, 45, 130), Shape(64, 12, 64), Shape(5, 4, 3), Shape(33, 8, 70)):
        A, B = make_operands(shape, SEED + stages)
        measured = opencl.measure(A, B, "warp_async", params=config.to_dict(), warmup=0,
                                  samples=1)  # fmt: skip
        assert measured.params == config.to_dict()
        expected = A.astype(np.float64) @ B.astype(np.float64)
        np.testing.assert_allclose(measured.result, expected, rtol=1e-4, atol=1e-4)
    with pytest.raises(UnsupportedParameter, match="warp_db copies no slabs asynchronously"):
        opencl.measure(A, B, "warp_db", params=config.to_dict(), warmup=0, samples=1)


@pytest.mark.slow
@pytest.mark.parametrize("arch, copies", [("sm_90", True), ("sm_75", False)])
def test_warp_async_copies_with_cp_async_where_the_gpu_has_it(arch, copies, tmp_path):
    """On compute capability 8.0 and later the slabs go through cp.async (16-byte copies of
    B where VEC4 allows, each slab a commit group, a wait for all but STAGES - 2); before
    it, the same loop with loads and stores."""
    if not NVCC.exists():
        pytest.skip(f"{NVCC} is not installed")
    config = Config(128, 128, 8, 32, 64, 8, 8, stages=3)
    ptx = tmp_path / "x.ptx"
    done = subprocess.run(
        [str(NVCC), "-ptx", f"-arch={arch}", "-o", str(ptx), "-DREAL=float",
         *warp.defines(config, np.dtype(np.float32), vec4=True, double_buffer=False),
         "-I", str(ROOT / "kernels" / "cuda"), str(ROOT / "kernels" / "mm_warp" / "mm_warp.cu")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = ptx.read_text()
    found = [w in text for w in ("cp.async.cg.shared.global", "cp.async.wait_group 1")]
    assert found == [copies, copies]


class _Planner:
    """A stand-in for a compiled backend that plans warp_async on ``device``."""

    name: ClassVar[str] = "cuda"

    def __init__(self, device: xbackend.DeviceInfo, variant: str = "warp_async"):
        from xbackend.families import variant_table

        self.device = device
        self.spec = variant_table("cuda", "thread", "shared")["mm"][variant]

    def tile_problem(self, variant, tile, itemsize=4, op="mm", params=None):
        from xbackend.launches.block_tiles import group_problem

        return group_problem(self.device, self.spec, tile or 0, itemsize, "threads", "shared",
                             params)  # fmt: skip

    def choice(self, *args, **kwargs):
        return None


def _gpu(opt_in: int | None) -> xbackend.DeviceInfo:
    """An H100 as the geometry sees it, with or without CUDA's opt-in shared memory."""
    return xbackend.DeviceInfo(
        "stand-in", kind="gpu", local_mem_bytes=49152, local_mem_opt_in_bytes=opt_in,
        max_work_group_size=1024, registers=65536, compute_units=132,
    )  # fmt: skip


def test_slabs_past_the_declarable_memory_are_asked_for_at_launch():
    """Guards cuBLAS's shape in 4 stages (57,344 bytes of slabs): on a device that lets a
    block opt into more shared memory than it may declare (CUDA), the kernel is built
    with DYNAMIC_SHARED and its launch asks for the slabs' bytes; in 3 stages (43,008
    bytes) nothing changes; a device without the opt-in (OpenCL) refuses it."""
    from xbackend.errors import UnsupportedParameter
    from xbackend.launches.block_tiles import plan
    from xbackend.launches.launch import KernelLaunch

    cuda = _Planner(_gpu(232448))
    A, B = make_operands(Shape(512, 256, 64), SEED)
    cublas = Config(256, 128, 8, 64, 64, 16, 8)
    for stages, slabs, dynamic in ((4, 57344, 57344), (3, 43008, 0)):
        params = cublas.with_stages(stages).to_dict()
        assert cublas.with_stages(stages).staged_bytes(4, False) == slabs
        (launch,) = plan(cuda, "mm", cuda.spec, None, A, B, params, False).steps  # type: ignore[arg-type]
        assert isinstance(launch, KernelLaunch) and launch.shared_bytes == dynamic
        assert ("-DDYNAMIC_SHARED" in launch.options) == bool(dynamic)
    opencl = _Planner(_gpu(None))
    with pytest.raises(UnsupportedParameter, match="57344 bytes exceed 49152 bytes"):
        plan(opencl, "mm", opencl.spec, None, A, B, cublas.with_stages(4).to_dict(), False)  # type: ignore[arg-type]


# A double-buffered 128×256×16 block: its slabs take 49,664 bytes with A's rows padded,
# 49,152 (NVIDIA OpenCL's whole local memory) without.
WIDE_BLOCK = Config(128, 256, 16, 128, 256, 16, 8)


def test_slabs_past_the_memory_by_their_padding_alone_are_built_unpadded():
    """Guards OpenCL's 48 KB: where a block may have 49,152 bytes and no more, the
    double-buffered 128×256×16 block is built with -DPAD=0 and fits; with CUDA's opt-in
    it keeps its padding, in dynamic shared memory; a block past the memory unpadded too
    is still refused, and the asynchronous slabs (not transposed) keep theirs."""
    from xbackend.errors import UnsupportedParameter
    from xbackend.launches.block_tiles import plan
    from xbackend.launches.launch import KernelLaunch

    assert WIDE_BLOCK.staged_bytes(4, True) == 49664
    assert WIDE_BLOCK.staged_bytes(4, True, pad=0) == 49152
    A, B = make_operands(Shape(300, 70, 520), SEED)
    for opt_in, pad, dynamic in ((None, 0, 0), (232448, warp.PAD, 49664)):
        device = _Planner(_gpu(opt_in), "vec4_db")
        (launch,) = plan(device, "mm", device.spec, None, A, B, WIDE_BLOCK.to_dict(), False).steps  # type: ignore[arg-type]
        assert isinstance(launch, KernelLaunch) and f"-DPAD={pad}" in launch.options
        assert launch.shared_bytes == dynamic
    opencl = _Planner(_gpu(None), "vec4_db")
    wider = Config(256, 256, 16, 256, 256, 16, 16)  # 65,536 bytes even unpadded: said padded
    with pytest.raises(UnsupportedParameter, match="66048 bytes exceed 49152 bytes"):
        plan(opencl, "mm", opencl.spec, None, A, B, wider.to_dict(), False)  # type: ignore[arg-type]
    assert Config(64, 64, 8, 32, 32, 8, 4, stages=3).padding(4, False, 1) == warp.PAD


def test_the_unpadded_build_computes_the_product(opencl, monkeypatch):
    """The block above built unpadded (its device's memory made NVIDIA OpenCL's 49,152
    bytes) computes A·B at a size that leaves every edge partial, its output poisoned
    first; the padding was the only thing that changed."""
    import dataclasses

    small = dataclasses.replace(opencl.device, local_mem_bytes=49152, local_mem_opt_in_bytes=None)
    monkeypatch.setattr(opencl, "_device", small)
    A, B = make_operands(Shape(300, 70, 520), SEED)
    product = opencl.planned("mm", "vec4_db", None, A, B)  # the default: padded
    assert f"-DPAD={warp.PAD}" in product.steps[0].options
    measured = opencl.measure(A, B, "vec4_db", params=WIDE_BLOCK.to_dict(), warmup=0, samples=1)
    assert measured.params == WIDE_BLOCK.to_dict()
    assert any("-DPAD=0" in options for _, options in opencl._programs)  # what ran
    expected = A.astype(np.float64) @ B.astype(np.float64)
    np.testing.assert_allclose(measured.result, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_the_dynamic_build_declares_no_slabs():
    """With DYNAMIC_SHARED, nvcc's PTX declares the slabs as extern shared memory and
    ptxas counts no static shared memory for mm_warp."""
    if not NVCC.exists():
        pytest.skip(f"{NVCC} is not installed")
    config = Config(256, 128, 8, 64, 64, 16, 8, stages=4)
    done = subprocess.run(
        [str(NVCC), "-cubin", "-arch=sm_90", "-o", os.devnull, "-Xptxas", "-v",
         "-DREAL=float", "-DDYNAMIC_SHARED",
         *warp.defines(config, np.dtype(np.float32), vec4=True, double_buffer=False),
         "-I", str(ROOT / "kernels" / "cuda"), str(ROOT / "kernels" / "mm_warp" / "mm_warp.cu")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = done.stderr.split("Compiling entry function 'mm_warp'")[1]
    used = next(line for line in report.splitlines() if "Used" in line)
    assert "registers" in used and "smem" not in used


def test_the_untuned_stage_count_fits_the_devices_shared_memory():
    """warp_async's untuned default takes DEFAULT_STAGES where their slabs fit, fewer
    where they do not (float64 at 128×128×8 on 48 KB: 2), and keeps a tuned count."""
    from xbackend.families import variant_table
    from xbackend.launches.block_tiles import staged

    spec = variant_table("cuda", "thread", "shared")["mm"]["warp_async"]
    default = Config(128, 128, 8, 64, 64, 16, 8)
    assert staged(spec, default, 4, 49152).stages == warp.DEFAULT_STAGES == 3
    assert staged(spec, default, 8, 49152).stages == 2
    assert staged(spec, default, 8, 49152).staged_bytes(8, False) <= 49152
    assert staged(spec, default.with_stages(4), 4, 49152).stages == 4
    plain = variant_table("cuda", "thread", "shared")["mm"]["warp_db"]
    assert staged(plain, default, 4, 49152).stages == 0


def test_an_asynchronous_variant_defaults_to_the_halved_block_with_deep_slabs():
    """Guards warp_async's untuned default on a GPU: 64×128×16 with 8×8 patches (the
    tuner's choice at 4096³ on an H100 and an H200), where warp_db keeps 128×128×8."""
    size, units = (4096, 4096, 4096), H100["compute_units"]
    chosen = warp.untuned_config("warp", H100["registers"], False, size, units, None, True)
    assert chosen == Config(64, 128, 16, 32, 64, 8, 8)
    plain = warp.untuned_config("warp", H100["registers"], True, size, units)
    assert plain == Config(128, 128, 8, 64, 64, 16, 8)
    # A small output: the tuner's 128×256×8 on both GPUs, split along K to fill the device.
    small = warp.untuned_config("warp", H100["registers"], False, (1000, 1000, 3001), units,
                                None, True, (4, 49152))  # fmt: skip
    assert small == Config(128, 256, 8, 64, 64, 16, 8, slices=4)
    # On a processor the runtime's vector width decides, as for the other variants.
    assert warp.untuned_config("warp", None, False, size, 2, 1, True) == warp.processor_config(
        "warp", 1
    )


def test_opencl_builds_name_the_ptx_of_nvidias_gpus_only(opencl, monkeypatch):
    """warp_async's OpenCL twin issues cp.async as inline PTX where the backend says the
    compiler takes it (-DXB_PTX=<major><minor>: NVIDIA's GPUs), and loads and stores
    elsewhere: a processor's build names no PTX."""
    import dataclasses

    extra = {k: v for k, v in opencl.device.extra.items() if k != "compute_capability"}
    monkeypatch.setattr(opencl, "_device", dataclasses.replace(opencl.device, extra=extra))
    monkeypatch.setattr(opencl, "_device_clock", lambda: False)
    assert opencl._ptx_option() == []  # a processor: no compute capability
    hopper = dataclasses.replace(opencl.device, extra={**extra, "compute_capability": "9.0"})
    monkeypatch.setattr(opencl, "_device", hopper)
    assert opencl._ptx_option() == []  # not an NVIDIA GPU's platform: no PTX
    monkeypatch.setattr(opencl, "_device_clock", lambda: True)
    assert opencl._ptx_option() == ["-DXB_PTX=90"]


@pytest.mark.parametrize("size", [(4096, 4096, 4096), (1000, 1000, 3001), (640, 640, 640), None])
@pytest.mark.parametrize("itemsize", [4, 8])
@pytest.mark.parametrize("variant", ["warp_async", "warp_db", "warp"])
def test_an_untuned_default_fits_shared_memory_at_every_size(size, itemsize, variant):
    """Whatever the size, the untuned default keeps its slabs within 48 KB as it runs
    (double-buffered, or at the stages block_tiles.staged gives): on an H100 in float64,
    warp_db's halved block for a small output took 50,176 bytes and every such point
    failed; warp_async's 64×128×16 and 128×256×8 would not fit even at 2 stages."""
    from xbackend.families import variant_table
    from xbackend.launches.block_tiles import staged

    spec = variant_table("cuda", "thread", "shared")["mm"][variant]
    chosen = warp.untuned_config(
        "warp", H100["registers"], spec.double_buffered, size, H100["compute_units"], None,
        spec.asynchronous, (itemsize, 49152),
    )  # fmt: skip
    given = staged(spec, chosen, itemsize, 49152)
    assert given.staged_bytes(itemsize, spec.double_buffered) <= 49152
    if itemsize == 4 and size == (640, 640, 640):  # float32 keeps the halved block
        assert (chosen.BM, chosen.BN, chosen.BK) == (64, 128, 16)

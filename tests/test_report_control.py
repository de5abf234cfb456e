"""The report's control (xbackend/report/control.py): two APIs' own ceilings side by side
on one device with their ratios, each point's share of its own API's roof beside the
device's, and the audit compare wrote (fairness.csv) with its verdicts and reasons."""

from __future__ import annotations

import json

import numpy as np

from xbackend.operations import Shape
from xbackend.report.page import write_report
from xbackend.report.points import three_digits
from xbackend.results import PointRecord, RunHeader
from xbackend.sweep import fairness

# One GPU, measured by both APIs' twin kernels: OpenCL's FMA loop 50/60 of CUDA's, its
# triad 0.98.
KERNELS = {"float32": "fma_loop: ...", "bandwidth": "copy: ...", "triad": "stream_triad: ..."}
CEILINGS = {
    "cuda": {"flops_per_s": {"float32": 60e12}, "bytes_per_s": 4.0e12, "triad_bytes_per_s": 4.3e12,
             "how": KERNELS},
    "opencl": {"flops_per_s": {"float32": 50e12}, "bytes_per_s": 3.9e12,
               "triad_bytes_per_s": 4.214e12, "how": KERNELS},
}  # fmt: skip


def _results(folder, gflops: float) -> None:
    devices = {label: {"name": "H200", "ceilings": c} for label, c in CEILINGS.items()}
    header = {"type": "run", **RunHeader(run_id="r", devices=devices).to_dict()}
    n = 4096  # compute-bound under both roofs: its share is its rate over the FMA loop's
    seconds = 2 * n**3 / gflops / 1e9
    stats = {"median": seconds, "q1": seconds, "q3": seconds, "min": seconds}
    point = PointRecord(
        run_id="r", backend="opencl", label="opencl", device="H200", variant="tiled", tile=16,
        dtype="float32", M=n, K=n, N=n, flops=2 * n**3, status="ok", kernel_s=stats,
        end_to_end_s=stats, gflops=gflops,
    )  # fmt: skip
    lines = [json.dumps(header), json.dumps(point.to_dict())]
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n")


def _audits() -> list[fairness.Audit]:
    shape = Shape(608, 532, 608)
    same = ("mm_tiled: the same machine code",)
    fair = fairness.Audit("mm", "tiled", 16, "float32", shape, "cuda", "opencl",
                          "kernel against kernel", (), same)  # fmt: skip
    unfair = fairness.Audit("mm", "vec4", 64, "float32", shape, "cuda", "opencl",
                            "kernel against kernel", ("mm_vec4 built with -DBK=16 in cuda, "
                            "-DBK=8 in opencl",))  # fmt: skip
    vendor = fairness.Audit("mm", "vendor", None, "float32", shape, "cuda", "opencl",
                            "vendor against vendor", ())  # fmt: skip
    return [fair, unfair, vendor]


def test_the_apis_ceilings_stand_side_by_side_with_their_ratios(tmp_path):
    rng = np.random.default_rng(42)
    gflops = float(rng.uniform(20_000, 40_000))
    _results(tmp_path, gflops)
    write_report([tmp_path], tmp_path)
    markdown = (tmp_path / "report.md").read_text()
    assert "## Each API at the hardware's limit" in markdown
    assert "| ceiling | cuda | opencl | opencl / cuda |" in markdown
    assert "| FMA loop, float32 | 60 TFLOP/s | 50 TFLOP/s | 0.833 |" in markdown
    assert "| triad (BabelStream) | 4.3 TB/s | 4.21 TB/s | 0.980 |" in markdown
    assert "FMA loop, float64" not in markdown  # measured by neither
    # The point's share of the device's roof (CUDA's FMA loop, the higher) and of its own.
    row = next(line for line in markdown.splitlines() if line.startswith("| opencl | mm |"))
    device_share, api_share = row.rstrip(" |").split(" | ")[-2:]
    assert device_share == f"{three_digits(gflops / 60e3 * 100)}%"
    assert api_share == f"{three_digits(gflops / 50e3 * 100)}%"


def test_the_audit_compare_wrote_is_in_the_report_with_its_reasons(tmp_path):
    _results(tmp_path, 30_000.0)
    fairness.write_csv(_audits(), tmp_path / fairness.CSV_NAME)
    write_report([tmp_path], tmp_path)
    markdown = (tmp_path / "report.md").read_text()
    assert "## Fairness: what each ratio of two APIs compares" in markdown
    assert "opencl against cuda, as planned at 608×532·532×608: 2 FAIR, 1 UNFAIR." in markdown
    assert ("| mm vec4 T=64 float32 | kernel against kernel | UNFAIR | mm\\_vec4 built with "
            "-DBK=16 in cuda, -DBK=8 in opencl | — |") in markdown  # fmt: skip
    assert ("| mm tiled T=16 float32 | kernel against kernel | FAIR | — | mm\\_tiled: the same "
            "machine code |") in markdown  # fmt: skip
    assert "| mm vendor float32 | vendor against vendor | FAIR |" in markdown
    html = (tmp_path / "report.html").read_text()
    assert "Fairness: what each ratio of two APIs compares" in html


def test_no_control_without_two_apis_on_a_device_nor_an_audit(tmp_path):
    _results(tmp_path, 30_000.0)
    header, point = (tmp_path / "results.jsonl").read_text().splitlines()
    run = json.loads(header)
    run["devices"]["opencl"]["name"] = "another GPU"
    (tmp_path / "results.jsonl").write_text(f"{json.dumps(run)}\n{point}\n")
    (tmp_path / fairness.CSV_NAME).write_text("op,verdict\nmm,MAYBE\n")  # no audit row
    write_report([tmp_path], tmp_path)
    markdown = (tmp_path / "report.md").read_text()
    assert "hardware's limit" not in markdown and "Fairness:" not in markdown


def test_a_librarys_ceilings_are_no_api_to_set_beside_the_kernels(tmp_path):
    """The CPU backend measures its device by NumPy (its BLAS, copyto), not by the twin
    kernels: on a CPU, it is not set beside OpenCL's ceilings as another API's."""
    _results(tmp_path, 30_000.0)
    header, point = (tmp_path / "results.jsonl").read_text().splitlines()
    run = json.loads(header)
    numpy_how = {"float32": "numpy.matmul 1024×1024 · 1024×1024 (the BLAS), 27 runs (host)",
                 "bandwidth": "numpy.copyto: 33554432 floats read and written"}  # fmt: skip
    run["devices"]["cuda"]["ceilings"]["how"] = numpy_how
    (tmp_path / "results.jsonl").write_text(f"{json.dumps(run)}\n{point}\n")
    write_report([tmp_path], tmp_path)
    assert "hardware's limit" not in (tmp_path / "report.md").read_text()

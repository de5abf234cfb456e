"""Issue 54 (item 6, round 5's second look): every run a measurement downloads is verified,
not its first and its last alone. A kernel wrong at one run in the middle of its timing
(state kept between runs, a launch that changes its inputs) was graded "equal" by
``check`` and recorded equal by ``compare``. The sampler now verifies each output after
the first with the caller's ``verify``, outside every timed window, and names the first
wrong one ("its 3rd timed run").

The stand-in backends here are the CPU backend's NumPy products with one run made wrong
by count; ``check``'s own test, with kernel files, is in tests/test_verdicts.py.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from xbackend.backends.cpu import CpuBackend, _HostExecution
from xbackend.measuring import sampler as sampler_module
from xbackend.measuring.sampler import sample
from xbackend.measuring.timing import Sampling
from xbackend.measuring.verified import Verifier, WrongRun, ordinal
from xbackend.problems import Reference, Shape, check
from xbackend.sweep.runner import Plan, run

SEED = 5406
# One launch a sample (no batch), a warm-up, then six timed samples: runs 1 (the first),
# 2 (the warm-up), 3..8 (the samples).
SIX_SAMPLES = Sampling(warmup=1, min_samples=6, max_samples=6, short_kernel_s=0)


def _operands(rng: np.random.Generator, M: int = 16, K: int = 14, N: int = 16):
    return rng.standard_normal((M, K), dtype=np.float32), rng.standard_normal((K, N), np.float32)


class _WrongAtRun(_HostExecution):
    """NumPy's product, wrong (C doubled) at the runs numbered in ``wrong`` alone."""

    wrong: frozenset[int] = frozenset()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.runs = 0

    def run(self) -> float:
        took = super().run()
        self.runs += 1
        if self.runs in self.wrong:
            self._C *= 2
        return took


def _backend(wrong: set[int]) -> CpuBackend:
    class WrongBackend(CpuBackend):
        def _execution(self, op, variant, tile, A, B, params=None):
            execution = _WrongAtRun(op, variant, tile, A, B)
            execution.wrong = frozenset(wrong)
            return execution

    return WrongBackend()


@pytest.mark.parametrize(
    ("number", "said"),
    [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"), (12, "12th"), (13, "13th"),
     (21, "21st"), (22, "22nd"), (101, "101st"), (111, "111th"), (112, "112th")],
)  # fmt: skip
def test_ordinals(number, said):
    assert ordinal(number) == said


def test_a_run_wrong_in_the_middle_is_found_and_named():
    """Run 5 is the 3rd timed sample: right at the first and at the last."""
    A, B = _operands(np.random.default_rng(SEED))
    reference = Reference.of(A, B)
    verify = Verifier(A, B, reference=reference)
    measured = _backend({5}).measure(A, B, "vendor", sampling=SIX_SAMPLES, verify=verify)
    assert check(measured.result, reference).equal
    assert check(measured.last_result, reference).equal  # the old first-and-last scheme passed it
    assert measured.wrong is not None and measured.wrong.said == "its 3rd timed run"
    assert not check(measured.wrong.result, reference).equal
    assert measured.verified == 4  # the warm-up, samples 1-3: none after the first wrong one
    assert len(measured.kernel_s) == 6  # the samples are taken as without a verify


def test_a_wrong_warm_up_is_named():
    A, B = _operands(np.random.default_rng(SEED + 1))
    verify = Verifier(A, B)
    measured = _backend({2}).measure(A, B, "vendor", sampling=SIX_SAMPLES, verify=verify)
    assert measured.wrong is not None and measured.wrong.said == "its 1st warm-up run"


def test_without_a_verify_nothing_is_verified():
    A, B = _operands(np.random.default_rng(SEED + 2))
    measured = _backend({5}).measure(A, B, "vendor", sampling=SIX_SAMPLES)
    assert measured.wrong is None and measured.verified == 0


# -- the sampler's loop: a batch's two outputs, the bytes' shortcut, the timed windows --------


class _Batched:
    """An execution of a short kernel whose outputs are scripted: ``outputs`` by download,
    in order (each a 2×2 value); the batch is 5 launches a sample."""

    clock = "host"
    run_mark = ""

    def __init__(self, outputs: list[float]):
        self.outputs = list(outputs)

    def upload(self):
        pass

    def poison(self):
        pass

    def run(self):
        return 1e-6

    def run_batch(self, launches):
        return 1e-6 * launches

    def download(self):
        return np.full((2, 2), self.outputs.pop(0), np.float32)

    def flush_cache(self):
        pass


def _right_is_one(output: np.ndarray) -> bool:
    return bool((output == 1).all())


@pytest.mark.parametrize(
    ("outputs", "said"),
    [
        # first, warm-up, then (run, batch) per sample
        ([1, 1, 1, 1, 7, 1, 1, 1], "its 2nd timed run"),
        ([1, 1, 1, 1, 1, 7, 1, 1], "the last launch of its 2nd timed run's batch of 5"),
    ],
)
def test_a_batched_sample_s_run_and_batch_are_each_verified(outputs, said):
    sampling = Sampling(warmup=1, min_samples=3, max_samples=3, batch_target_s=5e-6)
    sampled = sample(_Batched(outputs), sampling, verify=_right_is_one)
    assert sampled.launches == 5
    assert sampled.wrong is not None and sampled.wrong.said == said
    assert sampled.wrong.result[0, 0] == 7


def test_outputs_bit_for_bit_the_first_s_are_not_checked_again():
    """A deterministic kernel costs a comparison of bytes a run: the first run's check
    (its caller's) holds for each."""
    calls: list[float] = []

    def verify(output):
        calls.append(float(output[0, 0]))
        return True

    sampling = Sampling(warmup=1, min_samples=3, max_samples=3, batch_target_s=5e-6)
    sampled = sample(_Batched([1, 1, 1, 1, 2, 1, 1, 1]), sampling, verify=verify)
    assert calls == [2.0]  # the one output unlike the first's
    assert sampled.verified == 7 and sampled.wrong is None


class _Clock:
    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now


def test_verifying_is_outside_every_timed_window_and_the_stopping_rule(monkeypatch):
    """A verify that takes 10 s of the loop's clock: the end-to-end times do not hold it,
    and the 1 s timeout does not stop the samples."""
    clock = _Clock()
    monkeypatch.setattr(sampler_module, "time", clock)

    def slow_verify(output):
        clock.now += 10.0
        return True

    outputs = [1.0, *range(2, 12)]  # every output unlike the first's: each verified
    sampling = Sampling(warmup=0, min_samples=5, max_samples=5, timeout_s=1.0, short_kernel_s=0)
    sampled = sample(_Batched(outputs), sampling, verify=slow_verify)
    assert sampled.stop == "max-samples" and len(sampled.kernel_s) == 5
    assert max(sampled.end_to_end_s) < 1.0
    assert sampled.verified == 5


# -- the verifier: plain data for a process of its own ------------------------------------------


def test_the_verifier_travels_without_its_reference_and_makes_it_where_it_is_asked():
    rng = np.random.default_rng(SEED + 3)
    A, B = _operands(rng, 33, 65, 7)
    reference = Reference.of(A, B)
    verifier = Verifier(A, B, reference=reference)
    sent = pickle.dumps(verifier)
    assert len(sent) < 2 * (A.nbytes + B.nbytes)  # the reference (two 33×7 float64) left out
    there = pickle.loads(sent)
    right = (A.astype(np.float64) @ B).astype(np.float32)
    assert there(right) and not there(right * 2)
    freivalds = Verifier(A, B, method="freivalds", seed=SEED)
    assert freivalds(right) and not freivalds(right + 1)


# -- compare: a point wrong at a timed run is a mismatch, named ---------------------------------


def test_compare_records_a_point_wrong_at_a_middle_run_as_a_mismatch(tmp_path):
    plan = Plan(shapes=[Shape(16, 14, 16)], variants=["vendor"], sampling=SIX_SAMPLES, seed=SEED)
    (record,) = run(plan, [("cpu", _backend({6}))], tmp_path, log=lambda line: None)
    assert record.status == "mismatch" and record.equal is False
    assert record.reason == "its 4th timed run differs from the reference beyond the tolerance"
    assert record.bound_ratio is not None and record.bound_ratio > 1


def test_compare_records_a_right_point_as_before(tmp_path):
    plan = Plan(shapes=[Shape(16, 14, 16)], variants=["vendor"], sampling=SIX_SAMPLES, seed=SEED)
    (record,) = run(plan, [("cpu", _backend(set()))], tmp_path, log=lambda line: None)
    assert record.status == "ok" and record.equal is True and record.reason == ""


def test_a_wrong_run_names_its_batch():
    assert WrongRun("timed", 7, np.zeros(1), 40).said == (
        "the last launch of its 7th timed run's batch of 40"
    )


def test_a_tune_candidate_wrong_between_its_first_and_last_run_is_never_chosen():
    """tune's trials verify every output too: a candidate whose 2nd timed run was wrong,
    its first and last right, is a "wrong" trial, not a rate (issue 54, left by check)."""
    from xbackend.launches.specs import Measurement
    from xbackend.tuning.objective import Objective
    from xbackend.tuning.trials import Product, time_trial

    rng = np.random.default_rng(5402)
    A = rng.standard_normal((24, 20), dtype=np.float32)
    B = rng.standard_normal((20, 28), dtype=np.float32)
    product = Product("mm", Shape(24, 20, 28), A, B, Reference.of(A, B, "mm"))
    right = (A.astype(np.float64) @ B).astype(np.float32)
    asked: dict[str, object] = {}

    class Midway:  # a tuning.trials.Measure: tiled's 2nd timed run was wrong
        def __call__(self, backend, A, B, variant, **options):
            asked.update(options)
            wrong_run = WrongRun("timed", 2, right * 2) if variant == "tiled" else None
            return Measurement(right, right, [1e-3] * 3, [1e-3] * 3, None, wrong=wrong_run)

        def isolates(self, backend, variant, op):
            return False

    measure = Midway()

    backend = CpuBackend()
    found = {
        variant: time_trial(
            backend, product, variant, None, 3, Objective(), Sampling(), measure=measure
        )
        for variant in ("naive", "tiled")  # tiled: wrong at its 2nd timed run
    }
    assert isinstance(asked["verify"], Verifier)  # each output after the first, verified
    assert found["naive"].status == "ok" and found["naive"].tflops is not None
    assert found["tiled"].status == "wrong" and found["tiled"].tflops is None

"""Test fixtures: the ``backend`` fixture and the ``--backend`` option come from the
plugin that ships with the package (``xbackend/pytest_plugin.py``), loaded here
by name so that a source checkout that is not installed runs the same way.

The command-line tests share their ``compare`` runs (``compare_run``, ``vendor_run``) and
the output of ``devices`` and ``compare --help`` (``SHARED_RUNS``): each is made once per
test run, by whichever xdist worker asks first, and the others read it (a lock beside the
workers' folders). A test only reads a shared run; one that would change it copies it
into its own ``tmp_path`` first (``shutil.copytree``).

* ``--backend cpu,opencl`` runs only those backends (``name:device`` picks a device);
* ``XBACKEND_REQUIRE=opencl,cpu,clblast`` turns "unavailable" into a failure for those
  backends and requirements, so CI cannot pass by skipping the OpenCL tests;
* ``XBACKEND_NO_CEILINGS`` is set unless given: runs skip measuring the devices' ceilings;
* ``XBACKEND_TUNING_DB=off`` unless given: the tuned variants run the device's derived
  default, not the shipped database's choice (its own tests turn it back on);
* ``XBACKEND_SANITIZER_VERDICTS`` names ``tests/data/sanitizer_verdicts.jsonl`` unless
  given: oclgrind's verdicts on kernels it simulated before, keyed by exactly what it
  simulates (``grading/sanitized.py``), are taken from there, new ones recorded (commit
  them); ``XBACKEND_SANITIZER_VERDICTS=none`` simulates everything. Two broken kernels
  of each path always run under oclgrind (tests/test_sanitizers.py, test_sanitized.py);
* Ctrl-C reaches the commands the tests start, however pytest was started.
"""

import contextlib
import dataclasses
import fcntl
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import xbackend
from xbackend import families
from xbackend.grading import sanitized
from xbackend.pytest_plugin import skip_or_fail

ROOT = Path(__file__).resolve().parent.parent

pytest_plugins = ["xbackend.pytest_plugin"]

# pytest keeps each test module's rewritten assertions beside it (__pycache__, ignored by
# git) unless bytecode is not to be written; where PYTHONDONTWRITEBYTECODE says so, every
# xdist worker rewrote every test module again on every run: 7.6 s of collection against
# 2.6 s on the 2-core machine. The suite writes them.
sys.dont_write_bytecode = False

# Every compare would measure each device's ceilings first (a second or so on this 2-core
# machine): the tests of the ceilings turn it back on where they test it.
os.environ.setdefault("XBACKEND_NO_CEILINGS", "1")
# The tests that expect a tuned variant's default configuration, on a CI machine whose
# CPU runtime the shipped database may hold: tests/test_tuning_db.py tests the database.
os.environ.setdefault("XBACKEND_TUNING_DB", "off")
# oclgrind's verdicts on what it simulated before, committed beside the tests: a clean
# checkout (CI) simulates only what changed since they were recorded.
VERDICTS = ROOT / "tests" / "data" / "sanitizer_verdicts.jsonl"
os.environ.setdefault(sanitized.ENV, str(VERDICTS))
# A shell without job control starts a background command (`pytest ... &`, nohup) with
# SIGINT ignored, and the commands the tests start inherit that: Python then installs no
# KeyboardInterrupt, and every Ctrl-C test failed with exit 0 in a loop of 20 runs started
# so. A handler here is reset to the default in each child, as an ignored signal is not.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (pyproject's addopts): one worker per core, at most 4, since the tests
    of a GPU machine share its one device."""
    return max(1, min(len(os.sched_getaffinity(0)), 4))


# The fixtures below that start a command (a compare, devices' tiny products).
SHARED_RUNS = ("compare_run", "vendor_run", "devices_run", "compare_help")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # A test of a shared run may be the one that starts it: slow, whatever its marks say.
    for item in items:
        if set(SHARED_RUNS) & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
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


@pytest.fixture
def own_families() -> Iterator[None]:
    """A test's own kernel-family folders: none at its start (``families.add_folders``
    adds to them), and this process's folders of before back after it (they are the
    process's, not the test's: a test's would stay for the next test otherwise)."""
    before = families.added_folders()
    families.use_folders(())
    yield
    families.use_folders(before)


# -- compare runs shared by the command-line tests ---------------------------------------------


@dataclasses.dataclass(frozen=True)
class SharedRun:
    """A ``python -m xbackend compare`` run the tests read: its folder and what it said."""

    out: Path
    returncode: int
    stdout: str
    stderr: str
    backends: tuple[str, ...]


def run_xbackend(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command line as a user runs it, from this checkout."""
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join(path)}
    return subprocess.run([sys.executable, "-m", "xbackend", *args],
                          capture_output=True, text=True, env=env, timeout=600)  # fmt: skip


def xbackend_here(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The command line run in this process (``xbackend.cli.main``), as ``run_xbackend``
    runs it in a process of its own: what it printed on stdout and stderr (a child's it
    starts too, and its warnings, as Python prints them) and its exit status; ``env`` added
    to the environment for the call. A second a call less (the interpreter, NumPy and the
    backends' imports): for tests of what a command says, writes or refuses, not of its
    process (signals, deadlines, a process tree, a crash, a broken pipe stay with
    ``run_xbackend``). The kernel families are read afresh, as a new process reads them
    (a test may have edited a manifest since); what a command changes in this process is
    put back after it: the environment, the working folder, ``sys.argv``, the user's
    kernel folders (``--kernels``: ``families.add_folders``), the signal handlers, the
    warning filters."""
    from xbackend.cli import main

    saved = (dict(os.environ), os.getcwd(), list(sys.argv), families.added_folders())
    handlers = {number: signal.getsignal(number) for number in _HANDLED}
    families.read_again()  # the manifests as they are now, as a process of its own reads them
    os.environ.update(env or {})
    sys.argv = [str(ROOT / "xbackend" / "__main__.py"), *args]  # the run header's command
    try:
        with _outputs() as said, _python_warnings():
            try:
                code = main(list(args))
            except SystemExit as exit:  # argparse: a usage error, --help, --version
                code = exit.code if isinstance(exit.code, int) else 1
    finally:
        os.environ.clear()
        os.environ.update(saved[0])
        os.chdir(saved[1])
        sys.argv = saved[2]
        families.use_folders(saved[3])
        for number, handler in handlers.items():
            signal.signal(number, handler)
    return subprocess.CompletedProcess(list(args), code, *said)


_HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _outputs() -> Iterator[list[str]]:
    """stdout and stderr caught where a process's are, its file descriptors 1 and 2 (a
    child the command starts writes there too, in order with it), the text read into the
    list given once it ends; Python's streams on them, line by line, as a process's are."""
    said: list[str] = []
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        kept = os.dup(1), os.dup(2)
        streams = sys.stdout, sys.stderr
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), "utf-8",
                                      line_buffering=True)  # fmt: skip
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), "utf-8",
                                      "backslashreplace", line_buffering=True)  # fmt: skip
        try:
            yield said
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            sys.stdout, sys.stderr = streams
            for number, fd in zip((1, 2), kept, strict=True):
                os.dup2(fd, number)
                os.close(fd)
            for file in (out, err):
                file.seek(0)
                said.append(file.read().decode("utf-8", "replace"))


@contextlib.contextmanager
def _python_warnings() -> Iterator[None]:
    """Warnings as a fresh ``python -m xbackend`` shows them, not as pytest collects them:
    Python's default filters (each warning once a place; deprecations and resource warnings
    not shown), written on stderr as Python's own ``showwarning`` writes them."""
    with warnings.catch_warnings():
        warnings.resetwarnings()
        warnings.simplefilter("default")
        for quiet in (DeprecationWarning, PendingDeprecationWarning, ImportWarning,
                      ResourceWarning):  # fmt: skip
            warnings.simplefilter("ignore", quiet)
        warnings.showwarning = _shown
        yield


def _shown(message, category, filename, lineno, file=None, line=None) -> None:
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def kernel_line(stdout: str, variant: str) -> str:
    """The line ``check`` printed for a kernel of a class (``    NAME: backend: ...``), or
    "" where it printed none: every backend's words on it."""
    return next((line for line in stdout.splitlines() if line.startswith(f"    {variant}: ")), "")


def _command(out: Path, *args: str) -> SharedRun:
    """A command that writes no folder: what it said (``out`` is left empty)."""
    out.mkdir(parents=True, exist_ok=True)
    done = run_xbackend(*args)
    return SharedRun(out, done.returncode, done.stdout, done.stderr, ())


def _compare(out: Path, backends: tuple[str, ...], *options: str, **env: str) -> SharedRun:
    done = run_xbackend("compare", "--backends", ",".join(backends), *options,
                        "--out", str(out), env=env)  # fmt: skip
    return SharedRun(out, done.returncode, done.stdout, done.stderr, backends)


def _shared(
    factory: pytest.TempPathFactory, name: str, make: Callable[[Path], SharedRun]
) -> SharedRun:
    """The run ``make`` writes into a folder, made once per test run: under xdist the
    first worker to ask makes it while the others wait on a lock, then read its record."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return make(factory.mktemp(name) / "run")
    root = factory.getbasetemp().parent / "shared-runs"  # the workers' common folder
    root.mkdir(exist_ok=True)
    record = root / f"{name}.json"
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not record.exists():
            made = make(root / name)
            fields = {**dataclasses.asdict(made), "out": str(made.out)}
            record.write_text(json.dumps(fields))
        fields = json.loads(record.read_text())
    return SharedRun(
        **{**fields, "out": Path(fields["out"]), "backends": tuple(fields["backends"])}
    )


def _available(name: str) -> bool:
    return {info.name: info.available for info in xbackend.backends()}[name]


@pytest.fixture(scope="session")
def compare_run(tmp_path_factory: pytest.TempPathFactory) -> SharedRun:
    """``compare`` as the assignment asks it, figures, report and ``--table`` included: the
    default variants (naive, tiled, vendor), tiles 8 and 16, three sizes, on the CPU and
    on OpenCL where it is available."""
    backends = ("cpu", "opencl") if _available("opencl") else ("cpu",)
    options = ("--steps", "3", "--samples", "2", "--tile", "8,16", "--table")
    return _shared(tmp_path_factory, "compare", lambda out: _compare(out, backends, *options))


@pytest.fixture(scope="session")
def vendor_run(tmp_path_factory: pytest.TempPathFactory) -> SharedRun:
    """A quiet ``compare`` of the CPU's vendor line at two sizes, no figures, with an
    ``XBACKEND_`` setting in its environment (the run header keeps it)."""
    options = ("--variants", "vendor", "--steps", "2", "--no-plots", "-q")
    setting = {"XBACKEND_EXAMPLE_SETTING": "on"}
    return _shared(
        tmp_path_factory, "vendor", lambda out: _compare(out, ("cpu",), *options, **setting)
    )


@pytest.fixture(scope="session")
def devices_run(tmp_path_factory: pytest.TempPathFactory) -> SharedRun:
    """``xbackend devices``: every backend listed, a tiny product run on each."""
    return _shared(tmp_path_factory, "devices", lambda out: _command(out, "devices"))


@pytest.fixture(scope="session")
def compare_help(tmp_path_factory: pytest.TempPathFactory) -> SharedRun:
    """``xbackend compare --help``."""
    return _shared(tmp_path_factory, "help", lambda out: _command(out, "compare", "--help"))


# -- kernel_probe.py under oclgrind -----------------------------------------------------------

PROBE = ROOT / "scripts" / "kernel_probe.py"
# Races, accesses out of bounds and reads of memory never written.
OCLGRIND_OPTIONS = ("--data-races", "--uninitialized")


@dataclasses.dataclass(frozen=True)
class Probed:
    """What a probe under oclgrind said, and whether it came from the file of verdicts
    (``recorded``) rather than from a simulation."""

    returncode: int
    stdout: str
    stderr: str
    recorded: bool = False


def probe_under_oclgrind(
    oclgrind: str, *args: str, env: dict[str, str] | None = None, recorded: bool = True
) -> Probed:
    """``scripts/kernel_probe.py ARGS`` on OpenCL under oclgrind, unoptimized builds
    (oclgrind 21.10 cannot interpret LLVM's ``freeze``, which optimized builds of mm_reg
    hold; unoptimized ones keep every access), the vendor line left out (CLBlast's kernels
    are not ours: oclgrind reports an uninitialized write inside its GEMM). ``recorded``:
    its cases are planned first, under oclgrind and running nothing (``--plans``), and a
    run keyed by those plans (each launch, its code and operands: ``grading/sanitized``)
    is taken from the file of verdicts; a new one simulates, and is recorded."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT),
                   "XBACKEND_OPENCL_OPTIONS": "-cl-opt-disable", **(env or {})}  # fmt: skip
    command = [oclgrind, *OCLGRIND_OPTIONS, sys.executable, str(PROBE), "--backend", "opencl",
               "--skip", "vendor", *args]  # fmt: skip
    key = _probe_key(oclgrind, command, environment) if recorded else ""
    kept = sanitized.recorded(key) if key else None
    if kept is not None:
        return Probed(kept["returncode"], kept["stdout"], kept["stderr"], recorded=True)
    done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=900)
    if key and done.returncode == 0:  # finished: a killed or failed run is simulated again
        said = {"returncode": 0, "stdout": done.stdout, "stderr": done.stderr[-20_000:]}
        sanitized.record(key, "kernel_probe.py " + " ".join(args), said)
    return Probed(done.returncode, done.stdout, done.stderr)


def _probe_key(oclgrind: str, command: list[str], environment: dict[str, str]) -> str:
    """The key of a probe's run under oclgrind: the simulator, the build options, and
    every case's product as the probe plans it on oclgrind's device; "" where there is
    no file of verdicts, or the plans cannot be had."""
    if sanitized.verdicts_path() is None:
        return ""
    settings = {name: environment.get(name, "") for name in ("XBACKEND_OPENCL_OPTIONS",
                                                             "XBACKEND_INDEX")}  # fmt: skip
    simulator = sanitized.simulator_parts(oclgrind, OCLGRIND_OPTIONS, settings)
    if not simulator:
        return ""
    plans = subprocess.run([*command, "--plans"], capture_output=True, text=True,
                           env=environment, timeout=300)  # fmt: skip
    if plans.returncode != 0:
        return ""
    return sanitized.key({**simulator, "plans": plans.stdout})

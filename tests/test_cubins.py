"""The CUDA backend's cache of cubins (xbackend/backends/cubins.py), with a stand-in
compiler: no GPU or PyCUDA needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from xbackend.backends import cubins


class Compiler:
    """Counts its builds; the 'cubin' names what it was given."""

    def __init__(self) -> None:
        self.builds = 0

    def __call__(self, source: str, **how: object) -> bytes:
        self.builds += 1
        return f"{source}|{how['options']}|{how['arch']}|{self.builds}".encode()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(cubins, "nvcc_version", lambda: "nvcc 13.0")
    return tmp_path


def _headers(folder: Path) -> Path:
    folder.mkdir()
    (folder / "tile.h").write_text("#define TILE 16\n")
    return folder


def test_a_cubin_is_built_once_then_read_from_the_cache(cache: Path) -> None:
    compiler, folder = Compiler(), _headers(cache / "kernels")
    args = ("__global__ void k() {}", ("-DTM=8",), "sm_90", [str(folder)], False)
    first = cubins.cubin(*args, compiler=compiler)
    again = cubins.cubin(*args, compiler=compiler)
    assert compiler.builds == 1
    assert again == first
    assert list((cache / "cache" / "xbackend" / "cuda").glob("*.cubin"))


@pytest.mark.parametrize("changed", ["source", "options", "arch", "header", "new header", "nvcc"])
def test_whatever_goes_into_a_cubin_builds_it_again(
    cache: Path, changed: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiler, folder = Compiler(), _headers(cache / "kernels")
    source, options, arch = "__global__ void k() {}", ("-DTM=8",), "sm_90"
    cubins.cubin(source, options, arch, [str(folder)], False, compiler=compiler)
    if changed == "source":
        source += "\n"
    elif changed == "options":
        options = ("-DTM=4",)
    elif changed == "arch":
        arch = "sm_100"
    elif changed == "header":
        (folder / "tile.h").write_text("#define TILE 32\n")
    elif changed == "new header":
        (folder / "more.cuh").write_text("#define MORE 1\n")
    else:
        monkeypatch.setattr(cubins, "nvcc_version", lambda: "nvcc 13.1")
    cubins.cubin(source, options, arch, [str(folder)], False, compiler=compiler)
    assert compiler.builds == 2


def test_a_cache_that_cannot_be_written_still_builds(cache: Path) -> None:
    (cache / "cache").write_text("a file where the cache folder would be")
    compiler = Compiler()
    args: tuple[str, tuple[str, ...], str, list[str], bool] = (
        "__global__ void k() {}",
        (),
        "sm_90",
        [],
        True,
    )
    assert cubins.cubin(*args, compiler=compiler).endswith(b"|1")
    assert cubins.cubin(*args, compiler=compiler).endswith(b"|2")  # nothing kept


def test_a_fresh_build_replaces_what_the_cache_holds(cache: Path) -> None:
    compiler = Compiler()
    args: tuple[str, tuple[str, ...], str, list[str], bool] = ("k", (), "sm_90", [], True)
    cubins.cubin(*args, compiler=compiler)
    (cached,) = (cache / "cache" / "xbackend" / "cuda").glob("*.cubin")
    cached.write_bytes(b"what the driver refused")
    assert cubins.cubin(*args, compiler=compiler, fresh=True).endswith(b"|2")
    assert cubins.cubin(*args, compiler=compiler).endswith(b"|2")  # kept in its place
    assert compiler.builds == 2

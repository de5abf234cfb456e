"""Kernel families as data: the shipped ones in ``kernels/``, and the user's.

A family is a folder holding a manifest (``family.toml``, see ``manifest.py``) beside its
kernel files. xbackend ships four (kernels/mm, mm_reg, mm_warp, rmm); a user adds their
own with ``--kernels DIR`` (a family's folder, or a folder of them: ``add_folders``,
kept in this module for this process); installed packages add theirs through the
entry-point group ``xbackend.kernels`` (an entry names a folder, or a module whose folder
holds them). A process that starts another hands it ``added_folders()`` as data (the
isolated kernel's request, the Dask workers' plugin, the profiling child's spec, the
arguments of ``check --one``), which adds them there (``use_folders``): nothing travels
in the environment, so a remote worker gets them as a local one does.

The compiled backends build their variants from this catalogue (``variant_table``);
nothing in them knows a family by name.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Callable, Iterable, Iterator
from importlib.metadata import entry_points
from pathlib import Path

from xbackend.families import sources
from xbackend.families.manifest import MANIFEST, Family, ManifestError, load
from xbackend.families.variant import LIBRARY_LINES, VariantSpec, VariantTable
from xbackend.resources import shipped_kernels_path

__all__ = [
    "Family",
    "ManifestError",
    "VariantSpec",
    "VariantTable",
    "add_folders",
    "added_folders",
    "catalogue",
    "family",
    "find",
    "find_variant",
    "forget_on_read_again",
    "provenance",
    "read_again",
    "shipped_variants",
    "use_folders",
    "user_folders",
    "user_variants",
    "variant_table",
]

ENTRY_POINTS = "xbackend.kernels"

# The folders this process added (``add_folders``, ``use_folders``), each resolved, in the
# order they came: this process's alone (a child is handed them, ``added_folders``).
_added: tuple[Path, ...] = ()
# What the layers above keep of the families' files (the backends' parsed declarations):
# each forgotten with the catalogue, so that nothing read before ``read_again`` outlives it.
_forgetting: list[Callable[[], None]] = []


def user_folders() -> tuple[Path, ...]:
    """The user's folders: those this process added, then the installed entry points'."""
    return (*_added, *_installed_folders())


def added_folders() -> tuple[Path, ...]:
    """The folders this process added, for a process it starts to add too."""
    return _added


@functools.cache
def _installed_folders() -> tuple[Path, ...]:
    """The folders of the installed packages' entry points, looked up once a process."""
    folders = []
    for entry in entry_points(group=ENTRY_POINTS):
        try:
            found = entry.load()
        except Exception as error:  # a broken plugin is named, never fatal
            raise ManifestError(f"entry point {entry.name} ({entry.value}): {error}") from None
        path = getattr(found, "__file__", None) or found
        folders.append(Path(path).parent if str(path).endswith(".py") else Path(path))
    return tuple(folders)


def add_folders(folders: Iterable[str | Path]) -> None:
    """Add family folders to this process's catalogue, after those added before, each
    checked now: a folder that holds no family, or a manifest that is wrong, is an error
    here (and nothing is added)."""
    use_folders([*_added, *folders])


def use_folders(folders: Iterable[str | Path]) -> None:
    """Make ``folders`` this process's added folders, in place of those added before
    (none: the shipped families and the installed ones alone), checked as ``add_folders``
    checks them."""
    global _added
    wanted = tuple(dict.fromkeys(Path(folder).resolve() for folder in folders))
    _catalogue(wanted)  # checks them all, before any is used
    _added = wanted


def read_again() -> None:
    """Forget the families read so far: the next use reads their folders again. For a
    process that outlives a run (a ``--scheduler`` cluster's worker), so that the next run
    gets the families as they are then, not as the last run read them."""
    _catalogue.cache_clear()
    _variant_table.cache_clear()
    for forget in _forgetting:
        forget()


def forget_on_read_again(forget: Callable[[], None]) -> None:
    """Have ``read_again`` call ``forget`` too: for a cache kept of the families' files
    outside this package (``launches/kernels.py``'s parsed declarations)."""
    _forgetting.append(forget)


def catalogue() -> tuple[Family, ...]:
    """Every family: the shipped ones, then the user's, in their declared order."""
    return _catalogue(user_folders())


@functools.cache
def _catalogue(folders: tuple[Path, ...]) -> tuple[Family, ...]:
    found = list(_families_in(shipped_kernels_path(), shipped=True))
    for folder in folders:
        found += _families_in(folder, shipped=False)
    names: dict[str, Family] = {}
    for each in found:
        if each.name in names:
            other = names[each.name].manifest
            raise ManifestError(
                f"{each.manifest}: a family named '{each.name}' is already "
                f"in {other}: give it another name ([family] name)"
            )
        names[each.name] = each
    _check_variants(found)
    return tuple(sorted(found, key=lambda each: (not each.shipped, each.order)))


def _families_in(folder: Path, shipped: bool) -> Iterator[Family]:
    """The family in ``folder``, or those of its sub-folders."""
    if not folder.is_dir():
        raise ManifestError(f"{folder}: no such folder of kernel families")
    if (folder / MANIFEST).exists():
        yield load(folder, shipped)
        return
    inner = sorted(sub for sub in folder.iterdir() if (sub / MANIFEST).exists())
    if not inner and not shipped:
        raise ManifestError(f"{folder}: holds no {MANIFEST}, nor do its sub-folders")
    for sub in inner:
        yield load(sub, shipped)


def _check_variants(families: list[Family]) -> None:
    """A variant's name is one line of the comparison: the same name for the same
    operation in two families is refused, naming the second; a user's variant named as
    one of xbackend's lines (a shipped kernel's, for any operation, or the vendor
    library's) is refused too, so that a user's line never hides one of xbackend's nor
    is hidden by it."""
    seen: dict[tuple[str, str], Family] = {}
    shipped = {spec.name for each in families if each.shipped for _, spec in each.variants}
    for each in families:
        for op, spec in each.variants:
            if not each.shipped and (spec.name in LIBRARY_LINES or spec.name in shipped):
                whose = "the vendor library's" if spec.name in LIBRARY_LINES else "a shipped"
                raise ManifestError(
                    f"{each.manifest}: variant '{spec.name}' is already declared as {whose} "
                    f"line of xbackend: give it another name"
                )
            if (op, spec.name) in seen:
                first = seen[op, spec.name].manifest
                raise ManifestError(
                    f"{each.manifest}: variant '{spec.name}' of {op} is "
                    f"already declared in {first}: give it another name"
                )
            seen[op, spec.name] = each


def find(name: str) -> Family | None:
    """The family named ``name``, or None."""
    return next((each for each in catalogue() if each.name == name), None)


def find_variant(name: str) -> VariantSpec:
    """The variant named ``name``, of any family and operation (the first declared)."""
    found = next((s for each in catalogue() for _, s in each.variants if s.name == name), None)
    if found is None:
        raise ManifestError(f"no variant named '{name}' in any kernel family")
    return found


def family(name: str) -> Family:
    """The family named ``name``."""
    found = find(name)
    if found is not None:
        return found
    known = ", ".join(each.name for each in catalogue())
    raise ManifestError(f"no kernel family named '{name}' (known: {known})")


def provenance() -> dict[str, dict[str, str]]:
    """Each family a run could use: where it is and a digest of its manifest and sources,
    for the run's header (a user's kernel edited between two runs is seen)."""
    found = {}
    for each in catalogue():
        digest = hashlib.sha256()
        for path in (each.manifest, *each.sources.values()):
            text = sources.read_source(path)  # bounded: a file grown since is refused
            digest.update(path.name.encode() + b"\x00" + text.encode())
        where = "shipped" if each.shipped else str(each.folder)
        found[each.name] = {"folder": where, "digest": digest.hexdigest()[:16]}
    return found


@functools.cache
def shipped_variants() -> frozenset[str]:
    """The names of the variants xbackend ships (a figure tells a user's lines by them)."""
    return frozenset(
        spec.name
        for each in _catalogue(())  # the shipped families alone
        for _, spec in each.variants
    )


def user_variants(ops: Iterable[str]) -> list[str]:
    """The names of the user's variants of ``ops``, in their families' order."""
    wanted = set(ops)
    names = [
        spec.name
        for each in catalogue()
        if not each.shipped
        for op, spec in each.variants
        if op in wanted
    ]
    return list(dict.fromkeys(names))


def variant_table(language: str, worker: str, memory: str) -> VariantTable:
    """The variants whose family has a ``language`` source, per operation, described in
    one backend's words for a group's workers and the memory they share (a new table:
    the caller may add to it)."""
    made = _variant_table(language, worker, memory, user_folders())
    return {op: dict(variants) for op, variants in made.items()}


@functools.cache
def _variant_table(
    language: str, worker: str, memory: str, folders: tuple[Path, ...]
) -> VariantTable:
    table: VariantTable = {}
    for each in _catalogue(folders):
        if language not in each.sources:
            continue
        for op, spec in each.variants:
            words = spec.description.replace("{worker}", worker).replace("{memory}", memory)
            table.setdefault(op, {})[spec.name] = _described(spec, words)
    return table


def _described(spec: VariantSpec, description: str) -> VariantSpec:
    return dataclasses.replace(spec, description=description)

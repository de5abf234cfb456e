"""A class: which folders are submissions, and the names they share.

``xbackend check`` takes folders. A folder holding a ``family.toml`` is one submission (a
student's family). A folder without one is a class: each of its sub-folders is a
submission, whether it holds a ``family.toml`` itself or families in its own sub-folders
(a student who wrote two). A sub-folder with kernel files and no manifest is a
submission too, which gets that as its verdict rather than being left out unseen.

Each submission is checked in a process of its own, where its families are the only
user families: students who copied the example's manifest (family ``student``, variants
``student_naive`` and ``student_tiled``) do not clash. What they share is said once,
for all of them (``shared_names``), and every line of the gradebook names its
submission by its folder.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

from xbackend.errors import XBackendError
from xbackend.families.manifest import MANIFEST
from xbackend.families.sources import read_source
from xbackend.safeio import printable

KERNEL_SUFFIXES = (".cu", ".cl")


@dataclasses.dataclass(frozen=True)
class Submission:
    """One student's folder: its name in the class and where it is."""

    name: str  # the folder's name; its parent's too where two submissions share one
    folder: Path
    problem: str = ""  # why it cannot be checked at all ("" where it can)

    @property
    def manifests(self) -> list[Path]:
        """Its family manifests: the folder's own, else its sub-folders'."""
        if (self.folder / MANIFEST).is_file():
            return [self.folder / MANIFEST]
        return sorted(self.folder.glob(f"*/{MANIFEST}"))


def find(folders: Sequence[str | Path]) -> list[Submission]:
    """The submissions of ``folders`` (``gather``, less what it says)."""
    return gather(folders)[0]


def gather(folders: Sequence[str | Path]) -> tuple[list[Submission], list[str]]:
    """The submissions of ``folders``, in the order given, each class's sorted by name,
    and what a teacher is told of a class's folders that are not checked as they stand
    (hidden ones, a link to another submission's folder, a link out of the class); an
    error naming the folder where one is not a folder or holds nothing to check."""
    found: list[tuple[Submission, bool]] = []  # each, and whether a link led to it
    said: list[str] = []
    for given in folders:
        folder = Path(given)
        if not folder.is_dir():
            raise XBackendError(f"{folder}: no such folder of kernels")
        if (folder / MANIFEST).is_file():
            found.append((Submission(shown(folder.resolve().name), folder.resolve()), False))
            continue
        inside, hidden, broken = [], [], []
        for sub in sorted(folder.iterdir()):
            if sub.is_symlink() and not sub.exists():  # dangling, or a loop: said, not lost
                broken.append(shown(sub.name))
            elif sub.name.startswith((".", "_")) and sub.is_dir():
                hidden.append(shown(sub.name))
            elif sub.is_dir() and (made := _submission(sub)) is not None:
                inside.append((made, sub.is_symlink()))
        if hidden:
            said.append(f"skipped {_listed(hidden)}: folders whose names start with '.' or "
                        "'_' are not submissions")  # fmt: skip
        if broken:
            said.append(f"skipped {_listed(broken)}: links to nothing (their target is gone, "
                        "or they lead to themselves)")  # fmt: skip
        if not inside:
            raise XBackendError(
                f"{folder}: holds no {MANIFEST}, nor do its sub-folders (a submission is a "
                f"folder with a {MANIFEST} beside its .cu/.cl files: docs/kernels.md)"
            )
        found += inside
    return _named_apart(_once(found, said)), said


def _once(found: list[tuple[Submission, bool]], said: list[str]) -> list[Submission]:
    """Each folder checked once: a link to a folder the class holds as itself, or that
    another link led to first, is said and skipped; a link out of the class is said."""
    real = {each.folder: each.name for each, link in found if not link}
    kept: list[Submission] = []
    for each, link in found:
        first = real.setdefault(each.folder, each.name)
        if link and first != each.name:
            said.append(f"skipped {each.name}: a link to {first}'s folder, checked once as {first}")
            continue
        if link:
            said.append(f"{each.name} is a link to {shown(str(each.folder))}: checked there")
        kept.append(each)
    return kept


def _listed(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def shown(name: str) -> str:
    """A folder's name as the gradebook and the terminal show it: bytes that are not UTF-8
    (a zip made on Windows) as ``\\xe9``, control characters as their escapes, never
    obeyed by a terminal nor refused by a file written in UTF-8."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return printable(text)


def _submission(folder: Path) -> Submission | None:
    """The submission in a class's sub-folder; None for a folder with nothing to check
    (no manifest and no kernel file at any depth of two)."""
    name, folder = shown(folder.name), folder.resolve()  # a link's own name, its target
    if (folder / MANIFEST).is_file() or any(folder.glob(f"*/{MANIFEST}")):
        return Submission(name, folder)
    kernels = [p for p in folder.rglob("*") if p.suffix in KERNEL_SUFFIXES]
    if not kernels:
        return None
    files = ", ".join(sorted(shown(p.name) for p in kernels)[:3])
    return Submission(name, folder, f"no {MANIFEST} beside its kernels ({files}): docs/kernels.md")


def _named_apart(found: list[Submission]) -> list[Submission]:
    """The same folder given twice is checked once; folders of one name (two classes'
    ``alice``) are named by as many of their parent folders as tell them apart
    (``2024/cls/alice``, ``2025/cls/alice``), and a name still shared is numbered."""
    unique = list({each.folder: each for each in found}.values())
    names = [each.name for each in unique]
    for depth in range(2, max((len(each.folder.parts) for each in unique), default=0) + 1):
        counts = Counter(names)
        if all(counts[name] == 1 for name in names):
            break
        names = [_with_parents(each, depth) if counts[name] > 1 else name
                 for each, name in zip(unique, names, strict=True)]  # fmt: skip
    seen: Counter[str] = Counter()
    for index, name in enumerate(names):
        seen[name] += 1
        if seen[name] > 1:  # two folders whose paths read alike (a name not UTF-8)
            names[index] = f"{name} ({seen[name]})"
    return [dataclasses.replace(each, name=name) for each, name in zip(unique, names, strict=True)]


def _with_parents(each: Submission, depth: int) -> str:
    """The submission's name under the last ``depth - 1`` of its folder's parents."""
    parents = [shown(part) for part in each.folder.parent.parts[-(depth - 1) :] if part != "/"]
    return "/".join([*parents, each.name])


def shared_names(submissions: Sequence[Submission]) -> list[str]:
    """Each family or variant name declared by more than one submission, with theirs:
    ``family 'student' (alice, bob, carol)``. A manifest that cannot be read is left to
    its own submission's verdict."""
    owners: dict[str, list[str]] = defaultdict(list)
    for each in submissions:
        names: set[str] = set()
        for manifest in each.manifests:
            names |= _declared_names(manifest)
        for name in sorted(names):
            owners[name].append(each.name)
    return [
        f"{name} ({', '.join(who[:8])}{' ...' if len(who) > 8 else ''})"
        for name, who in owners.items()
        if len(who) > 1
    ]


def _declared_names(manifest: Path) -> set[str]:
    """The family and variant names a manifest declares, as the manifest reader reads
    them (the family's defaults to its folder's name); none where it does not parse."""
    try:  # read as the manifest reader reads it: bounded, text only
        data = tomllib.loads(read_source(manifest, "manifest"))
    except (XBackendError, tomllib.TOMLDecodeError, RecursionError):  # its verdict says
        return set()
    head = data.get("family")
    family = head.get("name") if isinstance(head, dict) else None
    names = {f"family '{family if isinstance(family, str) else manifest.parent.name}'"}
    entries = data.get("variant")
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            names.add(f"variant '{entry['name']}'")
    return names

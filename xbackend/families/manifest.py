"""A family's manifest (``family.toml``), read and checked against its sources.

A family is a folder: a kernel file per language (CUDA ``.cu``, OpenCL ``.cl``, or one of
them) and ``family.toml``, which names its variants: the kernel each runs, the operations
it computes, how its arguments bind, how it is launched and what its builds take. Keys
of ``[family]`` other than its own (``name``, ``description``, ``order``, ``sources``) are
defaults for every ``[[variant]]``. docs/kernels.md describes each key.

Everything is checked as it is read: a manifest that does not parse, a key that is not
known, a kernel a source does not declare, a parameter bound to nothing. Each is one
``ManifestError`` naming the file, never a traceback at the first launch.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from xbackend.errors import XBackendError
from xbackend.families.sources import (
    ATTRIBUTED,
    LANGUAGES,
    STAMP_PARAMETERS,
    SUFFIXES,
    Declarations,
    check_includes,
    declarations_of,
    passing,
    read_source,
)
from xbackend.families.values import CONFIGURATION, ManifestError, Values, kernel_name_problem
from xbackend.families.variant import ARGUMENTS, BUFFERS, ELEMENT, SIZES, Launch, VariantSpec
from xbackend.operations import OPS, operation
from xbackend.resources import kernel_file

MANIFEST = "family.toml"
DTYPES = ("float32", "float64", "int32")
_FAMILY_KEYS = ("name", "order", "sources")  # and "description", of _SHARED_KEYS
_SHARED_KEYS = (
    "ops", "tiles", "default_tile", "geometry", "patch", "switches", "build", "constants",
    "requires", "staged", "arguments", "dtypes", "x", "layout", "description", "parameters",
    "defaults", "group", "grid", "storage", "workspaces",
)  # fmt: skip
_VARIANT_KEYS = ("name", "kernel", "before", *_SHARED_KEYS)
__all__ = ["MANIFEST", "Family", "ManifestError", "load"]
# A scalar parameter's kinds (``Declarations.kind``) as a refusal of twins that disagree
# says them: one launch packs a value once, so both files must take it alike.
_WIDTHS = {
    "int32": "a 32-bit integer", "int64": "a 64-bit integer", "float32": "a float (32-bit)",
    "float64": "a double (64-bit)", "real": "the element type (REAL)",
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Family:
    """A folder of kernels: its sources per language and its variants per operation."""

    name: str
    folder: Path
    description: str
    sources: dict[str, Path]  # language -> kernel file
    variants: tuple[tuple[str, VariantSpec], ...]  # (operation, variant), in order
    order: int = 100  # where its variants come among the families'
    shipped: bool = False

    @property
    def manifest(self) -> Path:
        return self.folder / MANIFEST

    @property
    def defined(self) -> frozenset[str]:
        """The macros every build of its variants defines (``always_defined``)."""
        return always_defined(self.variants)


def always_defined(variants: Iterable[tuple[str, VariantSpec]]) -> frozenset[str]:
    """The macros every variant's build defines (its ``build`` keys and ``switches``): an
    ``#ifdef`` of one is decided before the build, as the declarations are read."""
    each = [frozenset(name for name, _ in spec.build) | set(spec.defines) for _, spec in variants]
    return frozenset.intersection(*each) if each else frozenset()


def load(folder: Path, shipped: bool = False) -> Family:
    """The family in ``folder``, checked; a ``ManifestError`` naming the file otherwise."""
    path = folder / MANIFEST
    try:
        data = tomllib.loads(read_source(path, "manifest"))
    except tomllib.TOMLDecodeError as error:
        raise ManifestError(f"{path}: {error}") from None
    except RecursionError:  # arrays or tables nested thousands deep
        raise ManifestError(f"{path}: nested too deeply to be a manifest") from None
    except XBackendError as error:
        raise ManifestError(f"{folder}: not a kernel family ({error})") from None
    return _Reader(path, shipped).family(data)


class _Reader(Values):
    """Reads one manifest, naming it in every complaint."""

    def __init__(self, path: Path, shipped: bool):
        self.path, self.shipped = path, shipped

    def family(self, data: dict[str, Any]) -> Family:
        self.known(data, ("family", "variant"), "the top level")
        head = self.table(data.get("family", {}), "[family]")
        self.known(head, (*_FAMILY_KEYS, *_SHARED_KEYS), "[family]")
        name = head.get("name", self.path.parent.name)
        if not isinstance(name, str) or not name.isidentifier():
            raise self.fail(f"the family's name must be an identifier, not {name!r}")
        order = head.get("order", 100)
        if type(order) is not int:
            raise self.fail(f"order must be an integer, not {order!r}")
        sources = self._sources(head.get("sources"))
        entries = data.get("variant")
        if not isinstance(entries, list) or not entries:
            raise self.fail("no [[variant]]: a family declares at least one")
        # The family's description is its own, not its variants' (each says what it is).
        defaults = {key: head[key] for key in _SHARED_KEYS if key in head and key != "description"}
        variants: list[tuple[str, VariantSpec]] = []
        for entry in entries:
            variants += self._variant(name, {**defaults, **self.table(entry, "[[variant]]")})
        defined = always_defined(variants)
        declared = {lang: self._declared(lang, path, defined) for lang, path in sources.items()}
        for language, found in declared.items():
            for op, spec in variants:
                self._bound(op, spec, sources[language], found)
        self._twins(declared, sources)
        seen = [(op, spec.name) for op, spec in variants]
        twice = {pair for pair in seen if seen.count(pair) > 1}
        if twice:
            op, variant = sorted(twice)[0]
            raise self.fail(f"variant '{variant}' of {op} is declared twice")
        description = self.text(head.get("description", ""), "[family]")
        folder = self.path.parent
        return Family(name, folder, description, sources, tuple(variants), order, self.shipped)

    def _declared(self, language: str, path: Path, defined: frozenset[str]) -> Declarations:
        """The kernels ``path`` declares, its includes checked (a device or a FIFO named
        by an ``#include`` is refused here, before a compiler opens it)."""
        stamp_folder = kernel_file(language, "stamp.h").parent
        try:
            text = read_source(path)
            check_includes(path, text, [path.parent, stamp_folder])
            return declarations_of(text, defined)
        except XBackendError as error:
            said = str(error)  # a declaration's refusal names its line, not its file
            raise self.fail(said if path.name in said else f"{path.name}: {said}") from None

    def _twins(self, declared: dict[str, Declarations], sources: dict[str, Path]) -> None:
        """A kernel of both sources takes the same parameters in the same order in each:
        a launch names its arguments once, for both languages."""
        if len(declared) < 2:
            return
        (first, ours), (second, theirs_) = declared.items()
        kernels, others = ours.kernels, theirs_.kernels
        for name in kernels.keys() & others.keys():
            one = [p for p, _ in kernels[name][0]]
            two = [p for p, _ in others[name][0]]
            if one != two:
                raise self.fail(
                    f"{name} takes ({', '.join(one)}) in {sources[first].name} but "
                    f"({', '.join(two)}) in {sources[second].name}: the twins must agree"
                )
            for (param, mine), (_, theirs) in zip(kernels[name][0], others[name][0], strict=True):
                kinds = (ours.kind(name, mine), theirs_.kind(name, theirs))
                if kinds[0] != kinds[1] and set(kinds) <= set(_WIDTHS):
                    said = [_WIDTHS[kind] for kind in kinds]
                    raise self.fail(
                        f"{name} takes '{param}' as {said[0]} in {sources[first].name} but "
                        f"as {said[1]} in {sources[second].name}: one launch passes both the "
                        "same value, so the twins must declare it alike"
                    )

    def _known(self, table: dict[str, Any], keys: tuple[str, ...], where: str) -> None:
        unknown = sorted(set(table) - set(keys))
        if unknown:
            raise self.fail(f"{where}: unknown key '{unknown[0]}' (known: {', '.join(keys)})")

    def _table(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(f"{where} must be a table, not {value!r}")
        return value

    def _sources(self, named: Any) -> dict[str, Path]:
        """Each language's kernel file: as ``sources`` names them, or the one .cu and the
        one .cl file of the folder."""
        folder = self.path.parent
        if named is None:
            found = {}
            for language, suffix in SUFFIXES.items():
                files = sorted(folder.glob(f"*{suffix}"))
                if len(files) > 1:
                    listed = ", ".join(f.name for f in files)
                    raise self.fail(f"several {suffix} files ({listed}): name one in sources")
                found.update({language: files[0]} if files else {})
            if not found:
                raise self.fail("no .cu or .cl file beside it")
            return found
        table = self.table(named, "sources")
        self.known(table, LANGUAGES, "sources")
        if not table:
            raise self.fail("sources = {} names no kernel file: name a .cu or a .cl file")
        found = {}
        for language, name in table.items():
            path = folder / str(name)
            if not isinstance(name, str) or Path(name).is_absolute() or ".." in Path(name).parts:
                raise self.fail(f"sources.{language} must be a file in {folder}, not {name!r}")
            if path.suffix != SUFFIXES[language]:
                raise self.fail(f"sources.{language} must end in {SUFFIXES[language]}: {name}")
            if not path.is_file():
                raise self.fail(f"sources.{language}: {path} is not a file")
            found[language] = path
        return found

    def _variant(self, family: str, entry: dict[str, Any]) -> list[tuple[str, VariantSpec]]:
        self.known(entry, _VARIANT_KEYS, "[[variant]]")
        name, kernel = entry.get("name"), entry.get("kernel")
        if not isinstance(name, str) or not name.isidentifier():
            raise self.fail(f"every [[variant]] needs a name (an identifier), not {name!r}")
        where = f"variant '{name}'"
        problem = kernel_name_problem(kernel)
        if problem:
            raise self.fail(f"{where}: kernel = {problem}")
        assert isinstance(kernel, str)
        ops = self.words(entry.get("ops", ["mm"]), OPS, f"{where}: ops")
        geometry = entry.get("geometry", ELEMENT)
        if not isinstance(geometry, str) or not re.fullmatch(r"[a-z][a-z0-9_-]*", geometry):
            raise self.fail(f"{where}: geometry is a registered geometry's name, not {geometry!r}")
        tiles = self.integers(entry.get("tiles", []), f"{where}: tiles")
        if geometry == ELEMENT and not tiles and not entry.get("parameters"):
            raise self.fail(f"{where} needs tiles, or parameters: the sizes of its groups")
        default = entry.get("default_tile", tiles[0] if tiles else None)
        if default is not None and type(default) is not int:
            raise self.fail(f"{where}: default_tile must be an integer, not {default!r}")
        if tiles and default not in tiles:
            raise self.fail(f"{where}: default_tile {default!r} is not one of tiles {tiles}")
        spec = VariantSpec(
            name, self.text(entry.get("description", ""), where), kernel, family,
            tuple(tiles), default, geometry,
            defines=tuple(self.identifiers(entry.get("switches", []), f"{where}: switches")),
            dtypes=tuple(self.words(entry.get("dtypes", []), DTYPES, f"{where}: dtypes")),
            x=self.word(entry.get("x", "columns"), ("columns", "rows"), f"{where}: x"),
            layout=self.word(entry.get("layout", ""), ("", "block", "warp"), f"{where}: layout"),
            source=f"shipped:{family}" if self.shipped else str(self.path),
            **self._sizes(entry, where),
        )  # fmt: skip
        if spec.x == "rows" and (spec.group or spec.grid):
            raise self.fail(f"{where}: x = 'rows' turns the default launch; with group and grid, "
                            "write the axes as they are")  # fmt: skip
        if geometry == ELEMENT and not tiles and not spec.group:
            raise self.fail(f"{where} has no tiles: write its launch (group and grid)")
        if bool(spec.group) != bool(spec.grid) or len(spec.group) != len(spec.grid):
            raise self.fail(f"{where}: group and grid go together, with as many axes each "
                            f"(group {list(spec.group)}, grid {list(spec.grid)})")  # fmt: skip
        return [(op, spec) for op in ops]

    def _sizes(self, entry: dict[str, Any], where: str) -> dict[str, Any]:
        """The keys that size a variant's launches, each read with the names it may use:
        the configuration's (the tile, the parameters, the constants) and, where a
        product decides, its sizes too."""
        constants = self.constants(entry.get("constants", {}), where)
        # Another geometry's parameters may take the element geometry's patch names: block
        # tiles' TM×TN patch is a parameter of its space (kernels/mm_warp).
        element = entry.get("geometry", ELEMENT) == ELEMENT
        parameters, defaults = self.parameters(
            entry.get("parameters", {}), entry.get("defaults", {}), constants, where,
            CONFIGURATION if element else ("TILE", "THREADS"),
        )  # fmt: skip
        own = (*constants, *(name for name, _ in parameters))
        configuration, every = (*CONFIGURATION, *own), (*CONFIGURATION, *own, *SIZES)
        workspaces = self.workspaces(entry.get("workspaces", {}), every, where)
        named = tuple(name for name, _ in workspaces)
        before = tuple(
            self.launch(launch, every, named, where)
            for launch in self.listed(entry.get("before", []), f"{where}: before")
        )
        return {
            "patch": self.patch(entry.get("patch", [1, 1]), ("TILE", *own), where),
            "build": self.build(entry.get("build", {}), every, where),
            "constants": constants,
            "requires": self.rules(entry.get("requires", []), every, where),
            "staged": self.size(entry.get("staged", 0), configuration, f"{where}: staged"),
            "arguments": self.arguments(entry.get("arguments", {}), every, named, where),
            "parameters": parameters,
            "defaults": defaults,
            "group": self.axes(entry["group"], ("TILE", "TM", "TN", *own), f"{where}: group")
            if "group" in entry
            else (),
            "grid": self.axes(entry["grid"], every, f"{where}: grid") if "grid" in entry else (),
            "storage": self.storage(entry.get("storage", {}), where),
            "workspaces": workspaces,
            "before": before,
        }

    def _bound(self, op: str, spec: VariantSpec, path: Path, found: Declarations) -> None:
        """Every parameter of each of ``spec``'s kernels in ``path`` takes something xbackend
        gives, as its type is passed; and its launches take what ``op`` needs: the
        operands, and a batch's strides."""
        if spec.geometry != ELEMENT:
            if spec.kernel not in found.kernels:
                self._missing(spec.name, spec.launch, path, found)
            return  # the planner of block tiles gives its own arguments (plans.py)
        taken: set[str] = set()
        for launch in spec.launches:
            taken |= self._launch_bound(spec, launch, path, found)
        strides = ("strideA", "strideB", "strideC") if operation(op).batched else ()
        missing = [name for name in ("A", "B", "C", *strides) if name not in taken]
        if missing:
            kernels = " and ".join(launch.function for launch in spec.launches)
            takes = "take" if len(spec.launches) > 1 else "takes"
            raise self.fail(
                f"variant '{spec.name}' ({op}): {kernels} {takes} no parameter "
                f"bound to {', '.join(missing)}"
            )

    def _missing(self, variant: str, launch: Launch, path: Path, found: Declarations) -> None:
        listed = ", ".join(found.kernels) or "none"
        raise self.fail(
            f"variant '{variant}': {path.name} declares no kernel '{launch.function}' "
            f"(it declares: {listed})"
        )

    def _launch_bound(
        self, spec: VariantSpec, launch: Launch, path: Path, found: Declarations
    ) -> set[str]:
        """What one launch's kernel takes, each parameter checked; the names it takes."""
        name = launch.function
        if name not in found.kernels:
            self._missing(spec.name, launch, path, found)
        params, line = found.kernels[name]
        where = f"{name} ({path.name} line {line})"
        if launch.template and name not in found.templates:
            raise self.fail(
                f"variant '{spec.name}': {where} is no template: write its name without "
                f"<{launch.template}>"
            )
        names = [p for p, _ in params]
        kept = next((p for p in names if p in STAMP_PARAMETERS), None)
        if kept:  # the clock's hooks pass these (kernels/*/stamp.h): a kernel's own is never bound
            raise self.fail(
                f"variant '{spec.name}': parameter '{kept}' of {where} has a name xbackend keeps "
                f"for the device clock's hooks ({', '.join(STAMP_PARAMETERS)}): rename it"
            )
        taken = set()
        for param, words in params:
            kind = found.kind(name, words)
            if kind == "struct":
                self._laid_out(spec, param, words.split()[-1], where, found)
                fields = found.structs[words.split()[-1]]
                taken |= {self._field(spec, launch, param, f, w, where, path) for f, w in fields}
            else:
                taken.add(self._passable(spec, launch, param, kind, words, where))
        for param in launch.arguments:
            if param.split(".")[0] not in names:
                raise self.fail(
                    f"variant '{spec.name}': arguments names '{param}', which {where} does not take"
                )
        return {str(value) for value in taken}

    def _laid_out(
        self, spec: VariantSpec, param: str, struct: str, where: str, found: Declarations
    ) -> None:
        """A struct parameter whose layout an attribute sets is refused: xbackend packs a
        struct at its fields' natural alignment, or as ``#pragma pack`` says."""
        if found.packs.get(struct) == ATTRIBUTED:
            raise self.fail(
                f"variant '{spec.name}': parameter '{param}' of {where} is a struct {struct} "
                "whose layout an attribute sets (__attribute__, __align__, alignas): xbackend "
                "lays out a struct argument at its fields' natural alignment or under "
                "#pragma pack(N); write it so"
            )

    def _field(
        self, spec: VariantSpec, launch: Launch, param: str, field: str, words: str,
        where: str, path: Path,
    ) -> object:  # fmt: skip
        """What a struct parameter's field takes (``param.field`` in arguments)."""
        if path.suffix != SUFFIXES["cuda"]:
            raise self.fail(
                f"variant '{spec.name}': parameter '{param}' of {where} is a struct: xbackend "
                "passes structs to CUDA kernels only (OpenCL passes no pointer inside one)"
            )
        key = f"{param}.{field}"
        if key not in launch.arguments:
            raise self.fail(
                f"variant '{spec.name}': parameter '{param}' of {where} is a struct: bind each "
                f"of its fields, as arguments.\"{key}\" = ... ('A', 'M', an expression...)"
            )
        kind = passing(words)
        return self._passable(spec, launch, key, kind, words, where)

    def _passable(
        self, spec: VariantSpec, launch: Launch, param: str, kind: str, words: str, where: str
    ) -> object:
        """``param`` is declared as what xbackend passes it: a pointer for an operand or a
        workspace, a number for a size or a number. What it takes, checked."""
        takes = launch.takes(param)
        where = f"variant '{spec.name}': parameter '{param}' of {where}"
        declared = " ".join(words.split()) or "(no type)"
        buffers = (*BUFFERS, *(name for name, _ in spec.workspaces))
        if takes in buffers and kind != "buffer":
            raise self.fail(f"{where} is declared '{declared}', not a pointer: xbackend gives "
                            f"{takes} as a pointer to its elements")  # fmt: skip
        if not kind:
            raise self.fail(
                f"{where} is declared '{declared}': xbackend passes pointers, integers, floats "
                "and (to CUDA) structs of them"
            )
        if kind == "buffer" and takes not in buffers:
            raise self.fail(f"{where} is a pointer: bind it to one of {', '.join(buffers)}")
        if kind.startswith("int") and type(takes) is float:
            raise self.fail(f"{where} is an integer ('{declared}'): bind it to no float")
        known = (*ARGUMENTS, *buffers, *SIZES)
        if takes == param and takes not in known:  # unbound: it takes its own name
            raise self.fail(
                f"{where} (declared '{declared}') takes nothing xbackend gives: bind it in "
                "arguments to one of "
                f"{', '.join(ARGUMENTS)}, a size ({', '.join(SIZES)}), an expression or a number"
            )
        return takes

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
import tomllib
from pathlib import Path
from typing import Any

import xbackend.families.expressions as expressions
from xbackend.errors import XBackendError
from xbackend.families.sources import (
    LANGUAGES,
    STAMP_PARAMETERS,
    SUFFIXES,
    Parameters,
    check_includes,
    kernels_of,
    passing,
    read_source,
)
from xbackend.families.variant import ARGUMENTS, BUFFERS, GEOMETRIES, VariantSpec
from xbackend.operations import OPS, operation
from xbackend.resources import kernel_file

MANIFEST = "family.toml"
DTYPES = ("float32", "float64", "int32")
_FAMILY_KEYS = ("name", "order", "sources")  # and "description", of _SHARED_KEYS
_SHARED_KEYS = (
    "ops", "tiles", "default_tile", "geometry", "patch", "switches", "build", "constants",
    "requires", "staged", "arguments", "dtypes", "x", "layout", "description",
)  # fmt: skip
_VARIANT_KEYS = ("name", "kernel", *_SHARED_KEYS)
_SIZE_NAMES = ("TILE", "TM", "TN", "THREADS")


class ManifestError(XBackendError):
    """A family manifest, or the sources it names, that cannot be used as written."""


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


class _Reader:
    """Reads one manifest, naming it in every complaint."""

    def __init__(self, path: Path, shipped: bool):
        self.path, self.shipped = path, shipped

    def fail(self, message: str) -> ManifestError:
        return ManifestError(f"{self.path}: {message}")

    def family(self, data: dict[str, Any]) -> Family:
        self._known(data, ("family", "variant"), "the top level")
        head = self._table(data.get("family", {}), "[family]")
        self._known(head, (*_FAMILY_KEYS, *_SHARED_KEYS), "[family]")
        name = head.get("name", self.path.parent.name)
        if not isinstance(name, str) or not name.isidentifier():
            raise self.fail(f"the family's name must be an identifier, not {name!r}")
        order = head.get("order", 100)
        if type(order) is not int:
            raise self.fail(f"order must be an integer, not {order!r}")
        sources = self._sources(head.get("sources"))
        declared = {language: self._declared(language, p) for language, p in sources.items()}
        entries = data.get("variant")
        if not isinstance(entries, list) or not entries:
            raise self.fail("no [[variant]]: a family declares at least one")
        # The family's description is its own, not its variants' (each says what it is).
        defaults = {key: head[key] for key in _SHARED_KEYS if key in head and key != "description"}
        variants: list[tuple[str, VariantSpec]] = []
        for entry in entries:
            variants += self._variant(name, {**defaults, **self._table(entry, "[[variant]]")})
        for language, kernels in declared.items():
            for op, spec in variants:
                self._bound(op, spec, sources[language], kernels)
        self._twins(declared, sources)
        seen = [(op, spec.name) for op, spec in variants]
        twice = {pair for pair in seen if seen.count(pair) > 1}
        if twice:
            op, variant = sorted(twice)[0]
            raise self.fail(f"variant '{variant}' of {op} is declared twice")
        description = self._text(head.get("description", ""), "[family]")
        folder = self.path.parent
        return Family(name, folder, description, sources, tuple(variants), order, self.shipped)

    def _declared(self, language: str, path: Path) -> dict[str, tuple[Parameters, int]]:
        """The kernels ``path`` declares, its includes checked (a device or a FIFO named
        by an ``#include`` is refused here, before a compiler opens it)."""
        stamp_folder = kernel_file(language, "stamp.h").parent
        try:
            text = read_source(path)
            check_includes(path, text, [path.parent, stamp_folder])
        except XBackendError as error:
            raise self.fail(str(error)) from None
        return kernels_of(text)

    def _twins(
        self, declared: dict[str, dict[str, tuple[Parameters, int]]], sources: dict[str, Path]
    ) -> None:
        """A kernel of both sources takes the same parameters in the same order in each:
        a launch names its arguments once, for both languages."""
        if len(declared) < 2:
            return
        (first, kernels), (second, others) = declared.items()
        for name in kernels.keys() & others.keys():
            one = [p for p, _ in kernels[name][0]]
            two = [p for p, _ in others[name][0]]
            if one != two:
                raise self.fail(
                    f"{name} takes ({', '.join(one)}) in {sources[first].name} but "
                    f"({', '.join(two)}) in {sources[second].name}: the twins must agree"
                )
            for (param, mine), (_, theirs) in zip(kernels[name][0], others[name][0], strict=True):
                if {passing(mine), passing(theirs)} == {"int32", "int64"}:
                    bits = {"int32": "32-bit", "int64": "64-bit"}
                    raise self.fail(
                        f"{name} takes '{param}' as a {bits[passing(mine)]} integer in "
                        f"{sources[first].name} but a {bits[passing(theirs)]} one in "
                        f"{sources[second].name}: one launch passes both the same value, so "
                        "the twins must declare it alike"
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
        table = self._table(named, "sources")
        self._known(table, LANGUAGES, "sources")
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
        self._known(entry, _VARIANT_KEYS, "[[variant]]")
        name, kernel = entry.get("name"), entry.get("kernel")
        if not isinstance(name, str) or not name.isidentifier():
            raise self.fail(f"every [[variant]] needs a name (an identifier), not {name!r}")
        where = f"variant '{name}'"
        if not isinstance(kernel, str) or not kernel.isidentifier():
            raise self.fail(f"{where} needs the name of its kernel, not {kernel!r}")
        ops = self._words(entry.get("ops", ["mm"]), OPS, f"{where}: ops")
        geometry = self._word(entry.get("geometry", "element"), GEOMETRIES, f"{where}: geometry")
        tiles = self._integers(entry.get("tiles", []), f"{where}: tiles")
        if geometry == "element" and not tiles:
            raise self.fail(f"{where} needs tiles: the sizes of its groups")
        default = entry.get("default_tile", tiles[0] if tiles else None)
        if default is not None and type(default) is not int:
            raise self.fail(f"{where}: default_tile must be an integer, not {default!r}")
        if tiles and default not in tiles:
            raise self.fail(f"{where}: default_tile {default!r} is not one of tiles {tiles}")
        constants = self._constants(entry.get("constants", {}), where)
        spec = VariantSpec(
            name, self._text(entry.get("description", ""), where), kernel, family,
            tuple(tiles), default, geometry,
            patch=self._patch(entry.get("patch", [1, 1]), constants, where),
            defines=tuple(self._identifiers(entry.get("switches", []), f"{where}: switches")),
            build=self._build(entry.get("build", {}), constants, where),
            constants=constants,
            requires=self._rules(entry.get("requires", []), constants, where),
            staged=self._size(entry.get("staged", 0), constants, f"{where}: staged"),
            arguments=self._arguments(entry.get("arguments", {}), where),
            dtypes=tuple(self._words(entry.get("dtypes", []), DTYPES, f"{where}: dtypes")),
            x=self._word(entry.get("x", "columns"), ("columns", "rows"), f"{where}: x"),
            layout=self._word(entry.get("layout", ""), ("", "block", "warp"), f"{where}: layout"),
            source=f"shipped:{family}" if self.shipped else str(self.path),
        )  # fmt: skip
        return [(op, spec) for op in ops]

    def _bound(
        self, op: str, spec: VariantSpec, path: Path, kernels: dict[str, tuple[Parameters, int]]
    ) -> None:
        """Every parameter of ``spec``'s kernel in ``path`` takes something xbackend gives,
        and the kernel takes what ``op`` needs: the operands, and a batch's strides."""
        if spec.kernel not in kernels:
            found = ", ".join(kernels) or "none"
            raise self.fail(
                f"variant '{spec.name}': {path.name} declares no kernel "
                f"'{spec.kernel}' (it declares: {found})"
            )
        if spec.geometry != "element":
            return  # the planner of block tiles gives its own arguments (plans.py)
        params, line = kernels[spec.kernel]
        names = [p for p, _ in params]
        kept = next((p for p in names if p in STAMP_PARAMETERS), None)
        if kept:  # the clock's hooks pass these (kernels/*/stamp.h): a kernel's own is never bound
            raise self.fail(
                f"variant '{spec.name}': parameter '{kept}' of {spec.kernel} ({path.name} line "
                f"{line}) has a name xbackend keeps for the device clock's hooks "
                f"({', '.join(STAMP_PARAMETERS)}): rename it"
            )
        for param, words in params:
            self._passable(spec, param, words, path, line)
        for param in names:
            if spec.takes(param) not in ARGUMENTS:
                raise self.fail(
                    f"variant '{spec.name}': parameter '{param}' of {spec.kernel} ({path.name} "
                    f"line {line}) takes nothing xbackend gives: bind it in arguments to one of "
                    f"{', '.join(ARGUMENTS)}"
                )
        for param in spec.arguments:
            if param not in names:
                raise self.fail(
                    f"variant '{spec.name}': arguments names '{param}', which "
                    f"{spec.kernel} ({path.name} line {line}) does not take"
                )
        strides = ("strideA", "strideB", "strideC") if operation(op).batched else ()
        needed = ("A", "B", "C", *strides)
        missing = [b for b in needed if b not in {spec.takes(p) for p in names}]
        if missing:
            raise self.fail(
                f"variant '{spec.name}' ({op}): {spec.kernel} takes no parameter "
                f"bound to {', '.join(missing)}"
            )

    def _passable(self, spec: VariantSpec, param: str, words: str, path: Path, line: int) -> None:
        """``param`` is declared as what xbackend passes it: a pointer for an operand, an
        integer for a size, never a struct nor a float."""
        kind, takes = passing(words), spec.takes(param)
        where = (f"variant '{spec.name}': parameter '{param}' of {spec.kernel} ({path.name} "
                 f"line {line})")  # fmt: skip
        declared = " ".join(words.split()) or "(no type)"
        if takes in BUFFERS and kind != "buffer":
            raise self.fail(
                f"{where} is declared '{declared}', not a pointer: xbackend gives {takes} as a "
                "pointer to its elements (a struct of sizes and a pointer is not passed)"
            )
        if not kind:
            raise self.fail(
                f"{where} is declared '{declared}': xbackend passes pointers and integers only "
                "(an operand as a pointer to its elements, a size as an int or a 64-bit int)"
            )
        if takes not in BUFFERS and takes in ARGUMENTS and kind == "buffer":
            raise self.fail(f"{where} is a pointer: xbackend gives {takes} as an integer")

    # -- values ------------------------------------------------------------------------------

    def _list(self, value: Any, where: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(f"{where} must be a list, not {value!r}")
        return value

    def _text(self, value: Any, where: str) -> str:
        if not isinstance(value, str):
            raise self.fail(f"{where}: description must be text, not {value!r}")
        return value

    def _word(self, value: Any, allowed: tuple[str, ...], where: str) -> str:
        if value not in allowed:
            raise self.fail(
                f"{where} must be one of {', '.join(map(repr, allowed))}, not {value!r}"
            )
        return str(value)

    def _words(self, value: Any, allowed: tuple[str, ...], where: str) -> list[str]:
        return [self._word(word, allowed, where) for word in self._list(value, where)]

    def _identifiers(self, value: Any, where: str) -> list[str]:
        words = self._list(value, where)
        for word in words:
            if not isinstance(word, str) or not word.isidentifier():
                raise self.fail(f"{where}: {word!r} is not a macro name")
        return words

    def _integers(self, value: Any, where: str) -> list[int]:
        numbers = self._list(value, where)
        if not all(type(n) is int and n > 0 for n in numbers):
            raise self.fail(f"{where} must be positive integers, not {numbers!r}")
        return numbers

    def _constants(self, value: Any, where: str) -> dict[str, int]:
        table = self._table(value, f"{where}: constants")
        for name, number in table.items():
            if not name.isidentifier() or name in _SIZE_NAMES or type(number) is not int:
                raise self.fail(f"{where}: constant {name} = {number!r}: a new name and an integer")
        return dict(table)

    def _size(
        self,
        value: Any,
        constants: dict[str, int],
        where: str,
        sizes: tuple[str, ...] = _SIZE_NAMES,
    ) -> str | int:
        """An integer, or an expression of ``sizes`` (the launch's names) and the constants."""
        if type(value) is int:
            return value
        if not isinstance(value, str):
            raise self.fail(f"{where} must be an integer or an expression, not {value!r}")
        try:
            unknown = expressions.names(value) - {*sizes, *constants}
        except expressions.ExpressionError as error:
            raise self.fail(f"{where}: {error}") from None
        if unknown:
            known = ", ".join((*sizes, *constants))
            raise self.fail(
                f"{where}: {value!r} uses {', '.join(sorted(unknown))} (known: {known})"
            )
        return value

    def _rules(self, value: Any, constants: dict[str, int], where: str) -> tuple[str, ...]:
        rules = self._list(value, f"{where}: requires")
        for rule in rules:
            if not isinstance(rule, str):
                raise self.fail(f"{where}: requires holds expressions, not {rule!r}")
            self._size(rule, constants, f"{where}: requires")
        return tuple(rules)

    def _patch(
        self, value: Any, constants: dict[str, int], where: str
    ) -> tuple[str | int, str | int]:
        sizes = self._list(value, f"{where}: patch")
        if len(sizes) != 2:
            raise self.fail(f"{where}: patch is [rows, columns] per worker, not {sizes!r}")
        # A patch is what TM and TN are: it may use the tile and the constants alone.
        rows, columns = (self._size(s, constants, f"{where}: patch", ("TILE",)) for s in sizes)
        return rows, columns

    def _build(
        self, value: Any, constants: dict[str, int], where: str
    ) -> tuple[tuple[str, str | int], ...]:
        table = self._table(value, f"{where}: build")
        found = []
        for name, size in table.items():
            if not name.isidentifier():
                raise self.fail(f"{where}: build: {name!r} is not a macro name")
            found.append(
                (
                    name,
                    size
                    if size == "REAL"
                    else self._size(size, constants, f"{where}: build.{name}"),
                )
            )
        return tuple(found)

    def _arguments(self, value: Any, where: str) -> dict[str, str]:
        table = self._table(value, f"{where}: arguments")
        for param, takes in table.items():
            if takes not in ARGUMENTS:
                raise self.fail(
                    f"{where}: arguments.{param} = {takes!r}: one of {', '.join(ARGUMENTS)}"
                )
        return dict(table)

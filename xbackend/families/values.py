"""The values of a family manifest, read and checked: lists, words, numbers, and the
expressions the sizes, rules and launches are written in (``expressions.py``).

``Values`` names the manifest in every complaint (``fail``); ``manifest._Reader`` reads
the tables with it. Which names an expression may use depends on what it sizes: a
group's workers and the memory it stages are the same at every product (the tile, the
parameters, the constants), while a grid, a build option, an argument or a rule on the
shapes may also use the product's sizes (``SIZES``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import xbackend.families.expressions as expressions
from xbackend.errors import XBackendError
from xbackend.families.variant import ARGUMENTS, BUFFERS, SIZES, STORAGES, Launch, Value

# The names of a configuration: the tile, the patch a worker computes, the workers a group.
CONFIGURATION = ("TILE", "TM", "TN", "THREADS")


# A kernel's name as a manifest writes it: an identifier, optionally with template arguments
# of identifiers, numbers, ``::``, commas and spaces (``mm<REAL>``, ``mm<float, 16>``). The
# name is pasted into the CUDA text nvcc builds (``kernels.cuda_text``): anything else, a
# ``;`` or a line break, would carry code past the include guard.
_KERNEL_NAME = re.compile(r"[A-Za-z_]\w*(?: *<(?:\w|::|,| )*>)?", re.ASCII)
KERNEL_NAME_RULE = (
    "an identifier, optionally with template arguments (identifiers, numbers, ::, commas "
    "and spaces) in <>"
)


def kernel_name_problem(kernel: Any) -> str | None:
    """Why ``kernel`` is not a kernel's name a manifest may write, or None."""
    if isinstance(kernel, str) and _KERNEL_NAME.fullmatch(kernel):
        return None
    shown = repr(kernel) if len(repr(kernel)) <= 60 else repr(kernel)[:57] + "..."
    return f"{shown} is not the name of a kernel: {KERNEL_NAME_RULE}"


class ManifestError(XBackendError):
    """A family manifest, or the sources it names, that cannot be used as written."""


class Values:
    """Reads one manifest's values, naming the manifest in every complaint."""

    path: Path

    def fail(self, message: str) -> ManifestError:
        return ManifestError(f"{self.path}: {message}")

    def known(self, table: dict[str, Any], keys: tuple[str, ...], where: str) -> None:
        unknown = sorted(set(table) - set(keys))
        if unknown:
            raise self.fail(f"{where}: unknown key '{unknown[0]}' (known: {', '.join(keys)})")

    def table(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(f"{where} must be a table, not {value!r}")
        return value

    def listed(self, value: Any, where: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(f"{where} must be a list, not {value!r}")
        return value

    def text(self, value: Any, where: str) -> str:
        if not isinstance(value, str):
            raise self.fail(f"{where}: description must be text, not {value!r}")
        return value

    def word(self, value: Any, allowed: tuple[str, ...], where: str) -> str:
        if value not in allowed:
            raise self.fail(
                f"{where} must be one of {', '.join(map(repr, allowed))}, not {value!r}"
            )
        return str(value)

    def words(self, value: Any, allowed: tuple[str, ...], where: str) -> list[str]:
        return [self.word(word, allowed, where) for word in self.listed(value, where)]

    def identifiers(self, value: Any, where: str) -> list[str]:
        words = self.listed(value, where)
        for word in words:
            if not isinstance(word, str) or not word.isidentifier():
                raise self.fail(f"{where}: {word!r} is not a macro name")
        return words

    def integers(self, value: Any, where: str) -> list[int]:
        numbers = self.listed(value, where)
        if not all(type(n) is int and n > 0 for n in numbers):
            raise self.fail(f"{where} must be positive integers, not {numbers!r}")
        return numbers

    def constants(self, value: Any, where: str) -> dict[str, int]:
        table = self.table(value, f"{where}: constants")
        for name, number in table.items():
            taken = (*CONFIGURATION, *SIZES)
            if not name.isidentifier() or name in taken or type(number) is not int:
                raise self.fail(f"{where}: constant {name} = {number!r}: a new name and an integer")
        return dict(table)

    def parameters(
        self, value: Any, defaults: Any, constants: Mapping[str, int], where: str,
        reserved: tuple[str, ...] = CONFIGURATION,
    ) -> tuple[tuple[tuple[str, tuple[int, ...]], ...], dict[str, int]]:  # fmt: skip
        """The parameters and their values (``tune``'s space), and each one's default:
        ``defaults``' value, or the first listed. ``reserved``: the names the geometry
        keeps (the element geometry's TILE, TM, TN, THREADS)."""
        table = self.table(value, f"{where}: parameters")
        found = []
        for name, values in table.items():
            taken = (*reserved, *SIZES, *constants)
            if not name.isidentifier() or name in taken:
                raise self.fail(f"{where}: parameter {name!r}: a new name (not {', '.join(taken)})")
            numbers = self.integers(values, f"{where}: parameters.{name}")
            if not numbers:
                raise self.fail(f"{where}: parameters.{name} lists no value")
            found.append((name, tuple(numbers)))
        chosen = self.table(defaults, f"{where}: defaults")
        for name, number in chosen.items():
            listed = dict(found).get(name)
            if listed is None or number not in listed:
                raise self.fail(
                    f"{where}: defaults.{name} = {number!r} is not one of its parameter's values "
                    f"({list(listed) if listed else 'no parameter of that name'})"
                )
        return tuple(found), {name: chosen.get(name, values[0]) for name, values in found}

    def size(self, value: Any, known: tuple[str, ...], where: str) -> str | int:
        """An integer, or an expression of the names ``known``."""
        if type(value) is int:
            return value
        if not isinstance(value, str):
            raise self.fail(f"{where} must be an integer or an expression, not {value!r}")
        try:
            unknown = expressions.names(value) - set(known)
        except expressions.ExpressionError as error:
            raise self.fail(f"{where}: {error}") from None
        if unknown:
            sizes = " (a product's sizes are not known here)" if unknown & set(SIZES) else ""
            raise self.fail(
                f"{where}: {value!r} uses {', '.join(sorted(unknown))}{sizes} "
                f"(known: {', '.join(known)})"
            )
        return value

    def rules(self, value: Any, known: tuple[str, ...], where: str) -> tuple[str, ...]:
        rules = self.listed(value, f"{where}: requires")
        for rule in rules:
            if not isinstance(rule, str):
                raise self.fail(f"{where}: requires holds expressions, not {rule!r}")
            self.size(rule, known, f"{where}: requires")
        return tuple(rules)

    def axes(self, value: Any, known: tuple[str, ...], where: str) -> tuple[str | int, ...]:
        """A group's or a grid's sizes along x, y and z: one to three expressions."""
        sizes = self.listed(value, where)
        if not 1 <= len(sizes) <= 3:
            raise self.fail(f"{where} is [x], [x, y] or [x, y, z], not {sizes!r}")
        for size in sizes:  # a number is judged now; an expression, at each product
            if type(size) is int and size < 1:
                raise self.fail(f"{where}: {size} along an axis: a launch takes at least 1")
        return tuple(self.size(size, known, where) for size in sizes)

    def patch(self, value: Any, known: tuple[str, ...], where: str) -> tuple[str | int, str | int]:
        sizes = self.listed(value, f"{where}: patch")
        if len(sizes) != 2:
            raise self.fail(f"{where}: patch is [rows, columns] per worker, not {sizes!r}")
        # A patch is what TM and TN are: the tile, the constants and the parameters.
        rows, columns = (self.size(s, known, f"{where}: patch") for s in sizes)
        return rows, columns

    def build(
        self, value: Any, known: tuple[str, ...], where: str
    ) -> tuple[tuple[str, str | int], ...]:
        table = self.table(value, f"{where}: build")
        found = []
        for name, size in table.items():
            if not name.isidentifier():
                raise self.fail(f"{where}: build: {name!r} is not a macro name")
            kept = size if size == "REAL" else self.size(size, known, f"{where}: build.{name}")
            found.append((name, kept))
        return tuple(found)

    def storage(self, value: Any, where: str) -> dict[str, str]:
        table = self.table(value, f"{where}: storage")
        self.known(table, BUFFERS, f"{where}: storage")
        return {
            name: self.word(kind, STORAGES, f"{where}: storage.{name}")
            for name, kind in table.items()
        }

    def workspaces(
        self, value: Any, known: tuple[str, ...], where: str
    ) -> tuple[tuple[str, str | int], ...]:
        table = self.table(value, f"{where}: workspaces")
        found = []
        for name, size in table.items():
            if not name.isidentifier() or name in (*ARGUMENTS, *SIZES):
                raise self.fail(f"{where}: workspace {name!r}: a new name for a buffer")
            if type(size) is int and size < 1:
                raise self.fail(
                    f"{where}: workspaces.{name} = {size}: a workspace holds at least one element"
                )
            found.append((name, self.size(size, known, f"{where}: workspaces.{name}")))
        return tuple(found)

    def arguments(
        self, value: Any, known: tuple[str, ...], workspaces: tuple[str, ...], where: str
    ) -> dict[str, Value]:
        """Kernel parameter (or ``param.field`` of a struct) -> what it takes: an operand,
        a size, a workspace, an expression of the sizes, or a number."""
        table = self.table(value, f"{where}: arguments")
        for param, takes in table.items():
            field = param.split(".")
            if len(field) > 2 or not all(part.isidentifier() for part in field):
                raise self.fail(f"{where}: arguments.{param}: a parameter, or parameter.field")
            if type(takes) in (int, float):
                continue
            if not isinstance(takes, str):
                raise self.fail(
                    f"{where}: arguments.{param} = {takes!r}: a name, an expression or a number"
                )
            names = (*ARGUMENTS, *workspaces)
            if takes not in names:
                said = f"{where}: arguments.{param} = {takes!r} is none of {', '.join(names)}"
                self.size(takes, known, f"{said}, nor an expression of what is known")
        return dict(table)

    def launch(
        self, value: Any, known: tuple[str, ...], workspaces: tuple[str, ...], where: str
    ) -> Launch:
        """A ``[[variant.before]]`` launch: a kernel, its group and grid, its arguments."""
        entry = self.table(value, f"{where}: before")
        self.known(entry, ("kernel", "group", "grid", "arguments"), f"{where}: before")
        kernel = entry.get("kernel")
        problem = kernel_name_problem(kernel)
        if problem:
            raise self.fail(f"{where}: a launch before names its kernel: {problem}")
        assert isinstance(kernel, str)
        if "group" not in entry or "grid" not in entry:
            raise self.fail(f"{where}: the launch of {kernel} before needs its group and its grid")
        configuration = tuple(name for name in known if name not in SIZES)
        return Launch(
            kernel,
            self.axes(entry["group"], configuration, f"{where}: before {kernel}: group"),
            self.axes(entry["grid"], known, f"{where}: before {kernel}: grid"),
            self.arguments(
                entry.get("arguments", {}), known, workspaces, f"{where}: before {kernel}"
            ),
        )

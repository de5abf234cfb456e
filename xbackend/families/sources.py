"""Kernel sources as text: read safely, their kernels and parameters found, the clock's
hooks taken out or put in.

The kernels' declarations are read from the text, in either language and as people
write them (``__kernel void f(...)``, ``extern "C" __global__ __launch_bounds__(256)
void f(...)``, attributes, comments): a launch names its arguments, and the
declaration orders them.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import re
from pathlib import Path

from xbackend.errors import XBackendError
from xbackend.families.directives import includes, live, packs, spliced
from xbackend.safeio import UnsafePath, read_small_text

SUFFIXES = {"cuda": ".cu", "opencl": ".cl"}
LANGUAGES = tuple(SUFFIXES)
# The largest kernel file (or file it includes) read: far above any real one (the shipped
# files are under 40 kB), so that a runaway file is refused by name, not read into memory.
MAX_SOURCE_BYTES = 4 << 20

_PARENS = r"\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)"  # balanced, three deep
# Every quantifier here is bounded or stops at a character that ends it, so that a scan
# is linear in the text (a file of 1 MB of ``kernel`` words is not a minute's search):
# at most 16 words between ``__kernel`` and ``void``, none of them a kernel's keyword
# (each word is then read for one keyword at most), and a parameter list holds no
# parenthesis (a kernel's parameters take no function pointers).
_KEYWORD = r"(?:\b__kernel\b|\bkernel\b|\b__global__\b)"  # what makes a function a kernel
_WORD = rf"__attribute__\s*{_PARENS}|__launch_bounds__\s*{_PARENS}|(?!{_KEYWORD})\w+"
_DECLARATION = re.compile(
    rf"{_KEYWORD}(?:\s+(?:{_WORD})){{0,16}}?"
    rf"\s+void\s+(?:__launch_bounds__\s*{_PARENS}\s*)?(\w+)\s*\(([^()]*)\)"
)
# The clock's hooks (kernels/*/stamp.h), as the kernel files write them: the include,
# the parameter macro after a kernel's last parameter, a line at its start and at its end.
_HOOKS = re.compile(
    r'^#include "stamp\.h"\n| STAMP_PARAMETER(?=\))|^[ \t]*STAMP_(?:ENTER|EXIT);\n', re.MULTILINE
)
STAMP_PARAMETERS = ("stamps", "stamp_slot")
# What a stamped build puts before a user's kernel file: the hooks, then its own numbering.
HOOKS_PREFIX = '#include "stamp.h"\n#line 1\n'

Parameters = tuple[tuple[str, str], ...]  # (name, the words before it), in order


def read_source(path: Path, what: str = "kernel file") -> str:
    """The text of a kernel file (or of a manifest: ``what``). A file that is not UTF-8
    text (a folder, a device, a binary, NUL bytes) or is over ``MAX_SOURCE_BYTES`` is an
    ``XBackendError`` naming it, never a driver's confusion nor a memory error."""
    try:
        text = read_small_text(path, MAX_SOURCE_BYTES)
    except FileNotFoundError:
        raise XBackendError(f"the {what} {path} is missing") from None
    except UnsafePath as error:
        raise XBackendError(f"the {what} {path} is {error}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise XBackendError(f"cannot read the {what} {path} as UTF-8 text: {error}") from error
    if "\x00" in text:
        raise XBackendError(f"the {what} {path} holds NUL bytes: it is not source text")
    return text


def check_includes(
    path: Path, text: str, folders: list[Path], depth: int = 0, seen: set[Path] | None = None
) -> None:
    """Every file ``text`` (the file at ``path``) includes, and what those include, that is
    found in ``folders`` (or named by an absolute path) is a regular UTF-8 file within
    the size limit: an ``#include "/dev/zero"`` or of a FIFO is refused by name, before
    a compiler blocks on it or reads it without end. Every spelling a compiler reads is
    followed (``%:include``, ``#include_next``, ``#import``, ``#embed``, a name split by a
    backslash-newline, ``__has_include``); an include of a macro (``#include H``), whose
    file only the compiler knows, is refused. Each file is read once."""
    if depth > 16:
        raise XBackendError(f"{path}: includes nested more than 16 deep")
    seen = set() if seen is None else seen
    code = _comments_out(spliced(text))
    raw = _RAW_STRING.search(code)
    if raw:  # its text may hold a "#if 0" or a "*/" the guard would take for code
        line = code.count("\n", 0, raw.start()) + 1
        raise XBackendError(
            f'{path} line {line}: a raw string literal (R"...(): xbackend checks every '
            "file a kernel includes before a compiler opens it, and reads no raw strings; "
            "write it as an ordinary string"
        )
    for line, directive, named in _included(path, live(code)):
        candidates = [Path(named)] if os.path.isabs(named) else [f / named for f in folders]
        found = next((c for c in candidates if os.path.lexists(c)), None)
        if found is None or found in seen:
            continue  # a system header, one the compiler reports missing, or one read
        seen.add(found)
        try:
            included = read_source(found, "included file")
        except XBackendError as error:
            raise XBackendError(f"{path} line {line}: #{directive} {named!r}: {error}") from None
        if _PACKING.search(_comments_out(spliced(included))):  # nvcc lays structs out by it
            raise XBackendError(
                f"{path} line {line}: #{directive} {named!r}: it holds a #pragma pack, which "
                "xbackend follows in the kernel file alone when it lays out a struct argument: "
                "write the pragma in the kernel file"
            )
        check_includes(found, included, [found.parent, *folders[1:]], depth + 1, seen)


_RAW_STRING = re.compile(r'\b(?:u8|u|U|L)?R"[^\s()\\"]{0,16}\(')
_NAMED = re.compile(r'"([^"\n]*)"|<([^>\n]*)>')
_PACKING = re.compile(
    r"^[ \t]*(?:#|%:|\?\?=)[ \t]*pragma[ \t]+pack\b|\b(?:_Pragma|__pragma)\s*\(", re.M
)
_HAS_INCLUDE = re.compile(r'__has_include(?:_next)?\s*\(\s*(?:"([^"\n]*)"|<([^>\n]*)>)')


def _included(path: Path, code: str) -> list[tuple[int, str, str]]:
    """Each file ``code`` names to read, with its line and directive; a directive that
    names no file in quotes or ``<>`` is refused by name."""
    found = []
    for line, directive, rest in includes(code):
        named = _NAMED.match(rest)
        if named is None:
            raise XBackendError(
                f"{path} line {line}: #{directive} {rest[:40]!r} names no file in quotes or <>: "
                "xbackend checks every file a kernel includes before a compiler opens it, and "
                "cannot follow a macro; write the file's name"
            )
        found.append(
            (line, directive, named.group(1) if named.group(1) is not None else named.group(2))
        )
    line, counted = 1, 0
    for match in _HAS_INCLUDE.finditer(code):
        line, counted = line + code.count("\n", counted, match.start()), match.start()
        named_ = match.group(1) if match.group(1) is not None else match.group(2)
        found.append((line, "if __has_include", named_))
    return found


def _blank(match: re.Match[str]) -> str:
    """A comment as blanks, its line breaks kept, so offsets keep their line numbers."""
    piece = match.group(0)
    return re.sub(r"[^\n]", " ", piece) if "\n" in piece else " " * len(piece)


def code_of(text: str, defined: frozenset[str] = frozenset()) -> str:
    """A source's code as its declarations are read: without the clock's hooks, its lines
    joined where a backslash ends them, its comments blanked, and what no build compiles
    (``#if 0``, ``#ifndef X`` of a macro X every build defines: ``defined``) blanked too
    (``directives.live``). Every line keeps its number."""
    return live(blank_comments(spliced(without_stamps(text))), defined)


def _declared_kernels(code: str) -> list[tuple[str, Parameters, int]]:
    """Each kernel declaration of ``code``, in order: its name, parameters and line."""
    found = []
    line, counted = 1, 0  # lines counted as the matches come, once over the text
    for match in _DECLARATION.finditer(code):
        name, params = match.group(1), match.group(2).strip()
        words = [param.replace("*", "* ").replace("&", "& ").split() for param in params.split(",")]
        declared = tuple((param[-1], " ".join(param[:-1])) for param in words if param)
        if params in ("", "void"):
            declared = ()
        line += code.count("\n", counted, match.start(1))
        counted = match.start(1)
        found.append((name, declared, line))
    return found


def kernels_of(text: str) -> dict[str, tuple[Parameters, int]]:
    """Each kernel a source declares, with its parameters and the line it starts on (of a
    kernel declared twice, the first: ``declarations_of`` refuses two that differ)."""
    return _first(code_of(text))


def _first(code: str) -> dict[str, tuple[Parameters, int]]:
    found: dict[str, tuple[Parameters, int]] = {}
    for name, declared, line in _declared_kernels(code):
        found.setdefault(name, (declared, line))
    return found


def _ambiguous(code: str) -> None:
    """A kernel declared twice with other parameters (each in a branch of an ``#ifdef``
    the build decides, say) is refused: which one a launch binds is not known."""
    first: dict[str, tuple[Parameters, int]] = {}
    for name, declared, line in _declared_kernels(code):
        seen, at = first.setdefault(name, (declared, line))
        if _shape(seen) != _shape(declared):
            raise XBackendError(
                f"kernel {name} is declared at line {at} and again at line {line} with other "
                f"parameters ({', '.join(p for p, _ in seen)}) and "
                f"({', '.join(p for p, _ in declared)}): xbackend cannot tell which one the "
                "build compiles (only #if of a number, and #ifdef of a macro every variant's "
                "build defines, are decided before the build); declare it once, or alike in "
                "each branch"
            )


def _shape(params: Parameters) -> tuple[tuple[str, str], ...]:
    """What a launch binds of a declaration: each parameter's name and how it is passed."""
    return tuple((name, passing(words)) for name, words in params)


# A struct's definition (``typedef struct { ... } Name;`` or ``struct Name { ... };``), and a
# template's parameters just before a kernel (``template <typename T>``).
_STRUCT = re.compile(
    r"\btypedef\s+struct\s*\w*\s*\{([^{}]*)\}\s*(\w+)\s*;|\bstruct\s+(\w+)\s*\{([^{}]*)\}\s*;"
)
_TEMPLATE = re.compile(r"\btemplate\s*<([^<>]*)>\s*$")
# A field's alignment set by an attribute, which xbackend does not follow (``Declarations``'
# packs: the struct is then refused where a kernel takes it).
_ALIGNING = re.compile(r"\b(?:__attribute__|__align__|alignas|_Alignas|__declspec)\b")
ATTRIBUTED = -1


@dataclasses.dataclass(frozen=True)
class Declarations:
    """What a source declares that a launch depends on: its kernels with their parameters
    and lines, its structs' fields in order, and the template parameters of each kernel
    that is a template (``template <typename T>``: ``("T",)``)."""

    kernels: dict[str, tuple[Parameters, int]]
    structs: dict[str, Parameters]
    templates: dict[str, tuple[str, ...]]
    # Each struct's packing: 0 its fields at their natural alignment, N under ``#pragma
    # pack(N)`` (each field at most N-aligned), ``ATTRIBUTED`` where an attribute sets it.
    packs: dict[str, int] = dataclasses.field(default_factory=dict)

    def kind(self, kernel: str, words: str) -> str:
        """How a parameter of ``kernel`` declared with ``words`` is passed (``passing``):
        a struct of this source is "struct", a template's type parameter "real"."""
        kept = [word for word in words.split() if word not in _QUALIFIERS]
        if "*" not in words and len(kept) == 1:
            if kept[0] in self.structs:
                return "struct"
            if kept[0] in self.templates.get(kernel, ()):
                return "real"
        return passing(words)


# What every build defines itself (plans.py, block_tiles.py): a kernel file may test it
# (``#ifndef REAL``) but not define it otherwise.
_BUILT = frozenset({"REAL"})
_DEFINES_BUILT = re.compile(r"^[ \t]*#[ \t]*define[ \t]+REAL\b", re.MULTILINE)


def declarations_of(text: str, defined: frozenset[str] = frozenset()) -> Declarations:
    """The kernels, structs and kernel templates ``text`` declares, as the build compiles
    them (``code_of``, ``defined`` the macros every build defines); a kernel or a struct
    declared twice, otherwise, is an ``XBackendError`` naming both lines."""
    code = code_of(text, defined | _BUILT)
    if _DEFINES_BUILT.search(code):
        raise XBackendError(
            "it #defines REAL, which each build defines as the element type (-DREAL=float, "
            "double or int) and xbackend passes REAL scalars as: use REAL as the build "
            "gives it, or a name of its own for another type"
        )
    _ambiguous(code)
    try:
        pragmas = packs(code)
    except ValueError as error:
        raise XBackendError(str(error)) from None
    structs: dict[str, Parameters] = {}
    packed: dict[str, int] = {}
    for match in _STRUCT.finditer(code):
        body, name = (match.group(1), match.group(2)) if match.group(2) else match.group(4, 3)
        earlier = bisect.bisect_left(pragmas, (match.start(), -1))  # the packs before it
        packing = pragmas[earlier - 1][1] if earlier else 0
        packed[name] = ATTRIBUTED if _ALIGNING.search(body) else packing
        fields = [field.replace("*", "* ").split() for field in body.split(";")]
        found = tuple((field[-1], " ".join(field[:-1])) for field in fields if field)
        if structs.setdefault(name, found) != found:
            line = code.count("\n", 0, match.start()) + 1
            raise XBackendError(
                f"struct {name} is defined again at line {line} with other fields: xbackend "
                "cannot tell which one the build compiles (only #if of a number, and #ifdef of "
                "a macro every variant's build defines, are decided before the build); define "
                "it once"
            )
    templates = {}
    for match in _DECLARATION.finditer(code):
        before = code[max(0, match.start() - 400) : match.start()]
        head = _TEMPLATE.search(before)
        if head:
            words = [part.split() for part in head.group(1).split(",")]
            kinds = ("typename", "class")
            templates[match.group(1)] = tuple(w[-1] for w in words if w and w[0] in kinds)
    return Declarations(_first(code), structs, templates, packed)


# How a parameter's declared type is passed: a pointer is a buffer; these integer types
# are passed as 32-bit or 64-bit ints (``INDEX``: xbackend's own, widened by a wide build);
# float scalars as floats or doubles (``REAL``: the element type); anything else (a
# vector type, a struct of another file) xbackend does not pass.
_QUALIFIERS = frozenset({
    "const", "volatile", "restrict", "__restrict", "__restrict__", "__global", "global",
    "__constant", "constant", "__private", "private",
})  # fmt: skip
_INT32 = frozenset({"int", "signed", "signed int", "unsigned", "unsigned int", "uint",
                    "int32_t", "uint32_t", "INDEX"})  # fmt: skip
_INT64 = frozenset({"size_t", "ssize_t", "ptrdiff_t", "long", "long int", "signed long",
                    "unsigned long", "unsigned long int", "long long", "long long int",
                    "unsigned long long", "ulong", "int64_t", "uint64_t"})  # fmt: skip


_FLOATS = {"float": "float32", "double": "float64", "REAL": "real"}


def passing(words: str) -> str:
    """How a parameter declared with ``words`` (the words before its name) is passed:
    "buffer" (a pointer), "int32", "int64", "float32", "float64", "real" (the element
    type), or "" (a type xbackend does not pass)."""
    if "*" in words or "[" in words:
        return "buffer"
    kept = " ".join(word for word in words.split() if word not in _QUALIFIERS)
    if kept in _FLOATS:
        return _FLOATS[kept]
    return "int32" if kept in _INT32 else "int64" if kept in _INT64 else ""


def has_stamps(text: str) -> bool:
    """Whether a source's kernels take the clock's hooks (kernels/*/stamp.h)."""
    return "STAMP_PARAMETER" in text


def without_stamps(text: str) -> str:
    """A kernel file's text without the clock's hooks (kernels/*/stamp.h): the code a
    build without ``STAMP`` compiles, since the hooks are then nothing."""
    return _HOOKS.sub("", text)


# A comment, or (``_CODE_SKIPS``) a string or character literal. Each alternative ends
# where it can: a comment not closed runs to the end of the text, a literal not closed to
# the end of its line, so that a match is never tried again from inside what one failed
# to match (one pass over the text, however many ``/*`` it holds).
_COMMENTS = r"//[^\n]*|/\*.*?(?:\*/|\Z)"
_COMMENT = re.compile(_COMMENTS, re.DOTALL)
_CODE_SKIPS = re.compile(rf"{_COMMENTS}|\"(?:\\.|[^\"\\\n])*\"?|'(?:\\.|[^'\\\n])*'?", re.DOTALL)


def _comments_out(text: str) -> str:
    """``text`` with its comments as blanks and its literals as they are: a ``"/*"`` in a
    string opens no comment, so the ``#include`` after it is seen (as the compiler sees it)."""
    return _CODE_SKIPS.sub(lambda m: m.group(0) if m.group(0)[0] in "\"'" else _blank(m), text)


def blank_comments(text: str) -> str:
    """``text`` with its comments as blanks, line breaks kept (offsets keep their lines)."""
    return _COMMENT.sub(_blank, text)


def code_lines(text: str) -> str:
    """A kernel file's code as a build without ``STAMP`` compiles it: no comments, no
    clock hooks, each line's spacing collapsed and blank lines left out (line breaks kept:
    they end a preprocessor line). What a digest of a kernel is taken of, so that editing
    a comment does not make a tuned choice stale."""
    lines = (" ".join(line.split()) for line in blank_comments(without_stamps(text)).splitlines())
    return "\n".join(line for line in lines if line)


_RETURN = re.compile(r"\breturn\s*;")
_AFTER = re.compile(r"\s*([{;])")  # what follows a parameter list: a body, or not
_BRACE = re.compile(r"[{}]")


def with_hooks(text: str) -> str:
    """A kernel file written without the clock's hooks, with them: what a stamped build
    of a user's kernels compiles. The include comes first with ``#line 1`` after it, and
    each hook on the line it belongs to, so that a compiler's line numbers are the
    file's. Each kernel takes ``STAMP_PARAMETER`` after its last parameter, enters as its
    body opens, and exits at each ``return;`` (``STAMP_RETURN``) and as its body closes. A file with
    the hooks already (the shipped ones) is returned as it is."""
    if has_stamps(text):
        return text
    code = _CODE_SKIPS.sub(_blank, text)  # same offsets, no braces in comments or strings
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement), in order
    body_end = -1
    for match in _DECLARATION.finditer(code):
        close = match.end() - 1  # the parameter list's ")"
        after = _AFTER.match(code, close + 1)
        if match.start() < body_end or after is None or after.group(1) == ";":
            continue  # inside a kernel's body, not a definition, or without a body
        opening = after.end() - 1
        body_end = _matching_brace(code, opening)
        edits.append((close, close, " STAMP_PARAMETER"))
        edits.append((opening + 1, opening + 1, " STAMP_ENTER;"))
        for ret in _RETURN.finditer(code, opening, body_end):
            edits.append((ret.start(), ret.end(), "STAMP_RETURN;"))
        edits.append((body_end, body_end, "STAMP_EXIT; "))
    pieces, position = [], 0
    for start, stop, replacement in edits:  # in order, none overlapping
        pieces += [text[position:start], replacement]
        position = stop
    pieces.append(text[position:])
    return HOOKS_PREFIX + "".join(pieces)


def _matching_brace(code: str, opening: int) -> int:
    """The offset of the ``}`` that closes the ``{`` at ``opening``."""
    depth = 0
    for brace in _BRACE.finditer(code, opening):
        depth += 1 if brace.group() == "{" else -1
        if depth == 0:
            return brace.start()
    raise ValueError("a kernel's body is not closed")

"""Kernel sources as text: read safely, their kernels and parameters found, the clock's
hooks taken out or put in.

The kernels' declarations are read from the text, in either language and as people
write them (``__kernel void f(...)``, ``extern "C" __global__ __launch_bounds__(256)
void f(...)``, attributes, comments): a launch names its arguments, and the
declaration orders them.
"""

from __future__ import annotations

import re
from pathlib import Path

from xbackend.errors import XBackendError

SUFFIXES = {"cuda": ".cu", "opencl": ".cl"}
LANGUAGES = tuple(SUFFIXES)

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_PARENS = r"\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)"  # balanced, three deep
_DECLARATION = re.compile(
    r"(?:\b__kernel\b|\bkernel\b|\b__global__\b)"  # what makes a function a kernel
    rf"(?:\s+(?:__attribute__\s*{_PARENS}|__launch_bounds__\s*{_PARENS}|\w+))*?"
    rf"\s+void\s+(?:__launch_bounds__\s*{_PARENS}\s*)?(\w+)\s*\(([^)]*)\)"
)
# The clock's hooks (kernels/*/stamp.h), as the kernel files write them: the include,
# the parameter macro after a kernel's last parameter, a line at its start and at its end.
_HOOKS = re.compile(
    r'^#include "stamp\.h"\n| STAMP_PARAMETER(?=\))|^[ \t]*STAMP_(?:ENTER|EXIT);\n', re.MULTILINE
)
STAMP_PARAMETERS = ("stamps", "stamp_slot")

Parameters = tuple[tuple[str, str], ...]  # (name, the words before it), in order


def read_source(path: Path) -> str:
    """The text of a kernel file. A file that is not UTF-8 text (a folder, a binary, NUL
    bytes) is an ``XBackendError`` naming it, never a driver's confusion."""
    try:
        if not path.is_file():
            what = "a folder" if path.is_dir() else "missing or not a regular file"
            raise XBackendError(f"the kernel file {path} is {what}")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise XBackendError(f"cannot read the kernel file {path} as UTF-8 text: {error}") from error
    if "\x00" in text:
        raise XBackendError(f"the kernel file {path} holds NUL bytes: it is not source text")
    return text


def _blank(match: re.Match[str]) -> str:
    """A comment as blanks, its line breaks kept, so offsets keep their line numbers."""
    return re.sub(r"[^\n]", " ", match.group(0))


def kernels_of(text: str) -> dict[str, tuple[Parameters, int]]:
    """Each kernel a source declares, with its parameters and the line it starts on."""
    code = _COMMENT.sub(_blank, without_stamps(text))
    found = {}
    for match in _DECLARATION.finditer(code):
        name, params = match.group(1), match.group(2).strip()
        words = [param.replace("*", "* ").replace("&", "& ").split() for param in params.split(",")]
        declared = tuple((param[-1], " ".join(param[:-1])) for param in words if param)
        if params in ("", "void"):
            declared = ()
        found[name] = (declared, code.count("\n", 0, match.start(1)) + 1)
    return found


def has_stamps(text: str) -> bool:
    """Whether a source's kernels take the clock's hooks (kernels/*/stamp.h)."""
    return "STAMP_PARAMETER" in text


def without_stamps(text: str) -> str:
    """A kernel file's text without the clock's hooks (kernels/*/stamp.h): the code a
    build without ``STAMP`` compiles, since the hooks are then nothing."""
    return _HOOKS.sub("", text)


_CODE_SKIPS = re.compile(
    r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL
)
_RETURN = re.compile(r"\breturn\s*;")


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
    for match in _DECLARATION.finditer(code):
        close = match.end() - 1  # the parameter list's ")"
        if code[close + 1 :].lstrip().startswith(";"):
            continue  # a declaration without a body: nothing to stamp
        opening = code.index("{", close)
        end = _matching_brace(code, opening)
        edits.append((close, close, " STAMP_PARAMETER"))
        edits.append((opening + 1, opening + 1, " STAMP_ENTER;"))
        for ret in _RETURN.finditer(code, opening, end):
            edits.append((ret.start(), ret.end(), "STAMP_RETURN;"))
        edits.append((end, end, "STAMP_EXIT; "))
    for start, stop, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[stop:]
    return f'#include "stamp.h"\n#line 1\n{text}'


def _matching_brace(code: str, opening: int) -> int:
    """The offset of the ``}`` that closes the ``{`` at ``opening``."""
    depth = 0
    for offset in range(opening, len(code)):
        depth += {"{": 1, "}": -1}.get(code[offset], 0)
        if depth == 0:
            return offset
    raise ValueError("a kernel's body is not closed")

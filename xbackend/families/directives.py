"""What a kernel file's preprocessor directives decide before any build: lines joined
where a backslash ends them, the code under ``#if 0`` left out, each ``#include`` in the
spellings a compiler reads, and the ``#pragma pack`` a struct is laid out under.

The declarations a launch is bound by are read from the text (``sources.py``), not from a
compiler's output: a declaration under ``#if 0`` after the real one must not replace
it. A conditional whose value is a number (``#if 0``, ``#elif 1``) is decided here; one
that names a macro (``#ifdef ASYNC``) depends on the build, and both of its branches stay
(a kernel declared otherwise in each is refused as ambiguous: ``sources.declarations_of``).
"""

from __future__ import annotations

import dataclasses
import re

# A directive, as a compiler reads it: ``#`` or the digraph ``%:`` (or the trigraph
# ``??=``), then its name. Spaces may stand on either side of the ``#``.
_DIRECTIVE = re.compile(r"^[ \t]*(?:#|%:|\?\?=)[ \t]*([A-Za-z_]\w*)(.*)$", re.MULTILINE)
_NUMBER = re.compile(r"(?:0[xX][0-9a-fA-F]+|\d+)[uUlL]*")
# The directives that read a file: ``#include`` and the forms GCC and clang take as one
# (``#include_next``, ``#import``) or that read a file's bytes (``#embed``).
INCLUDES = ("include", "include_next", "import", "embed")


def spliced(text: str) -> str:
    """``text`` with each backslash-newline taken out, as a compiler's second phase does;
    the line breaks taken out are put back after the line they joined, so that every
    line keeps its number."""
    if "\\\n" not in text and "\\\r\n" not in text:
        return text
    lines: list[str] = []
    joined: list[str] = []  # the pieces of a logical line so far, one per physical line
    for line in text.split("\n"):
        stripped = line[:-1] if line.endswith("\r") else line
        if stripped.endswith("\\"):
            joined.append(stripped[:-1])
            continue
        lines.append("".join(joined) + line + "\n" * len(joined))
        joined = []
    if joined:
        lines.append("".join(joined) + "\n" * (len(joined) - 1))
    return "\n".join(lines)


def _number(condition: str) -> int | None:
    """The value of a condition that is a number (``0``, ``(1)``, ``!0``), or None where it
    names anything (a macro, ``defined``): the build decides those."""
    text = condition.strip()
    negated = False
    while text.startswith(("!", "(")):
        if text[0] == "!":
            negated, text = not negated, text[1:].strip()
        elif text.endswith(")"):
            text = text[1:-1].strip()
        else:
            return None
    if not _NUMBER.fullmatch(text):
        return None
    digits = text.rstrip("uUlL")
    digits = digits[2:] if digits[:2] in ("0x", "0X") else digits
    return int((digits.strip("0") != "") != negated)


@dataclasses.dataclass
class _Branch:
    """One ``#if`` ... ``#endif``: whether the lines now read are compiled ("live"),
    never ("dead") or as the build decides ("maybe"), whether a branch before was surely
    (``taken``) or maybe taken, and whether an ``#if`` around it is dead (``within``)."""

    within: bool
    state: str = "maybe"
    taken: bool = False
    maybe: bool = False

    def enter(self, value: int | None) -> None:
        if self.taken or value == 0:
            self.state = "dead"
        elif value is None:
            self.state, self.maybe = "maybe", True
        else:  # true: the branches after it are dead, this one live unless one before may be
            self.state, self.taken = "maybe" if self.maybe else "live", True

    @property
    def dead(self) -> bool:
        return self.within or self.state == "dead"


_DEFINED = re.compile(r"(!?)\s*defined\s*(?:\(\s*(\w+)\s*\)|(\w+))")


def _condition(name: str, rest: str, defined: frozenset[str]) -> int | None:
    """The value of ``#if``/``#elif rest`` (or ``#ifdef``, ``#ifndef``...) where it is
    known before the build: a number, or whether a macro every build defines is defined
    (``defined``: the build options of every variant); None otherwise."""
    if name in ("if", "elif"):
        asked = _DEFINED.fullmatch(rest.strip())
        if asked is None:
            return _number(rest)
        negated, macro = asked.group(1) == "!", asked.group(2) or asked.group(3)
        return (0 if negated else 1) if macro in defined else None
    macro = rest.strip()
    if macro not in defined:
        return None
    return 1 if name in ("ifdef", "elifdef") else 0


def live(code: str, defined: frozenset[str] = frozenset()) -> str:
    """``code`` (spliced, its comments blanked) with the lines no build compiles blanked,
    line breaks kept: those under a conditional whose value is 0, and the branches after
    one whose value is a number other than 0; ``#ifdef X`` (``defined(X)``) is true and
    ``#ifndef X`` false for a macro X of ``defined`` (every build defines it). Any other
    conditional on a macro keeps all its branches."""
    if "#" not in code and "%:" not in code and "??=" not in code:
        return code
    undone = {m.group(2).strip() for m in _DIRECTIVE.finditer(code) if m.group(1) == "undef"}
    defined = defined - undone  # a macro the file may #undef is the build's no longer
    lines = code.split("\n")
    stack: list[_Branch] = []
    for number, line in enumerate(lines):
        found = _DIRECTIVE.match(line)
        dead = bool(stack) and stack[-1].dead
        name, rest = found.group(1, 2) if found else ("", "")
        if name in ("if", "ifdef", "ifndef"):
            stack.append(_Branch(dead))
            stack[-1].enter(_condition(name, rest, defined))
        elif name in ("elif", "elifdef", "elifndef") and stack:
            stack[-1].enter(_condition(name, rest, defined))
        elif name == "else" and stack:
            stack[-1].enter(1)
        elif name == "endif" and stack:
            stack.pop()
        if dead or (stack and stack[-1].dead):
            lines[number] = " " * len(line)
    return "\n".join(lines)


def includes(code: str) -> list[tuple[int, str, str]]:
    """Each directive of ``code`` (spliced, its comments blanked) that reads a file: its
    line, its name (``include``, ``include_next``...) and what it names, as written."""
    found = []
    line, counted = 1, 0  # lines counted as the matches come, once over the text
    for match in _DIRECTIVE.finditer(code):
        if match.group(1) in INCLUDES:
            line, counted = line + code.count("\n", counted, match.start()), match.start()
            found.append((line, match.group(1), match.group(2).strip()))
    return found


# ``#pragma pack``, as GCC and nvcc read it: ``pack(N)``, ``pack()``, ``pack(push)``,
# ``pack(push, N)`` and ``pack(pop)``; N a power of two up to 16 (0: natural alignment).
_PACK = re.compile(r"^[ \t]*(?:#|%:|\?\?=)[ \t]*pragma[ \t]+pack\b(.*)$", re.MULTILINE)
_PACK_ARGUMENTS = re.compile(r"\(\s*(?:push\s*(?:,\s*(\d+)\s*)?|(pop)\s*|(\d+)\s*)?\)")
_PRAGMA_OPERATOR = re.compile(r"\b(?:_Pragma|__pragma)\s*\(")
_FOLLOWED = "pack(N), pack(), pack(push), pack(push, N) and pack(pop), N 1, 2, 4, 8 or 16"


def packs(code: str) -> list[tuple[int, int]]:
    """Each ``#pragma pack`` of ``code`` (spliced, comments blanked, dead code blanked):
    where it is, and the packing in effect after it (0: natural alignment). A form not
    followed (``pack(show)``, a packing named by an identifier, ``_Pragma``) is an
    ``ValueError`` naming its line, never a struct laid out otherwise than nvcc does."""
    found: list[tuple[int, int]] = []
    operator = _PRAGMA_OPERATOR.search(code)
    if operator:
        line = code.count("\n", 0, operator.start()) + 1
        raise ValueError(
            f"line {line}: {operator.group(0).rstrip('(').strip()}(...): xbackend reads a "
            "struct's layout from #pragma directives alone; write it as #pragma"
        )
    stack: list[int] = []
    current, line, counted = 0, 1, 0  # lines counted as the matches come, once over the text
    for match in _PACK.finditer(code):
        line, counted = line + code.count("\n", counted, match.start()), match.start()
        given = _PACK_ARGUMENTS.fullmatch(match.group(1).strip())
        if given is None:
            raise ValueError(
                f"line {line}: #pragma pack{match.group(1).rstrip()}: xbackend lays out "
                f"struct arguments under {_FOLLOWED}"
            )
        pushed, popped, value = given.groups()
        if "push" in match.group(1):
            stack.append(current)
            current = int(pushed) if pushed else current
        elif popped:
            current = stack.pop() if stack else 0
        else:
            current = int(value) if value else 0
        if current not in (0, 1, 2, 4, 8, 16):
            raise ValueError(f"line {line}: #pragma pack of {current}: {_FOLLOWED}")
        found.append((match.start(), current))
    return found

"""The small arithmetic a family manifest writes its sizes and rules in.

``"TILE / 8"``, ``"2 * BK * TILE"``, ``"THREADS % TILE == 0 and TM % 4 == 0"``: integers,
names the launch knows (TILE, TM, TN, THREADS and the family's constants), the four
operations with ``/`` as exact division, ``%``, comparisons, ``and``, ``or``, ``not``,
parentheses and three functions: ``cdiv(a, b)`` (division rounded up: the groups that
cover a size), ``min`` and ``max``. Nothing else parses: a manifest is data, and is never
run as Python. An expression is at most ``MAX_LENGTH`` characters and ``MAX_DEPTH``
operations deep, so that neither the parser nor the evaluator (which recurses) meets
Python's recursion limit.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from typing import Any

from xbackend.errors import XBackendError

_BINARY: dict[type[ast.operator], Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_COMPARE: dict[type[ast.cmpop], Callable[[int, int], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_FUNCTIONS: dict[str, Callable[[int, int], int]] = {
    "cdiv": lambda a, b: -(-a // b),
    "min": min,
    "max": max,
}


# Far above any real size or rule (the shipped ones are under 60 characters, 4 deep).
MAX_LENGTH = 1000
MAX_DEPTH = 100


class ExpressionError(XBackendError, ValueError):
    """An expression that does not parse, names what is not known, or divides unevenly."""


def parse(text: str) -> ast.expr:
    """``text`` parsed and checked to use only what this module evaluates."""
    if len(text) > MAX_LENGTH:
        raise ExpressionError(
            f"{text[:40]!r}...: an expression of {len(text)} characters (at most {MAX_LENGTH})"
        )
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as error:
        raise ExpressionError(f"{text!r} is not an expression: {error.msg}") from None
    except (RecursionError, MemoryError):  # nested past what the parser takes
        raise ExpressionError(f"{text[:40]!r}...: nested too deeply") from None
    if _depth(tree) > MAX_DEPTH:
        raise ExpressionError(
            f"{text[:40]!r}...: nested more than {MAX_DEPTH} operations deep "
            "(write a constant for a long product)"
        )
    for node in ast.walk(tree):
        allowed = (
            ast.BinOp, ast.BoolOp, ast.Compare, ast.UnaryOp, ast.Name, ast.Constant,
            ast.Load, ast.And, ast.Or, ast.Not, ast.USub, ast.Div, ast.Call, *_BINARY,
            *_COMPARE,
        )  # fmt: skip
        if not isinstance(node, allowed):
            raise ExpressionError(f"{text!r}: {type(node).__name__} is not allowed here")
        if isinstance(node, ast.Call) and not _known_call(node):
            raise ExpressionError(
                f"{text!r}: the functions are {', '.join(f'{name}(a, b)' for name in _FUNCTIONS)}"
            )
        if isinstance(node, ast.Constant) and type(node.value) is not int:
            raise ExpressionError(f"{text!r}: only integers, not {node.value!r}")
    return tree


def _known_call(node: ast.Call) -> bool:
    """Whether ``node`` calls one of the functions by name, with two arguments."""
    named = isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS
    return named and len(node.args) == 2 and not node.keywords


def _depth(tree: ast.AST) -> int:
    """How deep ``tree`` nests, counted without recursing (as deep as it may be)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack += [(child, depth + 1) for child in ast.iter_child_nodes(node)]
    return deepest


def names(text: str) -> set[str]:
    """The names ``text`` uses (its functions' names aside)."""
    tree = parse(text)
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in called}


def evaluate(text: str | int, values: Mapping[str, int]) -> Any:
    """The value of ``text`` (an int is itself) with ``values`` for its names."""
    if isinstance(text, int):
        return text
    return _value(parse(text), values, text)


def _value(node: ast.expr, values: Mapping[str, int], text: str) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in values:
            raise ExpressionError(f"{text!r}: {node.id} is not known (known: {', '.join(values)})")
        return values[node.id]
    if isinstance(node, ast.UnaryOp):
        inner = _value(node.operand, values, text)
        return not inner if isinstance(node.op, ast.Not) else -inner
    if isinstance(node, ast.BoolOp):
        found = [_value(value, values, text) for value in node.values]
        return all(found) if isinstance(node.op, ast.And) else any(found)
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name)
        left, right = (_value(argument, values, text) for argument in node.args)
        if node.func.id == "cdiv" and right == 0:
            raise ExpressionError(f"{text!r}: division by zero")
        return _FUNCTIONS[node.func.id](left, right)
    if isinstance(node, ast.Compare):
        left = _value(node.left, values, text)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = _value(right_node, values, text)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    assert isinstance(node, ast.BinOp)
    left, right = _value(node.left, values, text), _value(node.right, values, text)
    if isinstance(node.op, ast.Div | ast.FloorDiv | ast.Mod) and right == 0:
        raise ExpressionError(f"{text!r}: division by zero")
    if isinstance(node.op, ast.Div):  # sizes divide exactly, or the rule is broken
        if left % right:
            raise ExpressionError(f"{text!r}: {left} / {right} is not a whole number")
        return left // right
    return _BINARY[type(node.op)](left, right)

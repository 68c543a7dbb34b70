"""Tiny, safe arithmetic for profile files: rates, knobs and metrics written as expressions.

Profiles say `rate = "mailboxes * iops_per_mailbox"` or `metric = "floor(iops('db') /
iops_per_mailbox)"`. Only numbers, named scale knobs, + - * / ** // %, parentheses and the
functions a caller provides are allowed; anything else is a clear error, never `eval`.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping

UNITS = {"KiB": 1024.0, "MiB": 1024.0**2, "GiB": 1024.0**3, "KB": 1e3, "MB": 1e6, "GB": 1e9}
_BINOPS: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_BASE_FUNCS: dict[str, Callable[..., float]] = {
    "floor": math.floor,
    "ceil": math.ceil,
    "min": min,
    "max": max,
    "round": round,
}


class ExprError(ValueError):
    """An expression that cannot be evaluated; the message says why."""


def names_in(text: str) -> set[str]:
    """Variable names an expression refers to (not function names)."""
    tree = _parse(text)
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in called}


def evaluate(
    text: str | int | float,
    variables: Mapping[str, float],
    functions: Mapping[str, Callable[..., float]] | None = None,
) -> float:
    """Value of `text` with the given variables (plus units like MiB) and functions."""
    if isinstance(text, bool):
        raise ExprError(f"expected a number or expression, got {text!r}")
    if isinstance(text, int | float):
        return float(text)
    funcs = {**_BASE_FUNCS, **(functions or {})}
    env = {**UNITS, **variables}

    def ev(node: ast.AST) -> float | str:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env:
                known = ", ".join(sorted(variables)) or "none"
                raise ExprError(f"unknown name '{node.id}' (known: {known})")
            return env[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            left, right = ev(node.left), ev(node.right)
            try:
                return _BINOPS[type(node.op)](float(left), float(right))
            except ZeroDivisionError as e:
                raise ExprError("division by zero") from e
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            v = float(ev(node.operand))
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            if node.func.id not in funcs:
                raise ExprError(
                    f"unknown function '{node.func.id}' (allowed: {', '.join(sorted(funcs))})"
                )
            return funcs[node.func.id](*[ev(a) for a in node.args])
        raise ExprError(
            f"'{ast.unparse(node)}' is not allowed (only arithmetic on numbers and names)"
        )

    value = ev(_parse(text))
    if isinstance(value, str):
        raise ExprError(f"expression {text!r} is a string, not a number")
    return float(value)


def _parse(text: str) -> ast.Expression:
    try:
        return ast.parse(str(text).strip(), mode="eval")
    except SyntaxError as e:
        raise ExprError(f"cannot parse expression {text!r}") from e

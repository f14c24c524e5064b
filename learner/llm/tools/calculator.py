"""``calc``: exact arithmetic on an expression, parsed with :mod:`ast` (never ``eval``).

Numbers, parentheses, ``+ - * / // % **`` and unary signs; results are exact (fractions), shown
as an integer when whole, else as a decimal rounded to 6 places. Size limits (expression
length, exponent, digits of any intermediate) keep a call from hanging the worker.

>>> Calculator()("47*83")
'3901'
>>> Calculator()("07*08")
'56'
>>> Calculator()("(1+2)/4")
'0.75'
>>> Calculator()("2**100000")
Traceback (most recent call last):
...
learner.llm.tools.base.ToolError: exponent 100000 is above the limit 64
"""

from __future__ import annotations

import ast
import operator
import re
from fractions import Fraction

from learner.llm.tools.base import TOOLS, Tool, ToolError

__all__ = ["Calculator", "calculate"]

_BIN = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UN = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def _eval(node: ast.AST, max_digits: int, max_exp: int) -> Fraction:
    if isinstance(node, ast.Expression):
        return _eval(node.body, max_digits, max_exp)
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
    ):
        return Fraction(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UN:
        return _UN[type(node.op)](_eval(node.operand, max_digits, max_exp))
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        a, b = _eval(node.left, max_digits, max_exp), _eval(node.right, max_digits, max_exp)
        if isinstance(node.op, ast.Pow):
            if b.denominator != 1 or abs(b) > max_exp:
                raise ToolError(
                    f"exponent {b} is above the limit {max_exp}"
                    if b.denominator == 1
                    else f"exponent {b} must be a whole number"
                )
        if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and b == 0:
            raise ToolError("division by zero")
        out = _BIN[type(node.op)](a, b)
        out = Fraction(out)
        if len(str(out.numerator)) + len(str(out.denominator)) > max_digits:
            raise ToolError(f"result has more than {max_digits} digits")
        return out
    raise ToolError(
        f"unsupported expression element {type(node).__name__}; use numbers, ( ), + - * / // % **"
    )


def calculate(
    expr: str, max_len: int = 200, max_digits: int = 200, max_exp: int = 64, width: int = 0
) -> str:
    """Exact value of ``expr`` as text (see the module doc); whole results are zero-padded to
    ``width`` digits (``width=4``: ``0056``), a fixed-width output a tiny model can copy by
    position."""
    expr = expr.strip().replace("^", "**").replace("×", "*").replace("x", "*")
    expr = re.sub(r"(?<![\d.])0+(?=\d)", "", expr)  # 07*08 is 7*8 (Python rejects leading zeros)
    if not expr:
        raise ToolError("empty expression")
    if len(expr) > max_len:
        raise ToolError(f"expression longer than {max_len} characters")
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as e:
        raise ToolError(f"cannot parse {expr!r}: {e.msg}") from None
    value = _eval(tree, max_digits, max_exp)
    if value.denominator == 1:
        return str(value.numerator).zfill(width) if value.numerator >= 0 else str(value.numerator)
    return f"{float(value):.6f}".rstrip("0").rstrip(".")


@TOOLS.register("calc")
class Calculator(Tool):
    def __init__(
        self, max_len: int = 200, max_digits: int = 200, max_exp: int = 64, width: int = 0
    ) -> None:
        self.max_len, self.max_digits, self.max_exp, self.width = (
            max_len,
            max_digits,
            max_exp,
            width,
        )

    def __call__(self, args: str) -> str:
        return calculate(args, self.max_len, self.max_digits, self.max_exp, self.width)

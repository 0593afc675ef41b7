"""vtrace's ``parseExpression``, evaluated safely.

The expression is parsed with :mod:`ast` and walked here: only numbers,
strings (as arguments), names, ``lib.symbol`` attributes, ``lib["name"]``
subscripts, arithmetic and calls of the helper functions vtrace's
expression namespace has (``poi``, ``mem``, ``ispoi``, ``mapbase``,
``maplen``, ``sym``, ``frame``, ``teb``, ``meta``) are allowed; nothing is
handed to ``eval``.  Names are looked up as vtrace does: registers of the
selected thread (sub-registers too), variables, library names, then
symbols.  ``/`` divides integers as ``//``.
"""
from __future__ import annotations

import ast
import operator
from typing import TYPE_CHECKING, Any, Callable, Dict

from .exc import PlatformException
from .symbols import FileSymbol, Symbol

if TYPE_CHECKING:  # pragma: no cover
    from .target import ExpressionTarget

_INDEX = getattr(ast, "Index", None)
MAX_BITS = 4096   # results past this many bits are refused (2**10**9 would hang)


class ExpressionFail(PlatformException):
    """An expression that does not evaluate (envi's exception name):
    ``pycode`` is the expression, ``exception`` the cause."""

    def __init__(self, pycode: str, exception: Exception) -> None:
        super().__init__("ExpressionFail: %r is not a valid expression in this context (%s)" %
                         (pycode, exception))
        self.pycode = pycode
        self.exception = exception


def _int(x: Any) -> int:
    if isinstance(x, bool):
        return int(x)
    if isinstance(x, (int, Symbol)):
        return int(x)
    raise TypeError("not a number: %r" % (x,))


def _div(a: int, b: int) -> int:
    return a // b


def _pow(a: int, b: int) -> int:
    if b < 0 or b * max(a.bit_length(), 1) > MAX_BITS:
        raise ValueError("%d ** %d is out of range" % (a, b))
    return a ** b


def _lshift(a: int, b: int) -> int:
    if b > MAX_BITS:
        raise ValueError("shift by %d is out of range" % b)
    return a << b


_BINOPS: Dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: _div, ast.FloorDiv: _div, ast.Mod: operator.mod, ast.Pow: _pow,
    ast.LShift: _lshift, ast.RShift: operator.rshift, ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_, ast.BitXor: operator.xor,
}
_UNOPS: Dict[type, Callable[[int], int]] = {
    ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert,
    ast.Not: lambda v: int(not v),
}


class _Evaluator:
    def __init__(self, snap: "ExpressionTarget") -> None:
        self.snap = snap
        self.funcs: Dict[str, Callable[..., Any]] = {
            "poi": snap.readMemoryPtr,
            "mem": snap.readMemory,
            "ispoi": snap.isValidPointer,
            "mapbase": lambda va: self._map(va)[0],
            "maplen": lambda va: self._map(va)[1],
            "sym": lambda name: snap.parseExpression(name),
            "frame": lambda i: snap.getStackTrace()[i][1],
            "teb": lambda tid=None: snap.getThreads()[snap.getMeta("ThreadId") if tid is None else tid],
            "meta": snap.getMeta,
        }
        self.ctx = snap.getRegisterContext()

    def _map(self, va: int):
        m = self.snap.getMemoryMap(va)
        if m is None:
            raise ValueError("0x%x: un-mapped address" % va)
        return m

    def name(self, name: str) -> Any:
        idx = self.ctx.getRegisterIndex(name)
        if idx is not None:
            return self.ctx.getRegister(idx)
        var = self.snap.getVariables().get(name)
        if isinstance(var, int):
            return var
        if name in self.funcs:
            return self.funcs[name]
        s = self.snap.getSymByName(name)
        if s is not None:
            return s
        raise NameError("unknown name %r (no register, variable, library or symbol)" % name)

    def eval(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return self.eval(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, str)):
            return node.value
        if isinstance(node, ast.Name):
            return self.name(node.id)
        if isinstance(node, ast.Attribute):
            base = self.eval(node.value)
            if isinstance(base, FileSymbol):
                s = base.getSymByName(node.attr)
                if s is None:
                    raise NameError("%s has no symbol %s" % (base.name, node.attr))
                return s
            raise TypeError("%r has no attribute %s" % (base, node.attr))
        if isinstance(node, ast.Subscript):
            base = self.eval(node.value)
            key = node.slice
            if _INDEX is not None and isinstance(key, _INDEX):  # Python 3.8 wraps it
                key = key.value  # type: ignore[attr-defined]
            k = self.eval(key)
            if isinstance(base, FileSymbol) and isinstance(k, str):
                return base[k]
            raise TypeError("only lib[\"symbol\"] can be subscripted")
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](_int(self.eval(node.left)), _int(self.eval(node.right)))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNOPS:
            return _UNOPS[type(node.op)](_int(self.eval(node.operand)))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            f = self.funcs.get(node.func.id)
            if f is None:
                raise NameError("no function %r" % node.func.id)
            args = [self.eval(a) for a in node.args]
            return f(*[a if isinstance(a, str) else _int(a) for a in args])
        raise TypeError("%s is not allowed in an expression" % type(node).__name__)


def parse_expression(snap: "ExpressionTarget", expression: str) -> int:
    """The integer value of expression (see the module's documentation)."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
        value = _Evaluator(snap).eval(tree)
        if isinstance(value, (bytes, bytearray)):
            return int.from_bytes(value, "little")
        return _int(value)
    except PlatformException as e:
        if isinstance(e, ExpressionFail):
            raise
        raise ExpressionFail(expression, e) from None
    except (SyntaxError, ValueError, TypeError, NameError, KeyError, IndexError, ZeroDivisionError,
            AttributeError, RecursionError) as e:
        raise ExpressionFail(expression, e) from None

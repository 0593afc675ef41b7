"""What the expression evaluator and the register contexts need of a
snapshot (snapshot.py's Snapshot has all of it), written down as protocols
so that expr.py and regctx.py depend on this description, not on the class
that uses them: typing only, nothing here runs."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Set

try:
    from typing import Protocol
except ImportError:  # pragma: no cover (Python 3.7)
    Protocol = object  # type: ignore


class RegisterStore(Protocol):
    """The registers a RegisterContext edits in place, and which threads'
    general or floating-point registers were changed since the load."""
    _regs: List[Dict[str, int]]
    _regs_dirty: Set[int]
    _fp_dirty: Set[int]


class ExpressionTarget(Protocol):
    """What an expression (``parseExpression``) reads: memory, symbols,
    registers, threads, the stack and the snapshot's meta values."""

    def getMeta(self, name: str, default: Any = None) -> Any: ...

    def getThreads(self) -> Dict[int, Any]: ...

    def getRegisterContext(self, threadid: Optional[int] = None) -> Any: ...

    def getStackTrace(self, threadid: Optional[int] = None) -> List[Any]: ...

    def getMemoryMap(self, va: int) -> Any: ...

    def getSymByName(self, name: str) -> Any: ...

    def getVariables(self) -> Dict[str, Any]: ...

    def isValidPointer(self, va: int) -> bool: ...

    def parseExpression(self, expression: str) -> int: ...

    def readMemory(self, va: int, size: int) -> bytes: ...

    def readMemoryPtr(self, va: int) -> int: ...

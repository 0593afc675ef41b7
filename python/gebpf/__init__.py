"""gebpf's files from Python: snapshots (ELF cores, under vivisect vtrace's
Trace/TraceSnapshot method names) and JSONL traces.  Standard library only;
it reads and writes the files gebpf writes and never runs gebpf.  See
docs/python.md."""
from .exc import FormatError, InvalidRegisterName, PlatformException, SegmentationViolation
from .expr import ExpressionFail
from .memory import MM_EXEC, MM_NONE, MM_READ, MM_SHARED, MM_WRITE
from .regctx import RegisterContext
from .snapshot import FD_FILE, FD_PIPE, FD_SOCKET, FD_UNKNOWN, Snapshot
from .symbols import FileSymbol, FunctionSymbol, Symbol
from .trace import Trace

__version__ = "0.2.0"
__all__ = ["Snapshot", "RegisterContext", "Trace", "PlatformException", "FormatError",
           "SegmentationViolation", "InvalidRegisterName", "ExpressionFail", "Symbol",
           "FunctionSymbol", "FileSymbol", "MM_NONE", "MM_READ", "MM_WRITE", "MM_EXEC",
           "MM_SHARED", "FD_UNKNOWN", "FD_FILE", "FD_SOCKET", "FD_PIPE"]

"""gebpf's files from Python: snapshots (ELF cores, vtrace's TraceSnapshot
method names) and JSONL traces.  Standard library only; it reads and writes
the files gebpf writes and never runs gebpf.  See docs/python.md."""
from .elfcore import FormatError
from .snapshot import (FD_FILE, FD_PIPE, FD_SOCKET, FD_UNKNOWN, MM_EXEC, MM_NONE, MM_READ,
                       MM_SHARED, MM_WRITE, InvalidRegisterName, RegisterContext,
                       SegmentationViolation, Snapshot)
from .trace import Trace

__version__ = "0.1.0"
__all__ = ["Snapshot", "RegisterContext", "Trace", "FormatError", "SegmentationViolation",
           "InvalidRegisterName", "MM_NONE", "MM_READ", "MM_WRITE", "MM_EXEC", "MM_SHARED",
           "FD_UNKNOWN", "FD_FILE", "FD_SOCKET", "FD_PIPE"]

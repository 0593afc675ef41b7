"""A gebpf snapshot as vivisect vtrace's ``TraceSnapshot``.

The method names are vtrace's (its ``Trace`` and ``TraceSnapshot``, envi's
memory and register helpers), so that a script written against a vtrace
trace runs on a gebpf snapshot; registers, memory, symbols and expressions
come from the mixins in :mod:`gebpf.regctx`, :mod:`gebpf.memory`,
:mod:`gebpf.symbols` and :mod:`gebpf.expr`::

    snap = gebpf.Snapshot.load("snap.core")
    for base, size, perms, path in snap.getMemoryMaps(): ...
    ctx = snap.getRegisterContext()
    data = snap.readMemory(ctx.getRegisterByName("rsp"), 64)
    snap.writeMemory(addr, b"\\x90")
    snap.saveToFile("edited.core")      # gdb, gebpf show/read/resume read it

The file format is docs/snapshot-format.md; this module reads and writes it
with the standard library only and never runs gebpf.
"""
from __future__ import annotations

import hashlib
import json
import mmap
import os
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

from . import elfcore, regs as R
from .exc import FormatError, PlatformException, SegmentationViolation
from .expr import parse_expression
from .memory import MM_EXEC, MM_READ, MM_SHARED, MM_WRITE, MemoryHelpers
from .regctx import RegisterContext, TraceRegisters
from .symbols import SymbolResolver


# vtrace's file descriptor types, as getFds() returns them.
FD_UNKNOWN, FD_FILE, FD_SOCKET, FD_PIPE = 0, 1, 2, 3

# Maps vtrace's Linux platform never reads (its "BadMaps" meta).
BAD_MAPS = ["[vvar]", "[vsyscall]", "[vvar_vclock]"]

MapTuple = Tuple[int, int, int, str]


def perms_to_mm(perms: str) -> int:
    """``"rw-p"`` -> MM_READ | MM_WRITE (MM_SHARED for ``s``)."""
    return (MM_READ if perms[0] == "r" else 0) | (MM_WRITE if perms[1] == "w" else 0) | \
        (MM_EXEC if perms[2] == "x" else 0) | (MM_SHARED if perms[3] == "s" else 0)


class Snapshot(TraceRegisters, MemoryHelpers, SymbolResolver):
    """A snapshot loaded from a gebpf ELF core (see :meth:`load`)."""

    def __init__(self, path: str, notes: List[elfcore.Note], doc: Dict[str, Any],
                 data: Optional[mmap.mmap], fobj: Any) -> None:
        self.path = path
        self._notes = notes
        self._doc = doc
        self._data = data
        self._fobj = fobj
        self._maps: List[MapTuple] = []
        self._mem: List[Dict[str, Any]] = list(doc["mem"])
        for base, size, perms, fname in doc["maps"]:
            self._maps.append((int(base, 16), int(size), perms_to_mm(perms), fname))
        self._perms: List[str] = [m[2] for m in doc["maps"]]
        self._edits: Dict[int, bytearray] = {}
        # Per thread: indexes of its NT_PRSTATUS / NT_FPREGSET / NT_X86_XSTATE notes.
        self._thread_notes: List[Dict[int, int]] = []
        for i, n in enumerate(notes):
            if n.type == R.NT_PRSTATUS and n.name == b"CORE":
                self._thread_notes.append({R.NT_PRSTATUS: i})
            elif self._thread_notes and n.type in (R.NT_FPREGSET, R.NT_X86_XSTATE):
                self._thread_notes[-1][n.type] = i
        if not self._thread_notes:
            raise FormatError("no NT_PRSTATUS note (no thread)")
        self._regs: List[Dict[str, int]] = []
        for tn in self._thread_notes:
            fp = notes[tn[R.NT_FPREGSET]].desc if R.NT_FPREGSET in tn else None
            xs = notes[tn[R.NT_X86_XSTATE]].desc if R.NT_X86_XSTATE in tn else None
            self._regs.append(R.thread_registers(notes[tn[R.NT_PRSTATUS]].desc, fp, xs))
        self._regs_dirty: Set[int] = set()
        self._fp_dirty: Set[int] = set()
        self._ctxs: Dict[int, RegisterContext] = {}
        self.localvars: Dict[str, Any] = dict(doc.get("vars", {}))
        self.metadata: Dict[str, Any] = self._vtrace_meta()
        self._find_libraries()

    def _vtrace_meta(self) -> Dict[str, Any]:
        """vtrace's metadata: the note's meta keys as they are, and vtrace's
        names (ThreadId: the thread that stopped, else the first)."""
        meta = dict(self._doc["meta"])
        tids = [t["tid"] for t in self._doc["threads"]]
        tid = meta.get("tid") if meta.get("tid") in tids else tids[0]
        with_bytes = {m[3] for i, m in enumerate(self._maps) if self._mem[i]["size"]}
        bad = list(BAD_MAPS)
        for i, (_b, _s, perms, name) in enumerate(self._maps):
            if perms & MM_READ and not self._mem[i]["size"] and name and name not in with_bytes \
                    and name not in bad:
                bad.append(name)
        meta.update({"Architecture": meta.get("architecture", "amd64"),
                     "Platform": meta.get("platform", "linux"), "ThreadId": tid,
                     "Pid": meta.get("pid"), "ExeName": self._doc["exe"], "BadMaps": bad})
        return meta

    # -- loading and saving -------------------------------------------------

    @classmethod
    def load(cls, path: str) -> "Snapshot":
        """Open a snapshot written by ``gebpf snap`` (or by :meth:`saveToFile`).
        Memory is read from the file on demand (it is mapped, not copied)."""
        f = open(path, "rb")
        try:
            size = os.fstat(f.fileno()).st_size
            notes, _segs = elfcore.read_core(f, size)
            js = [n for n in notes if n.name == b"GEBPF"]
            if not js:
                raise FormatError("no GEBPF note: not a gebpf snapshot")
            doc = json.loads(js[0].desc.decode("utf-8"))
            if doc.get("version") != 1:
                raise FormatError("snapshot version %r (this reads version 1)" % doc.get("version"))
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
            return cls(path, notes, doc, data, f)
        except (ValueError, KeyError, IndexError, TypeError) as e:
            f.close()
            if isinstance(e, FormatError):
                raise
            raise FormatError("%s: malformed GEBPF note: %s" % (path, e)) from None
        except BaseException:
            f.close()
            raise

    def close(self) -> None:
        """Release the file (the object is unusable afterwards)."""
        if self._data is not None:
            self._data.close()
            self._data = None
        self._fobj.close()

    def __enter__(self) -> "Snapshot":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _map_bytes(self, i: int) -> Optional[bytes]:
        if i in self._edits:
            return bytes(self._edits[i])
        m = self._mem[i]
        if not m["size"]:
            return None
        assert self._data is not None
        return self._data[m["offset"]:m["offset"] + m["size"]]

    def _image(self) -> Tuple[bytes, elfcore.Layout, List[Tuple[int, int, int, int, int]]]:
        """The notes bytes, layout and segments of the snapshot as it is now."""
        notes = list(self._notes)
        doc = dict(self._doc)
        doc["regs"] = [dict(r) for r in self._doc["regs"]]
        for t in sorted(self._regs_dirty):
            idx = self._thread_notes[t][R.NT_PRSTATUS]
            notes[idx] = elfcore.Note(notes[idx].name, notes[idx].type,
                                      R.encode_gprs(notes[idx].desc, self._regs[t]))
            for k in doc["regs"][t]:
                if k in self._regs[t]:
                    doc["regs"][t][k] = "0x%x" % self._regs[t][k]
        for t in sorted(self._fp_dirty):
            for ntype, enc in ((R.NT_FPREGSET, R.encode_fxsave), (R.NT_X86_XSTATE, R.encode_xstate)):
                idx = self._thread_notes[t].get(ntype)
                if idx is not None:
                    n = notes[idx]
                    notes[idx] = elfcore.Note(n.name, n.type, enc(n.desc, self._regs[t]))
        mem = [dict(m) for m in self._mem]
        for i in self._edits:
            mem[i]["sha256"] = hashlib.sha256(self._edits[i]).hexdigest()
        jpos = next(i for i, n in enumerate(notes) if n.name == b"GEBPF")
        jtype = notes[jpos].type
        data_off = -1
        lay = None
        while lay is None or lay.data_off != data_off:  # offsets are in the note: to a fixed point
            data_off = lay.data_off if lay else elfcore.PAGE
            off = data_off
            for m in mem:
                m["offset"] = off
                off += m["size"]
            doc["mem"] = mem
            text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
            notes[jpos] = elfcore.Note(b"GEBPF", jtype, text)
            nb = elfcore.build_notes(notes)
            lay = elfcore.layout(len(mem), len(nb))
        segs = [(base, size, mem[i]["offset"], mem[i]["size"], elfcore.perms_flags(self._perms[i]))
                for i, (base, size, _p, _f) in enumerate(self._maps)]
        return nb, lay, segs

    def saveToFile(self, path: str) -> None:
        """Write the snapshot, edits included (memory, registers), as a gebpf
        snapshot (the same layout as ``gebpf snap``'s: gdb, ``gebpf
        show``/``read``/``resume`` read it).  Unedited, the bytes are the
        loaded file's.  Written under a temporary name and renamed."""
        nb, lay, segs = self._image()
        elfcore.write_core(path, nb, lay, segs, self._map_bytes)

    def saveToFd(self, fd: Any) -> None:
        """Write the same bytes as saveToFile to fd: a binary file object
        (or a descriptor number), from its current position; zero pages are
        holes when it is a regular file, written out otherwise (a pipe)."""
        nb, lay, segs = self._image()
        if isinstance(fd, int):
            with os.fdopen(fd, "wb", closefd=False) as f:
                elfcore.write_core_to(f, nb, lay, segs, self._map_bytes)
        else:
            elfcore.write_core_to(fd, nb, lay, segs, self._map_bytes)

    # -- vtrace's TraceSnapshot surface ---------------------------------------

    def getMemoryMaps(self) -> List[MapTuple]:
        """``[(base, size, perms, file), ...]`` in address order; perms are
        envi's MM_* bits, file is ``""`` for anonymous memory."""
        return list(self._maps)

    def getMemoryMap(self, va: int) -> Optional[MapTuple]:
        """The map holding va, or None."""
        i = self._find(int(va)) if va is not None else None
        return None if i is None else self._maps[i]

    def _find(self, va: int) -> Optional[int]:
        lo, hi = 0, len(self._maps)
        while lo < hi:
            mid = (lo + hi) // 2
            base, size = self._maps[mid][0], self._maps[mid][1]
            if va < base:
                hi = mid
            elif va >= base + size:
                lo = mid + 1
            else:
                return mid
        return None

    def _span(self, va: int, size: int) -> Iterator[Tuple[int, int, int]]:
        """(map index, offset in it, length) pieces covering [va, va+size)."""
        done = 0
        while done < size:
            a = va + done
            i = self._find(a)
            if i is None:
                raise SegmentationViolation(a, "0x%x: not in any memory map of the snapshot" % a)
            if not self._mem[i]["size"]:
                raise SegmentationViolation(a, "0x%x: in %s map 0x%x whose bytes were not captured" % (
                    a, self._perms[i], self._maps[i][0]))
            off = a - self._maps[i][0]
            n = min(size - done, self._maps[i][1] - off)
            yield i, off, n
            done += n

    def readMemory(self, va: int, size: int) -> bytes:
        """size bytes at va, across adjacent maps (edits included; pages
        stored as holes read as zeros).  SegmentationViolation when a byte is
        in no map or in one without bytes."""
        va, size = int(va), int(size)
        out = bytearray()
        for i, off, n in self._span(va, size):
            if i in self._edits:
                out += self._edits[i][off:off + n]
            else:
                assert self._data is not None
                p = self._mem[i]["offset"] + off
                out += self._data[p:p + n]
        return bytes(out)

    def writeMemory(self, va: int, data: bytes) -> None:
        """Change the snapshot's memory (in this object; saveToFile keeps it)."""
        va = int(va)
        pieces = list(self._span(va, len(data)))  # check the whole range first
        done = 0
        for i, off, n in pieces:
            if i not in self._edits:
                self._edits[i] = bytearray(self._map_bytes(i) or b"")
            self._edits[i][off:off + n] = data[done:done + n]
            done += n

    def _search_buffer(self, address: int, size: int) -> Optional[Tuple[Any, int]]:
        """(buffer, offset of address in it) when [address, address+size)
        lies in one map with bytes: the file's mapping itself, not a copy."""
        i = self._find(address)
        if i is None or not self._mem[i]["size"] or address + size > self._maps[i][0] + self._maps[i][1]:
            return None
        off = address - self._maps[i][0]
        if i in self._edits:
            return self._edits[i], off
        assert self._data is not None
        return self._data, self._mem[i]["offset"] + off

    # -- threads ------------------------------------------------------------------

    def getThreads(self) -> Dict[int, int]:
        """``{tid: tid}``, as vtrace's Linux platform returns them."""
        return {t["tid"]: t["tid"] for t in self._doc["threads"]}

    def getThreadInfo(self) -> Dict[int, Dict[str, int]]:
        """``{tid: {"index", "tid", "signal"}}``: the note's thread entries."""
        return {t["tid"]: dict(t) for t in self._doc["threads"]}

    def getCurrentThread(self) -> int:
        """The selected thread's id (``getMeta("ThreadId")``)."""
        return self.metadata["ThreadId"]

    def selectThread(self, threadid: int) -> None:
        """Select the thread that the Trace-level register methods,
        getRegisterContext() and getStackTrace() use by default."""
        if threadid not in self.getThreads():
            raise PlatformException("ERROR: Invalid threadid chosen: %d" % threadid)
        self.setMeta("ThreadId", threadid)

    def isThreadSuspended(self, threadid: int) -> bool:
        """False: a snapshot's threads are all stopped alike."""
        return False

    def getCurrentSignal(self) -> Optional[int]:
        """The signal the selected thread stopped with (None for none)."""
        sig = self.getThreadInfo()[self.getCurrentThread()].get("signal")
        return sig or None

    def _index(self, tid: Optional[int]) -> int:
        if tid is None:
            tid = self.metadata["ThreadId"]
        for t in self._doc["threads"]:
            if t["tid"] == tid:
                return int(t["index"])
        raise PlatformException("no thread %r in the snapshot" % (tid,))

    def getRegisterContext(self, threadid: Optional[int] = None) -> RegisterContext:
        """Registers of a thread (default: the selected one)."""
        i = self._index(threadid)
        if i not in self._ctxs:
            self._ctxs[i] = RegisterContext(self, i)
        return self._ctxs[i]

    def getStackTrace(self, threadid: Optional[int] = None) -> List[Tuple[int, int]]:
        """``[(pc, sp), ...]``, innermost first, as gebpf unwound it (CFI)."""
        return [(int(f["pc"], 16), int(f["sp"], 16)) for f in self._doc["stacktrace"][self._index(threadid)]]

    def getStackSymbols(self, threadid: Optional[int] = None) -> List[Optional[str]]:
        """The frames' symbols (``"main+0x1c"``, or None), same order."""
        return [f["symbol"] for f in self._doc["stacktrace"][self._index(threadid)]]

    # -- the rest of the process ---------------------------------------------------

    def getFds(self) -> List[Tuple[int, int, str]]:
        """``[(fd, type, name), ...]``: type is FD_FILE, FD_SOCKET, FD_PIPE or
        FD_UNKNOWN; name is the /proc/PID/fd link."""
        out = []
        for f in self._doc["fds"]:
            t = f["target"]
            kind = FD_FILE if t.startswith("/") else FD_SOCKET if t.startswith("socket:") else \
                FD_PIPE if t.startswith("pipe:") else FD_UNKNOWN
            out.append((f["fd"], kind, t))
        return out

    def getFdInfo(self) -> List[Dict[str, Any]]:
        """The note's fds: ``{"fd", "target", "flags", "offset"}`` each."""
        return [dict(f) for f in self._doc["fds"]]

    def getExe(self) -> str:
        """Path of the executable."""
        return self._doc["exe"]

    def getPid(self) -> int:
        """The process id (as the process saw it)."""
        return int(self._doc["meta"]["pid"])

    # -- metadata and variables (in this object; saveToFile keeps the note's) ------

    def getMeta(self, name: str, default: Any = None) -> Any:
        """A metadata value: the note's meta keys (pid, tid, vt, point,
        kernel, architecture, platform), vtrace's (Architecture, Platform,
        ThreadId, Pid, ExeName, BadMaps, LibraryBases, LibraryPaths), what
        setMeta set, else a var of the note.  As vtrace, a default that is
        not None is stored under a missing name."""
        if name in self.metadata:
            return self.metadata[name]
        if name in self.localvars:
            return self.localvars[name]
        if default is not None:
            self.metadata[name] = default
        return default

    def setMeta(self, name: str, value: Any) -> None:
        """Set a metadata value."""
        self.metadata[name] = value

    def hasMeta(self, name: str) -> bool:
        """Whether getMeta has a value for name (not counting defaults)."""
        return name in self.metadata

    def getVariable(self, name: str) -> Any:
        """A variable (the note's vars, what setVariable set)."""
        return self.localvars.get(name)

    def setVariable(self, name: str, value: Any) -> None:
        """Set a variable."""
        self.localvars[name] = value

    def getVariables(self) -> Dict[str, Any]:
        """Every variable."""
        return dict(self.localvars)

    def parseExpression(self, expression: str) -> int:
        """The value of an expression of registers, symbols, numbers and
        arithmetic (``"rsp + 8"``, ``"libc.malloc + 0x10"``, ``"poi(rsp)"``),
        evaluated without eval (see gebpf.expr); ExpressionFail otherwise."""
        return parse_expression(self, expression)

    # -- vtrace's state queries: a snapshot is attached and stopped -----------------

    def isAttached(self) -> bool:
        """True."""
        return True

    def isRunning(self) -> bool:
        """False."""
        return False

    def hasExited(self) -> bool:
        """False."""
        return False

    def requireNotRunning(self) -> None:
        """Nothing to check: a snapshot never runs."""

    def requireAttached(self) -> None:
        """Nothing to check: a snapshot is always attached."""

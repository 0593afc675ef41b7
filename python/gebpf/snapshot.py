"""A gebpf snapshot as vivisect vtrace's ``TraceSnapshot``.

The method names are vtrace's, so that a script written against a vtrace
snapshot runs on a gebpf one::

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

# envi.memory's permission bits, as vtrace's getMemoryMaps() returns them.
MM_NONE = 0x0
MM_EXEC = 0x1
MM_WRITE = 0x2
MM_READ = 0x4
MM_SHARED = 0x8

# vtrace's file descriptor types, as getFds() returns them.
FD_UNKNOWN, FD_FILE, FD_SOCKET, FD_PIPE = 0, 1, 2, 3

# vtrace's meta names -> the note's "meta" keys.
_META_ALIASES = {"Architecture": "architecture", "Platform": "platform", "ThreadId": "tid",
                 "Pid": "pid", "ExeName": "exe"}

MapTuple = Tuple[int, int, int, str]


class SegmentationViolation(Exception):
    """An access to an address that has no bytes in the snapshot: not in any
    map, or in a map whose bytes were not captured (PROT_NONE, [vvar], ...).
    Named after envi's exception of the same meaning; ``va`` is the address."""

    def __init__(self, va: int, msg: str) -> None:
        super().__init__(msg)
        self.va = va


class InvalidRegisterName(KeyError):
    """A register name the snapshot does not hold (vtrace's exception name)."""


def perms_to_mm(perms: str) -> int:
    """``"rw-p"`` -> MM_READ | MM_WRITE (MM_SHARED for ``s``)."""
    return (MM_READ if perms[0] == "r" else 0) | (MM_WRITE if perms[1] == "w" else 0) | \
        (MM_EXEC if perms[2] == "x" else 0) | (MM_SHARED if perms[3] == "s" else 0)


class RegisterContext:
    """One thread's registers, as vtrace's ``RegisterContext``."""

    def __init__(self, snap: "Snapshot", index: int) -> None:
        self._snap = snap
        self._index = index

    def getRegisters(self) -> Dict[str, int]:
        """Every register saved, by name: the general registers (with
        ``fs_base``/``gs_base``), x87/SSE state and the AVX/AVX-512 registers
        the CPU had (``xmm0``, ``ymm0``, ``zmm0``, ``k0``, ``mxcsr``, ...)."""
        return dict(self._snap._regs[self._index])

    def getRegisterByName(self, name: str) -> int:
        """One register's value; InvalidRegisterName if not saved."""
        try:
            return self._snap._regs[self._index][name]
        except KeyError:
            raise InvalidRegisterName(name) from None

    def setRegisterByName(self, name: str, value: int) -> None:
        """Change a general register (saved by saveToFile; ``gebpf resume``
        then starts with it).  Vector registers are read-only here."""
        if name not in R.GPR_NAMES:
            raise InvalidRegisterName("%s: only general registers can be set" % name)
        self._snap._regs[self._index][name] = value & 0xFFFFFFFFFFFFFFFF
        self._snap._regs_dirty.add(self._index)

    def getProgramCounter(self) -> int:
        """rip."""
        return self.getRegisterByName("rip")

    def getStackCounter(self) -> int:
        """rsp."""
        return self.getRegisterByName("rsp")


class Snapshot:
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
            raise elfcore.FormatError("no NT_PRSTATUS note (no thread)")
        self._regs: List[Dict[str, int]] = []
        for tn in self._thread_notes:
            fp = notes[tn[R.NT_FPREGSET]].desc if R.NT_FPREGSET in tn else None
            xs = notes[tn[R.NT_X86_XSTATE]].desc if R.NT_X86_XSTATE in tn else None
            self._regs.append(R.thread_registers(notes[tn[R.NT_PRSTATUS]].desc, fp, xs))
        self._regs_dirty: Set[int] = set()

    # -- loading and saving -------------------------------------------------

    @classmethod
    def load(cls, path: str) -> "Snapshot":
        """Open a snapshot written by ``gebpf snap`` (or by :meth:`saveToFile`).
        Memory is read from the file on demand (it is mapped, not copied)."""
        f = open(path, "rb")
        try:
            size = os.fstat(f.fileno()).st_size
            notes, _segs = elfcore.read_core(f, size)
            js = [n for n in notes if n.name == b"GEBPF" and n.type in (R.NT_GEBPF_JSON, R.NT_GEBPF_JSON_V1)]
            if not js:
                raise elfcore.FormatError("no GEBPF note: not a gebpf snapshot")
            doc = json.loads(js[0].desc.decode("utf-8"))
            if doc.get("version") != 1:
                raise elfcore.FormatError("snapshot version %r (this reads version 1)" % doc.get("version"))
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
            return cls(path, notes, doc, data, f)
        except (ValueError, KeyError, IndexError) as e:
            f.close()
            if isinstance(e, elfcore.FormatError):
                raise
            raise elfcore.FormatError("%s: malformed GEBPF note: %s" % (path, e)) from None
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

    def saveToFile(self, path: str) -> None:
        """Write the snapshot, edits included, as a gebpf snapshot (the same
        layout as ``gebpf snap``'s: gdb, ``gebpf show``/``read``/``resume``
        read it).  Unedited, the bytes are the loaded file's."""
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
        mem = [dict(m) for m in self._mem]
        for i in self._edits:
            mem[i]["sha256"] = hashlib.sha256(self._edits[i]).hexdigest()
        jpos = next(i for i, n in enumerate(notes) if n.name == b"GEBPF" and n.type in (R.NT_GEBPF_JSON, R.NT_GEBPF_JSON_V1))
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
            notes[jpos] = elfcore.Note(b"GEBPF", R.NT_GEBPF_JSON, text)
            nb = elfcore.build_notes(notes)
            lay = elfcore.layout(len(mem), len(nb))
        segs = [(base, size, mem[i]["offset"], mem[i]["size"], elfcore.perms_flags(self._perms[i]))
                for i, (base, size, _p, _f) in enumerate(self._maps)]
        elfcore.write_core(path, nb, lay, segs, self._map_bytes)

    # -- vtrace's TraceSnapshot surface ---------------------------------------

    def getMemoryMaps(self) -> List[MapTuple]:
        """``[(base, size, perms, file), ...]`` in address order; perms are
        envi's MM_* bits, file is ``""`` for anonymous memory."""
        return list(self._maps)

    def getMemoryMap(self, va: int) -> Optional[MapTuple]:
        """The map holding va, or None."""
        i = self._find(va)
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
        pieces = list(self._span(va, len(data)))  # check the whole range first
        done = 0
        for i, off, n in pieces:
            if i not in self._edits:
                self._edits[i] = bytearray(self._map_bytes(i) or b"")
            self._edits[i][off:off + n] = data[done:done + n]
            done += n

    def getThreads(self) -> Dict[int, Dict[str, int]]:
        """``{tid: {"index", "tid", "signal"}}`` (vtrace keys threads by tid)."""
        return {t["tid"]: dict(t) for t in self._doc["threads"]}

    def _index(self, tid: Optional[int]) -> int:
        if tid is None:
            tid = self._doc["meta"].get("tid") or self._doc["threads"][0]["tid"]
        for t in self._doc["threads"]:
            if t["tid"] == tid:
                return int(t["index"])
        raise KeyError("no thread %r in the snapshot" % tid)

    def getRegisterContext(self, tid: Optional[int] = None) -> RegisterContext:
        """Registers of thread tid (default: the thread that stopped, else
        the first)."""
        return RegisterContext(self, self._index(tid))

    def getStackTrace(self, tid: Optional[int] = None) -> List[Tuple[int, int]]:
        """``[(pc, sp), ...]``, innermost first, as gebpf unwound it (CFI)."""
        return [(int(f["pc"], 16), int(f["sp"], 16)) for f in self._doc["stacktrace"][self._index(tid)]]

    def getStackSymbols(self, tid: Optional[int] = None) -> List[Optional[str]]:
        """The frames' symbols (``"main+0x1c"``, or None), same order."""
        return [f["symbol"] for f in self._doc["stacktrace"][self._index(tid)]]

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

    def getMeta(self, key: str, default: Any = None) -> Any:
        """A meta value: the note's meta keys (pid, tid, vt, point, kernel,
        architecture, platform), vtrace's names (Architecture, Platform,
        ThreadId, Pid, ExeName) or a var."""
        meta = self._doc["meta"]
        k = _META_ALIASES.get(key, key)
        if k == "exe":
            return self._doc["exe"]
        if k in meta:
            return meta[k]
        return self._doc.get("vars", {}).get(key, default)

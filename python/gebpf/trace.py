"""A gebpf JSONL trace (docs/trace-format.md): a plain ``.jsonl`` file, a
zstd one (``.jsonl.zst``, recognised by its first bytes, whatever its name),
or a recording directory (``meta.json`` + ``blobs/trace.jsonl.zst`` or
``blobs/trace.jsonl``, from ``gebpf trace --out DIR``).

Records are read one line at a time (a zstd trace decompressed as it is
read, through libzstd.so.1), so a trace larger than memory can be walked; a
zstd trace cut short (a killed gebpf) gives its whole lines and sets
``truncated``.  The summary (the last line) is read from the end of the file
(a zstd trace: its last frame, found by the seek table)::

    tr = gebpf.Trace.open("rec")
    for rec in tr:                 # {"t": "exec", "vcpu": 0, "pc": "0x401000", "vt": 0}, ...
        ...
    tr.summary["insns"], tr.meta["exit_status"]

A trace taken with ``--values`` (docs/trace-format.md "Values") is also read
one instruction at a time, with its values and the register file::

    for st in tr.steps():          # Step(vt=0, vcpu=0, pc=0x401655, ...)
        st.written["st0"], st.reads[0].value, st.before["rsp"]
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterator, List, NamedTuple, Optional

from . import _zstd
from .snapshot import Snapshot


class Access(NamedTuple):
    """One memory access of a step: its address, size and value (the bytes
    as one little-endian integer; None where the trace has none)."""
    addr: int
    size: int
    value: Optional[int]


class Step(NamedTuple):
    """One instruction of a ``--values`` trace (:meth:`Trace.steps`)."""
    vt: int
    vcpu: int
    pc: int
    written: Dict[str, int]        # registers it wrote, their values after it
    reads: List[Access]
    writes: List[Access]
    before: Dict[str, int]         # the register file before it, as far as known


_VEC = {"xmm": 16, "ymm": 32, "zmm": 64}


def _apply(state: Dict[str, int], written: Dict[str, int]) -> None:
    """The registers an instruction wrote, into a register file: a vector
    register's narrower views follow it; its wider ones are no longer known
    (SSE keeps the upper bits, VEX zeroes them)."""
    for name, v in written.items():
        kind, num = name[:3], name[3:]
        if kind in _VEC and num.isdigit():
            for other, size in _VEC.items():
                if size < _VEC[kind]:
                    state[other + num] = v & ((1 << (8 * size)) - 1)
                elif size > _VEC[kind]:
                    state.pop(other + num, None)
        state[name] = v


class Trace:
    """One trace; see :meth:`open`."""

    def __init__(self, path: str, jsonl: str, meta: Optional[Dict[str, Any]]) -> None:
        self.path = path
        self.jsonl = jsonl
        self.meta = meta
        self._summary: Optional[Dict[str, Any]] = None
        try:
            with open(jsonl, "rb") as f:
                self.compressed = _zstd.is_zstd(f.read(4))
        except FileNotFoundError:  # (a recording whose trace is missing fails when read)
            self.compressed = jsonl.endswith(".zst")
        self.truncated = False  # a zstd trace whose last frame is cut (after iterating)

    @classmethod
    def open(cls, path: str) -> "Trace":
        """A trace file, or a recording directory (its ``meta.json`` names
        the trace blob)."""
        if os.path.isdir(path):
            with open(os.path.join(path, "meta.json"), encoding="utf-8") as f:
                meta = json.load(f)
            return cls(path, os.path.join(path, meta.get("trace_blob", "blobs/trace.jsonl")), meta)
        if not os.path.exists(path):
            raise FileNotFoundError(path)
        return cls(path, path, None)

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        """Every record in file order, the summary line last."""
        if self.compressed:
            with open(self.jsonl, "rb") as f:
                s = _zstd.Stream(f)
                for line in _zstd.lines(f, s):
                    if line.strip():
                        yield json.loads(line)
                self.truncated = s.truncated
            return
        with open(self.jsonl, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)

    def steps(self) -> Iterator[Step]:
        """The instructions of a ``--values`` trace in order, each with the
        registers it wrote, its accesses with their values, and the thread's
        register file before it (from the regs lines, which say what
        changed, and the instructions since).  A register the trace does not give at that point (after a
        syscall, until the next regs line names it: ``rax``) is absent from
        ``before``.  Raises ValueError on a trace without values."""
        state: Dict[int, Dict[str, int]] = {}
        cur: Optional[Step] = None
        for rec in self:
            t = rec.get("t")
            if t in ("read", "write") and cur is not None and rec.get("vt") == cur.vt:
                val = rec.get("val")
                acc = Access(int(rec["addr"], 16), rec["size"], int(val, 16) if val else None)
                (cur.reads if t == "read" else cur.writes).append(acc)
                continue
            if cur is not None:
                yield cur
                cur = None
            if t == "regs":  # the registers that changed (all of them the first time)
                state.setdefault(rec["vcpu"], {}).update(
                    {k: int(v, 16) for k, v in rec["regs"].items()})
            elif t == "exec":
                if "regs" not in rec:
                    raise ValueError("%s: not a --values trace (an exec line without regs)" % self.path)
                vcpu = rec["vcpu"]
                written = {k: int(v, 16) for k, v in rec["regs"].items()}
                regs = state.setdefault(vcpu, {})
                cur = Step(rec["vt"], vcpu, int(rec["pc"], 16), written, [], [], dict(regs))
                _apply(regs, written)
                if set(written) == {"rcx", "r11"} and written["rcx"] == cur.pc + 2:
                    regs.pop("rax", None)  # a syscall: its result is in the next regs line
                regs.pop("rip", None)
        if cur is not None:
            yield cur

    def records(self) -> Iterator[Dict[str, Any]]:
        """The records without the summary line."""
        return (r for r in self if r.get("t") != "summary")

    @property
    def summary(self) -> Optional[Dict[str, Any]]:
        """The summary line (``{"t": "summary", "insns", "mem", ...}``), or
        None when the trace has none (cut short)."""
        if self._summary is None and self.compressed:
            with open(self.jsonl, "rb") as f:
                frame = _zstd.last_frame(f)
                if frame is None:  # no seek table (cut short): read it all
                    f.seek(0)
                    for frame in _zstd.lines(f):
                        pass
            last = frame.rstrip(b"\n").split(b"\n")[-1] if frame else b""
            if last.strip():
                rec = json.loads(last)
                if rec.get("t") == "summary":
                    self._summary = rec
        elif self._summary is None:
            with open(self.jsonl, "rb") as f:
                f.seek(0, os.SEEK_END)
                end = f.tell()
                back = min(end, 4096)
                while True:
                    f.seek(end - back)
                    lines = f.read(back).splitlines()
                    if len(lines) > 1 or back == end:
                        break
                    back = min(end, back * 2)
            last = lines[-1] if lines else b""
            if last.strip():
                rec = json.loads(last)
                if rec.get("t") == "summary":
                    self._summary = rec
        return self._summary

    def snapshots(self) -> List[Dict[str, Any]]:
        """The recording's snapshots (``{"vt", "pc", "tid", "blob"}``), [] for a plain file."""
        return list((self.meta or {}).get("snapshots", []))

    def loadSnapshot(self, vt: int) -> Snapshot:
        """The recording's snapshot taken at vt (``--snap-at``)."""
        for s in self.snapshots():
            if s["vt"] == vt:
                return Snapshot.load(os.path.join(self.path, s["blob"]))
        raise KeyError("no snapshot at vt %d in %s" % (vt, self.path))

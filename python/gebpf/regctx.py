"""One thread's registers under envi's ``RegisterContext`` method names.

The registers a snapshot saved (``rax``..., ``xmm0``, ``ymm0``, ``zmm0``,
``k0``, ``st0``, ``mxcsr``...) are the context's registers, indexed in
that order; envi's amd64 sub-registers (``eax``, ``ax``, ``al``, ``ah``,
``r8d``, ``r8w``, ``r8b``/``r8l``, ``mm0``, the eflags bits ``ZF``...) are
its meta registers, with envi's index encoding (bit offset << 24 | width
<< 16 | index of the containing register).  ``xmm``/``ymm``/``zmm`` of
one number share their bits: setting one changes the others.  Setting a
32-bit sub-register zero-extends into the 64-bit one, as the CPU (and envi's
amd64 context) does.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from . import regs as R
from .exc import InvalidRegisterName, PlatformException

if TYPE_CHECKING:  # pragma: no cover
    from .target import RegisterStore

_VECTOR_KINDS = (("xmm", 128), ("ymm", 256), ("zmm", 512))


def _mask(width: int) -> int:
    return (1 << width) - 1


class RegisterContext:
    """One thread's registers (see the module's documentation)."""

    def __init__(self, snap: "RegisterStore", index: int) -> None:
        self._snap = snap
        self._index = index
        self._vals: Dict[str, int] = snap._regs[index]
        self._names: List[str] = list(self._vals)
        self._ids: Dict[str, int] = {n: i for i, n in enumerate(self._names)}
        for name, (reg, off, width) in R.SUB_REGISTERS.items():
            if reg in self._ids:
                self._ids[name] = (off << 24) | (width << 16) | self._ids[reg]
        self._dirty = False

    # -- by name ---------------------------------------------------------------

    def getRegisters(self) -> Dict[str, int]:
        """Every register saved, by name: the general registers (with
        ``fs_base``/``gs_base``), x87/SSE state and the AVX/AVX-512 registers
        the CPU had (``xmm0``, ``ymm0``, ``zmm0``, ``k0``, ``mxcsr``, ...)."""
        return dict(self._vals)

    def getRegisterNames(self) -> List[str]:
        """The names getRegisters() has (not the sub-registers)."""
        return list(self._names)

    def getRegisterByName(self, name: str) -> int:
        """A register's or sub-register's value; InvalidRegisterName if the
        snapshot has no such register."""
        idx = self._ids.get(name)
        if idx is None:
            raise InvalidRegisterName("Unknown Register: %s" % name)
        return self.getRegister(idx)

    def setRegisterByName(self, name: str, value: int) -> None:
        """Change a register or sub-register (saveToFile writes it into the
        thread's notes; ``gebpf resume`` then starts with it)."""
        idx = self._ids.get(name)
        if idx is None:
            raise InvalidRegisterName("Unknown Register: %s" % name)
        self.setRegister(idx, value)

    def setRegisters(self, regdict: Dict[str, int]) -> None:
        """setRegisterByName for each name/value of regdict."""
        for name, value in regdict.items():
            self.setRegisterByName(name, value)

    # -- by index (envi) -------------------------------------------------------

    def getRegisterIndex(self, name: str) -> Optional[int]:
        """The index of a register or sub-register (None if unknown)."""
        return self._ids.get(name)

    def getRegisterName(self, index: int) -> str:
        """The name of an index (``REG%08x`` if none, as envi)."""
        for name, idx in self._ids.items():
            if idx == index:
                return name
        return "REG%.8x" % index

    def getRegisterNameIndexes(self) -> List[Tuple[str, int]]:
        """``[(name, index), ...]`` of the registers (not the sub-registers)."""
        return [(n, i) for i, n in enumerate(self._names)]

    def isMetaRegister(self, index: int) -> bool:
        """Whether index names a sub-register."""
        return (index & 0xFFFF) != index

    def getRegisterWidth(self, index: int) -> int:
        """Width in bits."""
        if self.isMetaRegister(index):
            return (index >> 16) & 0xFF
        return R.WIDTHS.get(self._names[index], 64)

    def getRegister(self, index: int) -> int:
        """The value of a register or sub-register index."""
        value = self._vals[self._names[index & 0xFFFF]]
        if self.isMetaRegister(index):
            value = (value >> ((index >> 24) & 0xFF)) & _mask((index >> 16) & 0xFF)
        return value

    def setRegister(self, index: int, value: int) -> None:
        """Set a register or sub-register by index."""
        name = self._names[index & 0xFFFF]
        if name in R.READ_ONLY:
            if int(value) == self._vals[name] and not self.isMetaRegister(index):
                return          # setRegisters(getRegisters()) works
            raise InvalidRegisterName("%s: read-only (it says which state components exist)" % name)
        width = R.WIDTHS.get(name, 64)
        value = int(value)
        if self.isMetaRegister(index):
            off, sub = (index >> 24) & 0xFF, (index >> 16) & 0xFF
            if not (off == 0 and sub == 32 and width == 64):   # eax=... zero-extends
                hole = _mask(sub) << off
                value = (self._vals[name] & ~hole) | ((value << off) & hole)
        self._store(name, value & _mask(width))

    def _store(self, name: str, value: int) -> None:
        vals = self._vals
        if name in R.GPR_NAMES:
            self._snap._regs_dirty.add(self._index)
        else:
            self._snap._fp_dirty.add(self._index)
        vals[name] = value
        kind = name[:3]
        if kind in ("xmm", "ymm", "zmm") and name[3:].isdigit():
            num = name[3:]
            width = R.WIDTHS[name]
            for other, owidth in _VECTOR_KINDS:
                o = other + num
                if o == name or o not in vals:
                    continue
                if owidth < width:
                    vals[o] = value & _mask(owidth)
                else:
                    vals[o] = (vals[o] & ~_mask(width)) | value
        self._dirty = True

    def getRegisterSnap(self) -> List[int]:
        """The values in index order (envi's bulk save)."""
        return [self._vals[n] for n in self._names]

    def setRegisterSnap(self, snap: List[int]) -> None:
        """The reverse of getRegisterSnap (read-only registers must be unchanged)."""
        for i, value in enumerate(snap):
            if self._vals[self._names[i]] != value:
                self.setRegister(i, value)

    def isDirty(self) -> bool:
        """Whether a register was set through this context."""
        return self._dirty

    # -- the special registers ---------------------------------------------------

    def getProgramCounter(self) -> int:
        """rip."""
        return self.getRegisterByName("rip")

    def setProgramCounter(self, value: int) -> None:
        """Set rip."""
        self.setRegisterByName("rip", value)

    def getStackCounter(self) -> int:
        """rsp."""
        return self.getRegisterByName("rsp")

    def setStackCounter(self, value: int) -> None:
        """Set rsp."""
        self.setRegisterByName("rsp", value)

    def getStatusRegister(self) -> int:
        """eflags."""
        return self.getRegisterByName("eflags")

    def setStatusRegister(self, value: int) -> None:
        """Set eflags."""
        self.setRegisterByName("eflags", value)

    def getStatusFlags(self) -> Dict[str, int]:
        """eflags' fields by envi's names: ``{"CF": 0, "ZF": 1, ...}``."""
        return {n: self.getRegisterByName(n) for n in R.STATUS_FLAGS}


class TraceRegisters:
    """vtrace's Trace-level register methods: each acts on the selected
    thread's context (``getMeta("ThreadId")``, see selectThread)."""

    def getRegisterContext(self, threadid: Optional[int] = None) -> RegisterContext:
        raise NotImplementedError  # pragma: no cover (the Snapshot defines it)

    def getRegisters(self) -> Dict[str, int]:
        """The selected thread's registers."""
        return self.getRegisterContext().getRegisters()

    def getRegisterNames(self) -> List[str]:
        """The selected thread's register names."""
        return self.getRegisterContext().getRegisterNames()

    def getRegisterByName(self, name: str) -> int:
        """A register of the selected thread."""
        return self.getRegisterContext().getRegisterByName(name)

    def setRegisterByName(self, name: str, value: int) -> None:
        """Set a register of the selected thread."""
        self.getRegisterContext().setRegisterByName(name, value)

    def setRegisters(self, regdict: Dict[str, int]) -> None:
        """Set registers of the selected thread."""
        self.getRegisterContext().setRegisters(regdict)

    def getRegister(self, index: int) -> int:
        """A register of the selected thread, by index."""
        return self.getRegisterContext().getRegister(index)

    def setRegister(self, index: int, value: int) -> None:
        """Set a register of the selected thread, by index."""
        self.getRegisterContext().setRegister(index, value)

    def getRegisterIndex(self, name: str) -> Optional[int]:
        """A register's index."""
        return self.getRegisterContext().getRegisterIndex(name)

    def getRegisterNameIndexes(self) -> List[Tuple[str, int]]:
        """``[(name, index), ...]``."""
        return self.getRegisterContext().getRegisterNameIndexes()

    def getRegisterSnap(self) -> List[int]:
        """The selected thread's registers in index order."""
        return self.getRegisterContext().getRegisterSnap()

    def setRegisterSnap(self, snap: List[int]) -> None:
        """The reverse of getRegisterSnap."""
        self.getRegisterContext().setRegisterSnap(snap)

    def getProgramCounter(self) -> int:
        """The selected thread's rip."""
        return self.getRegisterContext().getProgramCounter()

    def setProgramCounter(self, value: int) -> None:
        """Set the selected thread's rip."""
        self.getRegisterContext().setProgramCounter(value)

    def getStackCounter(self) -> int:
        """The selected thread's rsp."""
        return self.getRegisterContext().getStackCounter()

    def setStackCounter(self, value: int) -> None:
        """Set the selected thread's rsp."""
        self.getRegisterContext().setStackCounter(value)

    def getStatusRegister(self) -> int:
        """The selected thread's eflags."""
        return self.getRegisterContext().getStatusRegister()

    def getStatusFlags(self) -> Dict[str, int]:
        """The selected thread's eflags fields."""
        return self.getRegisterContext().getStatusFlags()


__all__ = ["RegisterContext", "TraceRegisters", "InvalidRegisterName", "PlatformException"]

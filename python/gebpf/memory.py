"""envi's ``IMemory`` helpers over a snapshot's readMemory/writeMemory:
formats, values, pointers, searches and pointer checks (x86-64: 8-byte
pointers, little endian)."""
from __future__ import annotations

import re
import struct
from typing import Any, List, Optional, Tuple

from .exc import PlatformException

MM_NONE, MM_EXEC, MM_WRITE, MM_READ, MM_SHARED = 0x0, 0x1, 0x2, 0x4, 0x8
ENDIAN_LSB = 0
POINTER_SIZE = 8


class MemoryHelpers:
    """Mixed into Snapshot, which gives readMemory, writeMemory,
    getMemoryMap, getMemoryMaps, setMeta, setVariable and _search_buffer."""

    def getPointerSize(self) -> int:
        """8."""
        return POINTER_SIZE

    def getEndian(self) -> int:
        """envi's ENDIAN_LSB (0): little endian."""
        return ENDIAN_LSB

    def readMemoryFormat(self, va: int, fmt: str) -> Tuple[Any, ...]:
        """struct.unpack(fmt) of the bytes at va (``P`` is a pointer)."""
        fmt = fmt.replace("P", "Q")
        return struct.unpack(fmt, self.readMemory(va, struct.calcsize(fmt)))

    def writeMemoryFormat(self, va: int, fmt: str, *args: Any) -> None:
        """Write struct.pack(fmt, *args) at va (``P`` is a pointer)."""
        self.writeMemory(va, struct.pack(fmt.replace("P", "Q"), *args))

    def readMemValue(self, va: int, size: int) -> int:
        """The unsigned little-endian number of size bytes at va."""
        return int.from_bytes(self.readMemory(va, size), "little")

    def writeMemValue(self, va: int, value: int, size: int) -> None:
        """Write value as size little-endian bytes at va."""
        self.writeMemory(va, (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little"))

    def readMemoryPtr(self, va: int) -> int:
        """The pointer at va."""
        return self.readMemValue(va, POINTER_SIZE)

    def writeMemoryPtr(self, va: int, value: int) -> None:
        """Write a pointer at va."""
        self.writeMemValue(va, value, POINTER_SIZE)

    def isValidPointer(self, va: int) -> bool:
        """Whether va is in a map (as envi: the map may have no bytes)."""
        return self.getMemoryMap(va) is not None

    def _perm(self, va: int, bit: int) -> bool:
        m = self.getMemoryMap(va)
        return m is not None and bool(m[2] & bit)

    def isReadable(self, va: int) -> bool:
        """Whether va is in a readable map."""
        return self._perm(va, MM_READ)

    def isWriteable(self, va: int) -> bool:
        """Whether va is in a writable map."""
        return self._perm(va, MM_WRITE)

    def isExecutable(self, va: int) -> bool:
        """Whether va is in an executable map."""
        return self._perm(va, MM_EXEC)

    def isShared(self, va: int) -> bool:
        """Whether va is in a shared map."""
        return self._perm(va, MM_SHARED)

    def probeMemory(self, va: int, size: int, perm: int) -> bool:
        """Whether [va, va+size) is in one map that has the perm bits."""
        m = self.getMemoryMap(va)
        return m is not None and va + size <= m[0] + m[1] and (m[2] & perm) == perm

    def getMaxReadSize(self, va: int) -> int:
        """How many bytes from va are in readable maps, one after the other."""
        n = 0
        m = self.getMemoryMap(va)
        while m is not None and m[2] & MM_READ:
            n = m[0] + m[1] - va
            m = self.getMemoryMap(va + n)
        return n

    def searchMemoryRange(self, needle: Any, address: int, size: int, regex: bool = False) -> List[int]:
        """Addresses in [address, address+size) where needle (bytes, or a
        bytes regular expression with regex=True) occurs; matches do not
        overlap.  Raises as readMemory for a range without bytes."""
        found = self._search_buffer(address, size)
        if found is None:
            buf, start = self.readMemory(address, size), 0
        else:
            buf, start = found
        end = start + size
        out: List[int] = []
        if regex:
            for m in re.finditer(needle, memoryview(buf)[start:end]):
                out.append(address + m.start())
        elif needle:
            at = buf.find(needle, start, end)
            while at >= 0:
                out.append(address + at - start)
                at = buf.find(needle, at + len(needle), end)
        self.setMeta("search", out)
        self.setVariable("search", out)
        return out

    def searchMemory(self, needle: Any, regex: bool = False) -> List[int]:
        """searchMemoryRange over every map, skipping maps that have no
        bytes (as envi skips what it cannot read)."""
        out: List[int] = []
        for va, size, _perm, _name in self.getMemoryMaps():
            try:
                out += self.searchMemoryRange(needle, va, size, regex=regex)
            except PlatformException:
                continue
        self.setMeta("search", out)
        self.setVariable("search", out)
        return out

    def _search_buffer(self, address: int, size: int) -> Optional[Tuple[Any, int]]:
        return None  # pragma: no cover (the Snapshot gives a zero-copy one)

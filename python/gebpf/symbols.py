"""Symbols of a snapshot's mapped files, under vtrace's names.

As vtrace finds libraries on Linux, a library is a map with a file name
whose first bytes are an ELF header (``[vdso]`` included); its normalized
name is the file's base name up to the first ``.`` or ``-``, lower case
(``/usr/lib/x86_64-linux-gnu/libc.so.6`` -> ``libc``, ``python3.11`` ->
``python3``; a second library of the same name gets ``_BASE`` appended).
Symbols come from the file's ``.symtab`` and ``.dynsym`` (and its debug
file's, see :mod:`gebpf.elfsyms`), moved by the load bias; the vdso's come
from the snapshot's memory.  Symbol objects behave as envi's: ``int(sym)``
is the address, ``str(sym)`` is ``"libc.malloc"``, and a library's
:class:`FileSymbol` resolves ``libc.malloc`` as an attribute.
"""
from __future__ import annotations

import bisect
import os
import re
from typing import Any, Dict, List, Optional, Tuple

from . import elfsyms

ELF_MAGIC = b"\x7fELF"
NEAR = 0x1000  # exact=False: a symbol without a size covers at most this far


class Symbol:
    """A named address (envi's ``Symbol``): arithmetic uses int(self)."""

    def __init__(self, name: str, value: int, size: int = 0, fname: Optional[str] = None) -> None:
        self.name = name
        self.value = value
        self.size = size
        self.fname = fname

    def __int__(self) -> int:
        return int(self.value)

    __index__ = __int__

    def __hash__(self) -> int:
        return hash(int(self))

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Symbol) and int(self) == int(other)

    def __lt__(self, other: Any) -> bool:
        return int(self) < int(other)

    def __len__(self) -> int:
        return self.size

    def __str__(self) -> str:
        return "%s.%s" % (self.fname, self.name) if self.fname is not None else self.name

    __repr__ = __str__


def _arith(op: str):
    def fwd(self: Symbol, other: Any) -> int:
        return getattr(int(self), op)(int(other))

    def rev(self: Symbol, other: Any) -> int:
        return getattr(int(other), op)(int(self))
    return fwd, rev


for _op in ("add", "sub", "mul", "floordiv", "mod", "lshift", "rshift", "and", "or", "xor"):
    _f, _r = _arith("__%s__" % _op)
    setattr(Symbol, "__%s__" % _op, _f)
    setattr(Symbol, "__r%s__" % _op, _r)


class FunctionSymbol(Symbol):
    """A function (envi's ``FunctionSymbol``: ``repr`` is ``libc.malloc()``)."""

    def __repr__(self) -> str:
        return "%s.%s()" % (self.fname, self.name)


class FileSymbol(Symbol):
    """A library: a symbol at its base address and the resolver of its own
    symbols (``libc.malloc``, ``libc["weird@name"]``)."""

    def __init__(self, name: str, base: int, size: int, syms: List[Symbol]) -> None:
        super().__init__(name, base, size, None)
        self._byname = {}
        for s in syms:
            self._byname.setdefault(s.name, s)
        self._syms = syms

    def getSymByName(self, name: str) -> Optional[Symbol]:
        return self._byname.get(name)

    def getSymList(self) -> List[Symbol]:
        return list(self._syms)

    def __getattr__(self, name: str) -> Symbol:
        if name.startswith("_"):
            raise AttributeError(name)
        s = self._byname.get(name)
        if s is None:
            raise AttributeError("%s has no symbol %s" % (self.name, name))
        return s

    def __getitem__(self, name: str) -> Symbol:
        s = self._byname.get(name)
        if s is None:
            raise KeyError("%s has no symbol %s" % (self.name, name))
        return s

    def __bool__(self) -> bool:
        return True

    __hash__ = Symbol.__hash__
    __eq__ = Symbol.__eq__


def norm_file_name(path: str) -> str:
    """vtrace's normalized library name of a path."""
    return os.path.basename(path).split(".")[0].split("-")[0].lower()


class _Library:
    def __init__(self, norm: str, path: str, base: int, ranges: List[Tuple[int, int]]) -> None:
        self.norm, self.path, self.base, self.ranges = norm, path, base, ranges
        self.file: Optional[FileSymbol] = None
        self.sorted: List[Symbol] = []
        self.values: List[int] = []
        self.info: Dict[str, Any] = {}


class SymbolResolver:
    """vtrace's symbol methods, for a snapshot (mixed into Snapshot)."""

    def _find_libraries(self) -> None:
        """LibraryBases / LibraryPaths, as vtrace's _findLibraryMaps."""
        self._libs: Dict[str, _Library] = {}
        self._lib_at: Dict[str, str] = {}       # path -> normalized name
        bad = self.getMeta("BadMaps") or []
        for base, _size, _perms, fname in self.getMemoryMaps():
            if not fname or fname in bad or fname in self._lib_at:
                continue
            try:
                if self.readMemory(base, 4) != ELF_MAGIC:
                    continue
            except Exception:
                continue
            norm = norm_file_name(fname)
            if norm in self._libs:
                norm = "%s_%.8x" % (norm, base)
            ranges = [(b, s) for b, s, _p, f in self.getMemoryMaps() if f == fname and b >= base]
            self._libs[norm] = _Library(norm, fname, base, ranges)
            self._lib_at[fname] = norm
        self.metadata["LibraryBases"] = {n: lib.base for n, lib in self._libs.items()}
        self.metadata["LibraryPaths"] = {lib.base: lib.path for lib in self._libs.values()}

    def _load(self, lib: _Library) -> FileSymbol:
        if lib.file is not None:
            return lib.file
        mem_read = lambda off, n: self.readMemory(lib.base + off, n)  # noqa: E731
        try:
            mimg = elfsyms.ElfImage(mem_read, mapped=True)
            mem_bid = mimg.build_id()
        except Exception:
            mimg, mem_bid = None, None
        if lib.path.startswith("/"):
            raw, lib.info = elfsyms.load_symbols(lib.path, mem_bid)
        else:  # [vdso]: its section headers are inside the mapping
            raw, lib.info = [], {"file": None, "debug_file": None}
            try:
                raw = elfsyms.ElfImage(mem_read).symbols()
            except Exception:
                pass
        bias = 0
        if mimg is not None and mimg.type == elfsyms.ET_DYN:
            bias = lib.base - mimg.link_base
        syms: List[Symbol] = []
        seen = set()
        for value, size, name, is_func in raw:
            key = (name, value)
            if key in seen:
                continue
            seen.add(key)
            cls = FunctionSymbol if is_func else Symbol
            syms.append(cls(name, value + bias, size, lib.norm))
        if mimg is not None:
            syms.append(Symbol("__entry", mimg.entry + bias, 0, lib.norm))
        end = max(b + s for b, s in lib.ranges) if lib.ranges else lib.base
        lib.file = FileSymbol(lib.norm, lib.base, end - lib.base, syms)
        # Functions first among equal addresses: they are what getSymByAddr prefers.
        lib.sorted = sorted(syms, key=lambda s: (s.value, not isinstance(s, FunctionSymbol), s.name))
        lib.values = [s.value for s in lib.sorted]
        return lib.file

    # -- vtrace's API ----------------------------------------------------------------

    def getNormalizedLibNames(self) -> List[str]:
        """The libraries' normalized names, in address order."""
        return list(self._libs)

    def getSymsForFile(self, libname: str) -> List[Symbol]:
        """Every symbol of a library (by normalized name)."""
        lib = self._libs.get(libname)
        if lib is None:
            raise KeyError("Invalid Library Name: %s" % libname)
        return self._load(lib).getSymList()

    def getSymbolFileInfo(self, libname: str) -> Dict[str, Any]:
        """Where a library's symbols came from: ``{"file", "build_id",
        "debug_file", "mismatch"}`` (gebpf's addition)."""
        lib = self._libs[libname]
        self._load(lib)
        return dict(lib.info)

    def getSymByName(self, name: str) -> Optional[Symbol]:
        """A library's FileSymbol by normalized name (as vtrace), a
        ``"lib.symbol"`` (as str() of a symbol gives it), or a bare symbol
        name, looked up in the libraries in address order; None if none."""
        lib = self._libs.get(name)
        if lib is not None:
            return self._load(lib)
        head, dot, rest = name.partition(".")
        if dot and head in self._libs:
            s = self._load(self._libs[head]).getSymByName(rest)
            if s is not None:
                return s
        for lib in self._libs.values():
            s = self._load(lib).getSymByName(name)
            if s is not None:
                return s
        return None

    def getSymByAddr(self, addr: int, exact: bool = True) -> Optional[Symbol]:
        """The symbol at addr (exact), or (exact=False) the one holding addr:
        the nearest one below whose size covers it, or without a size, at
        most 4 KiB below; None when the address is in no library or no
        symbol fits."""
        m = self.getMemoryMap(addr)
        if m is None or m[3] not in self._lib_at:
            return None
        lib = self._libs[self._lib_at[m[3]]]
        self._load(lib)
        i = bisect.bisect_right(lib.values, addr)
        if exact:
            j = bisect.bisect_left(lib.values, addr)
            return lib.sorted[j] if j < i else None
        best = None
        for s in reversed(lib.sorted[max(0, i - 64):i]):
            if s.size and s.value <= addr < s.value + s.size:
                return s
            if best is None and not s.size and addr - s.value < NEAR:
                best = s
        return best

    def searchSymbols(self, regex: str, libname: Optional[str] = None) -> List[Symbol]:
        """Symbols whose str() (``lib.name``) matches regex (re.match)."""
        rx = re.compile(regex)
        libs = [libname] if libname is not None else self.getNormalizedLibNames()
        return [s for ln in libs for s in self.getSymsForFile(ln) if rx.match(str(s))]

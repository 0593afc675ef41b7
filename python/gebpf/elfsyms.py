"""Symbols of ELF files, read with the standard library.

An :class:`ElfImage` reads an ELF64 file's headers, its ``.symtab`` and
``.dynsym``, its GNU build id and ``.gnu_debuglink``, through a function
``read(offset, size)`` (a file, or the memory of a snapshot: the vdso).
:func:`load_symbols` gathers a mapped file's symbols, adding those of its
separate debug file (``/usr/lib/debug/.build-id/xx/yyyy.debug`` or the
debug link) when the file itself has no ``.symtab``.
"""
from __future__ import annotations

import os
import struct
from typing import Callable, Dict, List, Optional, Tuple

EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
PHDR = struct.Struct("<IIQQQQQQ")
SHDR = struct.Struct("<IIQQQQIIQQ")
SYM = struct.Struct("<IBBHQQ")
NHDR = struct.Struct("<III")
ET_EXEC, ET_DYN = 2, 3
PT_LOAD, PT_NOTE = 1, 4
SHT_SYMTAB, SHT_NOTE, SHT_NOBITS, SHT_DYNSYM = 2, 7, 8, 11
STT_OBJECT, STT_FUNC, STT_SECTION, STT_FILE, STT_TLS, STT_GNU_IFUNC = 1, 2, 3, 4, 6, 10
NT_GNU_BUILD_ID = 3
DEBUG_ROOT = "/usr/lib/debug"

# (value, size, name, is_function), value as linked (before the load bias).
RawSym = Tuple[int, int, str, bool]
Reader = Callable[[int, int], bytes]


class ElfImage:
    """The parts of an ELF64 little-endian image that symbols need."""

    def __init__(self, read: Reader, mapped: bool = False) -> None:
        """read(offset, size) gives the image's bytes; mapped: the image is a
        loaded one (notes are found at their vaddr, relative to the first
        PT_LOAD), else a file."""
        self._read = read
        self.mapped = mapped
        eh = EHDR.unpack(read(0, EHDR.size))
        ident = eh[0]
        if ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1:
            raise ValueError("not an ELF64 little-endian image")
        self.type, self.entry = eh[1], eh[4]
        phoff, shoff, phnum, shnum, shstrndx = eh[5], eh[6], eh[10], eh[12], eh[13]
        self.phdrs = []
        if phnum and eh[9] == PHDR.size:
            raw = read(phoff, phnum * PHDR.size)
            self.phdrs = [PHDR.unpack_from(raw, i * PHDR.size) for i in range(phnum)]
        loads = [p[3] for p in self.phdrs if p[0] == PT_LOAD]
        self.link_base = (min(loads) & ~0xFFF) if loads else 0
        self.shdrs = []
        self._shstr = b""
        if not mapped and shoff and shnum and eh[11] == SHDR.size:
            raw = read(shoff, shnum * SHDR.size)
            self.shdrs = [SHDR.unpack_from(raw, i * SHDR.size) for i in range(shnum)]
            if shstrndx < shnum:
                s = self.shdrs[shstrndx]
                self._shstr = read(s[4], s[5])

    def _section(self, name: str) -> Optional[tuple]:
        for s in self.shdrs:
            end = self._shstr.find(b"\0", s[0])
            if self._shstr[s[0]:end].decode("latin-1") == name:
                return s
        return None

    def build_id(self) -> Optional[bytes]:
        """The GNU build id (from PT_NOTE, else the note sections)."""
        spans = []
        for p in self.phdrs:
            if p[0] == PT_NOTE:
                spans.append((p[3] - self.link_base if self.mapped else p[2], p[5]))
        for s in self.shdrs:
            if s[1] == SHT_NOTE:
                spans.append((s[4], s[5]))
        for off, size in spans:
            try:
                buf = self._read(off, size)
            except Exception:
                continue
            p = 0
            while p + NHDR.size <= len(buf):
                namesz, descsz, ntype = NHDR.unpack_from(buf, p)
                name = buf[p + 12:p + 12 + namesz]
                desc_at = p + 12 + ((namesz + 3) & ~3)
                if ntype == NT_GNU_BUILD_ID and name.rstrip(b"\0") == b"GNU":
                    return bytes(buf[desc_at:desc_at + descsz])
                p = desc_at + ((descsz + 3) & ~3)
        return None

    def debuglink(self) -> Optional[str]:
        """The file name in ``.gnu_debuglink``, if any."""
        s = self._section(".gnu_debuglink")
        if s is None or s[1] == SHT_NOBITS:
            return None
        raw = self._read(s[4], s[5])
        return raw[:raw.find(b"\0")].decode("utf-8", "replace") or None

    def has_symtab(self) -> bool:
        return any(s[1] == SHT_SYMTAB for s in self.shdrs)

    def symbols(self) -> List[RawSym]:
        """Defined symbols of ``.symtab`` and ``.dynsym`` (no section, file
        or TLS symbols; values as linked)."""
        out: List[RawSym] = []
        for s in self.shdrs:
            if s[1] not in (SHT_SYMTAB, SHT_DYNSYM) or s[9] != SYM.size or s[6] >= len(self.shdrs):
                continue
            strtab_h = self.shdrs[s[6]]
            strtab = self._read(strtab_h[4], strtab_h[5])
            raw = self._read(s[4], s[5])
            for i in range(1, len(raw) // SYM.size):
                st_name, info, _other, shndx, value, size = SYM.unpack_from(raw, i * SYM.size)
                kind = info & 0xF
                if shndx == 0 or kind in (STT_SECTION, STT_FILE, STT_TLS) or not st_name:
                    continue
                end = strtab.find(b"\0", st_name)
                name = strtab[st_name:end if end >= 0 else len(strtab)].decode("utf-8", "replace")
                if name:
                    out.append((value, size, name, kind in (STT_FUNC, STT_GNU_IFUNC)))
        return out


def file_reader(path: str) -> Tuple[Reader, Callable[[], None]]:
    """read(offset, size) of a file, and the function that closes it."""
    f = open(path, "rb")

    def read(off: int, size: int) -> bytes:
        f.seek(off)
        return f.read(size)
    return read, f.close


def build_id_path(build_id: bytes) -> str:
    """``/usr/lib/debug/.build-id/xx/yyyy.debug`` of a build id."""
    h = build_id.hex()
    return os.path.join(DEBUG_ROOT, ".build-id", h[:2], h[2:] + ".debug")


def debug_file_candidates(path: str, image: ElfImage, build_id: Optional[bytes]) -> List[str]:
    """Where gdb looks for the separate debug file of path."""
    out = [build_id_path(build_id)] if build_id and len(build_id) > 1 else []
    link = image.debuglink()
    if link:
        d = os.path.dirname(os.path.realpath(path))
        out += [os.path.join(d, link), os.path.join(d, ".debug", link),
                DEBUG_ROOT + os.path.join(d, link)]
    return out


def _debug_symbols(cands: List[str], want: Optional[bytes], info: Dict[str, object]) -> List[RawSym]:
    for cand in cands:
        if not os.path.isfile(cand):
            continue
        read, close = file_reader(cand)
        try:
            img = ElfImage(read)
            bid = img.build_id()
            if want and bid and bid != want:
                continue
            info["debug_file"] = cand
            return img.symbols()
        except (ValueError, struct.error):
            continue
        finally:
            close()
    return []


def load_symbols(path: str, memory_build_id: Optional[bytes]) -> Tuple[List[RawSym], Dict[str, object]]:
    """The symbols of the file at path (plus its debug file's, when the
    file has no ``.symtab``) and a description ``{"file", "build_id",
    "debug_file", "mismatch"}``.  memory_build_id is the build id read from
    the snapshot's memory: when the file on disk has another one it is not
    the file that was mapped, and only a debug file with the memory's build
    id gives symbols."""
    info: Dict[str, object] = {"file": path, "build_id": None, "debug_file": None, "mismatch": False}
    try:
        read, close = file_reader(path)
    except OSError:
        if memory_build_id:
            return _debug_symbols([build_id_path(memory_build_id)], memory_build_id, info), info
        return [], info
    try:
        image = ElfImage(read)
        bid = image.build_id()
        info["build_id"] = bid.hex() if bid else None
        want = memory_build_id or bid
        if memory_build_id and bid and bid != memory_build_id:
            info["mismatch"] = True
            return _debug_symbols([build_id_path(memory_build_id)], want, info), info
        syms = image.symbols()
        if not image.has_symtab():
            syms += _debug_symbols(debug_file_candidates(path, image, want), want, info)
        return syms, info
    except (ValueError, struct.error):
        return [], info
    finally:
        close()

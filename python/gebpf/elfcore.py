"""The ELF core container of a gebpf snapshot (docs/snapshot-format.md).

Reading: the ELF header, the program headers (``PT_NOTE`` first, then one
``PT_LOAD`` per mapping) and the notes.  Writing: the same layout the C
writer produces, with all-zero pages of the data left as holes of a sparse
file.  Nothing here knows what the notes mean (see :mod:`gebpf.regs` and
:mod:`gebpf.snapshot`).
"""
from __future__ import annotations

import os
import stat
import struct
import tempfile
from dataclasses import dataclass
from typing import BinaryIO, Callable, List, Optional, Sequence, Tuple

from .exc import FormatError

PAGE = 4096
PT_LOAD = 1
PT_NOTE = 4
PN_XNUM = 0xFFFF
ET_CORE = 4
EM_X86_64 = 62
SHT_NOTE = 7
SHT_STRTAB = 3
PF_X, PF_W, PF_R = 1, 2, 4
SHSTRTAB = b"\0.note0\0.shstrtab\0"

EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
PHDR = struct.Struct("<IIQQQQQQ")
SHDR = struct.Struct("<IIQQQQIIQQ")
NHDR = struct.Struct("<III")


@dataclass
class Note:
    """One ELF note: owner name (``b"CORE"``), type, descriptor bytes."""

    name: bytes
    type: int
    desc: bytes


@dataclass
class Segment:
    """One ``PT_LOAD``: the mapping ``[vaddr, vaddr + memsz)``, its bytes at
    ``offset`` in the file (``filesz`` bytes, 0 when it has none), flags."""

    vaddr: int
    memsz: int
    offset: int
    filesz: int
    flags: int


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def parse_notes(buf: bytes) -> List[Note]:
    """Split the ``PT_NOTE`` bytes into notes (4-byte aligned fields)."""
    notes: List[Note] = []
    p = 0
    while p + NHDR.size <= len(buf):
        namesz, descsz, ntype = NHDR.unpack_from(buf, p)
        p += NHDR.size
        name_end = p + namesz
        desc_start = _align(name_end, 4)
        desc_end = desc_start + descsz
        if desc_end > len(buf):
            raise FormatError("malformed note at offset %d of the notes" % (p - NHDR.size))
        notes.append(Note(bytes(buf[p:name_end]).rstrip(b"\0"), ntype, bytes(buf[desc_start:desc_end])))
        p = _align(desc_end, 4)
    return notes


def build_notes(notes: Sequence[Note]) -> bytes:
    """The ``PT_NOTE`` bytes for notes (names NUL-terminated, zero padding)."""
    out = bytearray()
    for n in notes:
        name = n.name + b"\0"
        out += NHDR.pack(len(name), len(n.desc), n.type)
        out += name + b"\0" * (_align(len(name), 4) - len(name))
        out += n.desc + b"\0" * (_align(len(n.desc), 4) - len(n.desc))
    return bytes(out)


def read_core(f: BinaryIO, size: int) -> Tuple[List[Note], List[Segment]]:
    """Notes and ``PT_LOAD`` segments of the core open as f (size bytes)."""
    if size < EHDR.size:
        raise FormatError("not an ELF core (too short)" if size else "empty file")
    f.seek(0)
    eh = EHDR.unpack(f.read(EHDR.size))
    ident, etype, machine = eh[0], eh[1], eh[2]
    phoff, shoff, phentsize, phnum = eh[5], eh[6], eh[9], eh[10]
    if ident[:4] != b"\x7fELF":
        raise FormatError("not an ELF file")
    if ident[4] != 2 or ident[5] != 1 or machine != EM_X86_64:
        raise FormatError("not an x86-64 ELF file")
    if etype != ET_CORE:
        raise FormatError("an ELF file but not a core (e_type %d)" % etype)
    if phnum == PN_XNUM:
        if shoff + SHDR.size > size:
            raise FormatError("truncated (section 0 is past the end)")
        f.seek(shoff)
        phnum = SHDR.unpack(f.read(SHDR.size))[6]
    if phentsize != PHDR.size or phoff + phnum * PHDR.size > size:
        raise FormatError("truncated (program headers end past the file's %d bytes)" % size)
    f.seek(phoff)
    raw = f.read(phnum * PHDR.size)
    notes: List[Note] = []
    segs: List[Segment] = []
    for i in range(phnum):
        ptype, flags, off, vaddr, _paddr, filesz, memsz, _align_ = PHDR.unpack_from(raw, i * PHDR.size)
        if off + filesz > size:
            raise FormatError("truncated (segment %d needs bytes up to %d)" % (i, off + filesz))
        if ptype == PT_NOTE:
            f.seek(off)
            notes += parse_notes(f.read(filesz))
        elif ptype == PT_LOAD:
            segs.append(Segment(vaddr, memsz, off, filesz, flags))
    return notes, segs


def perms_flags(perms: str) -> int:
    """``p_flags`` of a mapping from its ``"r-xp"`` permissions."""
    return (PF_R if perms[0] == "r" else 0) | (PF_W if perms[1] == "w" else 0) | \
        (PF_X if perms[2] == "x" else 0)


@dataclass
class Layout:
    """Where the parts of a core go for given note bytes and mappings."""

    phnum: int
    notes_off: int
    shstr_off: int
    sh_off: int
    data_off: int


def layout(nmaps: int, notes_len: int) -> Layout:
    """The C writer's layout (docs/snapshot-format.md, "Layout")."""
    phnum = 1 + nmaps
    notes_off = EHDR.size + phnum * PHDR.size
    shstr_off = notes_off + notes_len
    sh_off = _align(shstr_off + len(SHSTRTAB), 8)
    data_off = _align(sh_off + 3 * SHDR.size, PAGE)
    return Layout(phnum, notes_off, shstr_off, sh_off, data_off)


def _head(notes_bytes: bytes, lay: Layout, segs: Sequence[Tuple[int, int, int, int, int]]) -> bytes:
    """Everything before the data: headers, notes, section table, padding."""
    eh = EHDR.pack(b"\x7fELF\x02\x01\x01" + b"\0" * 9, ET_CORE, EM_X86_64, 1, 0, EHDR.size,
                   lay.sh_off, 0, EHDR.size, PHDR.size,
                   PN_XNUM if lay.phnum >= PN_XNUM else lay.phnum, SHDR.size, 3, 2)
    head = bytearray(eh)
    head += PHDR.pack(PT_NOTE, 0, lay.notes_off, 0, 0, len(notes_bytes), 0, 4)
    for vaddr, memsz, off, filesz, flags in segs:
        head += PHDR.pack(PT_LOAD, flags, off, vaddr, 0, filesz, memsz, PAGE)
    head += notes_bytes + SHSTRTAB
    head += b"\0" * (lay.sh_off - len(head))
    head += SHDR.pack(0, 0, 0, 0, 0, 0, 0, lay.phnum if lay.phnum >= PN_XNUM else 0, 0, 0)
    head += SHDR.pack(1, SHT_NOTE, 0, 0, lay.notes_off, len(notes_bytes), 0, 0, 4, 0)
    head += SHDR.pack(8, SHT_STRTAB, 0, 0, lay.shstr_off, len(SHSTRTAB), 0, 0, 1, 0)
    head += b"\0" * (lay.data_off - len(head))
    return bytes(head)


def _sparse(f: BinaryIO) -> bool:
    """Whether f is a regular file we can leave holes in."""
    try:
        return f.seekable() and stat.S_ISREG(os.fstat(f.fileno()).st_mode)
    except (OSError, ValueError, AttributeError):
        return False


def write_core_to(f: BinaryIO, notes_bytes: bytes, lay: Layout,
                  segs: Sequence[Tuple[int, int, int, int, int]],
                  data: Callable[[int], Optional[bytes]]) -> None:
    """Write a core to the binary file object f, from its position: segs are
    ``(vaddr, memsz, offset, filesz, flags)`` with the offsets back to back
    from lay.data_off; data(i) gives segment i's bytes (None when it has
    none).  All-zero pages are holes in a regular file, zeros elsewhere."""
    sparse = _sparse(f)
    start = f.tell() if sparse else 0
    f.write(_head(notes_bytes, lay, segs))
    end = lay.data_off + sum(s[3] for s in segs)
    zero = bytes(PAGE)
    for i, seg in enumerate(segs):
        b = data(i)
        if not b:
            continue
        for p in range(0, len(b), PAGE):
            chunk = b[p:p + PAGE]
            if sparse:
                if chunk == zero[:len(chunk)]:
                    continue
                f.seek(start + seg[2] + p)
            f.write(chunk)
    if sparse:
        f.seek(start + end)
        f.truncate()
    f.flush()


def write_core(path: str, notes_bytes: bytes, lay: Layout,
               segs: Sequence[Tuple[int, int, int, int, int]],
               data: Callable[[int], Optional[bytes]]) -> None:
    """write_core_to a file at path, written under a temporary name,
    fsynced, renamed (mode 0600)."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp.", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            write_core_to(f, notes_bytes, lay, segs, data)
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dfd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)

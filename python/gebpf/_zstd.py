"""Reading gebpf's zstd traces (docs/trace-format.md "Compressed traces")
through ctypes on the system's libzstd.so.1 (Python 3.11's standard library
has no zstd; libzstd1 is on every Debian system).

Streaming: a file is decompressed a chunk at a time.  A truncated file (a
killed writer) gives every byte its whole frames hold and what the cut frame
decoded before its end; ``Stream.truncated`` then says so.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import io
import struct
from typing import BinaryIO, Iterator, List, Optional, Tuple

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
SEEK_MAGIC = 0x8F92EAB1
SKIP_MAGIC = 0x184D2A5E


class _Buf(ctypes.Structure):
    # ZSTD_inBuffer and ZSTD_outBuffer: { pointer, size, pos }
    _fields_ = [("ptr", ctypes.c_void_p), ("size", ctypes.c_size_t), ("pos", ctypes.c_size_t)]


_lib = None


def _zstd():
    global _lib
    if _lib is None:
        name = ctypes.util.find_library("zstd") or "libzstd.so.1"
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            lib = ctypes.CDLL("libzstd.so.1")
        lib.ZSTD_createDStream.restype = ctypes.c_void_p
        lib.ZSTD_freeDStream.argtypes = [ctypes.c_void_p]
        lib.ZSTD_decompressStream.restype = ctypes.c_size_t
        lib.ZSTD_decompressStream.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Buf),
                                              ctypes.POINTER(_Buf)]
        lib.ZSTD_isError.restype = ctypes.c_uint
        lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
        lib.ZSTD_getErrorName.restype = ctypes.c_char_p
        lib.ZSTD_getErrorName.argtypes = [ctypes.c_size_t]
        lib.ZSTD_DStreamOutSize.restype = ctypes.c_size_t
        _lib = lib
    return _lib


def is_zstd(head: bytes) -> bool:
    """The first bytes of a file are a zstd frame's (or a skippable frame's)."""
    if head[:4] == ZSTD_MAGIC:
        return True
    return len(head) >= 4 and (struct.unpack("<I", head[:4])[0] & 0xFFFFFFF0) == 0x184D2A50


class ZstdError(ValueError):
    """The data is not zstd (or is corrupt)."""


class Stream:
    """Decompresses a binary file object chunk by chunk."""

    def __init__(self, f: BinaryIO, chunk: int = 1 << 20) -> None:
        self.f = f
        self.chunk = chunk
        self.truncated = False

    def __iter__(self) -> Iterator[bytes]:
        lib = _zstd()
        ds = lib.ZSTD_createDStream()
        if not ds:
            raise MemoryError("ZSTD_createDStream")
        osize = lib.ZSTD_DStreamOutSize() * 4
        out = ctypes.create_string_buffer(osize)
        last = 0  # 0: between frames
        try:
            while True:
                data = self.f.read(self.chunk)
                if not data:
                    break
                src = ctypes.create_string_buffer(data, len(data))
                ib = _Buf(ctypes.cast(src, ctypes.c_void_p), len(data), 0)
                full = False  # the last call filled out: the decoder may hold more
                while ib.pos < ib.size or full:
                    ob = _Buf(ctypes.cast(out, ctypes.c_void_p), osize, 0)
                    r = lib.ZSTD_decompressStream(ds, ctypes.byref(ob), ctypes.byref(ib))
                    if lib.ZSTD_isError(r):
                        raise ZstdError(lib.ZSTD_getErrorName(r).decode())
                    last = r
                    full = ob.pos == osize
                    if ob.pos:
                        yield out.raw[:ob.pos]
            self.truncated = last != 0
        finally:
            lib.ZSTD_freeDStream(ds)


def lines(f: BinaryIO, stream: Optional[Stream] = None) -> Iterator[bytes]:
    """The whole lines (each without its newline) of a zstd file; a partial
    last line (a cut frame) is left out."""
    s = stream or Stream(f)
    rest = b""
    for chunk in s:
        parts = (rest + chunk).split(b"\n")
        rest = parts.pop()
        yield from parts
    if rest and not s.truncated:
        yield rest


def seek_table(f: BinaryIO) -> Optional[List[Tuple[int, int]]]:
    """The seek table at the end of f ([(compressed, decompressed) size of
    each frame]), or None when there is none."""
    t = _seek_table(f)
    return t[0] if t else None


def _seek_table(f: BinaryIO) -> Optional[Tuple[List[Tuple[int, int]], int]]:
    f.seek(0, 2)
    end = f.tell()
    if end < 17:
        return None
    f.seek(end - 9)
    n, desc, magic = struct.unpack("<IBI", f.read(9))
    if magic != SEEK_MAGIC:
        return None
    esize = 12 if desc & 0x80 else 8
    size = 8 + n * esize + 9
    if size > end:
        return None
    f.seek(end - size)
    skip, fsize = struct.unpack("<II", f.read(8))
    if skip != SKIP_MAGIC or fsize != size - 8:
        return None
    raw = f.read(n * esize)
    return [struct.unpack_from("<II", raw, i * esize) for i in range(n)], size


def last_frame(f: BinaryIO) -> Optional[bytes]:
    """The decompressed bytes of the last frame (the frames end where the
    seek table begins), or None without a seek table."""
    t = _seek_table(f)
    if not t or not t[0]:
        return None
    table, tsize = t
    end = f.seek(0, 2) - tsize
    size = table[-1][0]
    if size > end:
        return None
    f.seek(end - size)
    return b"".join(Stream(io.BytesIO(f.read(size))))

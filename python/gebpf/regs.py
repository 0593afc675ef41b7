"""Registers in a snapshot's per-thread notes (docs/snapshot-format.md, "Notes").

``NT_PRSTATUS`` holds the general registers (``user_regs_struct``, including
``fs_base``/``gs_base``), ``NT_FPREGSET`` the FXSAVE area (x87, SSE) and
``NT_X86_XSTATE`` the XSAVE area in the standard format (AVX at 576, AVX-512
opmask/ZMM_Hi256/Hi16_ZMM at 1088/1152/1664).  Vector registers are
unsigned integers, little endian, as wide as the register.
"""
from __future__ import annotations

import struct
from typing import Dict, Optional

NT_PRSTATUS = 1
NT_FPREGSET = 2
NT_PRPSINFO = 3
NT_AUXV = 6
NT_X86_XSTATE = 0x202
NT_SIGINFO = 0x53494749
NT_FILE = 0x46494C45
NT_GEBPF_JSON = 1  # the JSON note's type today; the reader keys on its owner name "GEBPF" alone

# user_regs_struct, in memory order.
GPR_NAMES = ("r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx",
             "rdx", "rsi", "rdi", "orig_rax", "rip", "cs", "eflags", "rsp", "ss", "fs_base",
             "gs_base", "ds", "es", "fs", "gs")
PRSTATUS_SIZE = 336
PR_REG_OFF = 112
PR_PID_OFF = 32
GPRS = struct.Struct("<27Q")

XSTATE_BV_OFF = 512
AVX_OFF = 576
OPMASK_OFF = 1088
ZMM_HI256_OFF = 1152
HI16_ZMM_OFF = 1664
XFEATURE_AVX, XFEATURE_OPMASK, XFEATURE_ZMM_HI256, XFEATURE_HI16_ZMM = 2, 5, 6, 7


def _u(b: bytes) -> int:
    return int.from_bytes(b, "little")


def prstatus_tid(desc: bytes) -> int:
    """The thread id (``pr_pid``) of an ``NT_PRSTATUS`` descriptor."""
    return struct.unpack_from("<i", desc, PR_PID_OFF)[0]


def decode_gprs(desc: bytes) -> Dict[str, int]:
    """The general registers of an ``NT_PRSTATUS`` descriptor."""
    if len(desc) != PRSTATUS_SIZE:
        raise ValueError("NT_PRSTATUS note is %d bytes, expected %d" % (len(desc), PRSTATUS_SIZE))
    return dict(zip(GPR_NAMES, GPRS.unpack_from(desc, PR_REG_OFF)))


def encode_gprs(desc: bytes, regs: Dict[str, int]) -> bytes:
    """desc with its general registers replaced by those in regs."""
    vals = [regs[n] & 0xFFFFFFFFFFFFFFFF for n in GPR_NAMES]
    out = bytearray(desc)
    GPRS.pack_into(out, PR_REG_OFF, *vals)
    return bytes(out)


def decode_fxsave(area: bytes) -> Dict[str, int]:
    """x87 and SSE registers of a 512-byte FXSAVE area."""
    fcw, fsw, ftw, fop = struct.unpack_from("<HHBxH", area, 0)
    regs = {"fcw": fcw, "fsw": fsw, "ftw": ftw, "fop": fop,
            "mxcsr": struct.unpack_from("<I", area, 24)[0],
            "mxcsr_mask": struct.unpack_from("<I", area, 28)[0]}
    for i in range(8):
        regs["st%d" % i] = _u(area[32 + 16 * i:32 + 16 * i + 10])
    for i in range(16):
        regs["xmm%d" % i] = _u(area[160 + 16 * i:176 + 16 * i])
    return regs


def decode_xstate(area: bytes) -> Dict[str, int]:
    """Registers of an XSAVE area: FXSAVE's, then ymm0-15 (AVX), k0-7 and
    zmm0-31 (AVX-512) when the area's XSTATE_BV or XCR0 says they exist."""
    regs = decode_fxsave(area[:512])
    xcr0 = _u(area[464:472])
    bv = _u(area[XSTATE_BV_OFF:XSTATE_BV_OFF + 8])
    have = xcr0 | bv
    regs["xcr0"] = xcr0
    if have & (1 << XFEATURE_AVX) and len(area) >= AVX_OFF + 256:
        for i in range(16):
            hi = _u(area[AVX_OFF + 16 * i:AVX_OFF + 16 * i + 16])
            regs["ymm%d" % i] = regs["xmm%d" % i] | (hi << 128)
    if have & (1 << XFEATURE_OPMASK) and len(area) >= OPMASK_OFF + 64:
        for i in range(8):
            regs["k%d" % i] = _u(area[OPMASK_OFF + 8 * i:OPMASK_OFF + 8 * i + 8])
    if have & (1 << XFEATURE_ZMM_HI256) and len(area) >= ZMM_HI256_OFF + 512:
        for i in range(16):
            hi = _u(area[ZMM_HI256_OFF + 32 * i:ZMM_HI256_OFF + 32 * i + 32])
            regs["zmm%d" % i] = regs.get("ymm%d" % i, regs["xmm%d" % i]) | (hi << 256)
    if have & (1 << XFEATURE_HI16_ZMM) and len(area) >= HI16_ZMM_OFF + 1024:
        for i in range(16):
            regs["zmm%d" % (16 + i)] = _u(area[HI16_ZMM_OFF + 64 * i:HI16_ZMM_OFF + 64 * i + 64])
    return regs


def thread_registers(prstatus: bytes, fpregset: Optional[bytes],
                     xstate: Optional[bytes]) -> Dict[str, int]:
    """Every register a thread's notes hold, by name."""
    regs = decode_gprs(prstatus)
    if xstate:
        regs.update(decode_xstate(xstate))
    elif fpregset:
        regs.update(decode_fxsave(fpregset))
    return regs


# FXSAVE control fields: name -> (offset, bytes).
FX_FIELDS = {"fcw": (0, 2), "fsw": (2, 2), "ftw": (4, 1), "fop": (6, 2), "mxcsr": (24, 4),
             "mxcsr_mask": (28, 4)}


def _put(out: bytearray, off: int, n: int, value: int) -> None:
    out[off:off + n] = (value & ((1 << (8 * n)) - 1)).to_bytes(n, "little")


def encode_fxsave(area: bytes, regs: Dict[str, int]) -> bytes:
    """A 512-byte FXSAVE area with the x87/SSE registers in regs written in
    (the bytes of registers regs lacks are kept)."""
    out = bytearray(area)
    for name, (off, n) in FX_FIELDS.items():
        if name in regs:
            _put(out, off, n, regs[name])
    for i in range(8):
        if "st%d" % i in regs:
            _put(out, 32 + 16 * i, 10, regs["st%d" % i])
    for i in range(16):
        if "xmm%d" % i in regs:
            _put(out, 160 + 16 * i, 16, regs["xmm%d" % i])
    return bytes(out)


def encode_xstate(area: bytes, regs: Dict[str, int]) -> bytes:
    """An XSAVE area with the registers in regs written in: the legacy
    FXSAVE part, the AVX upper halves, k0-7, zmm upper halves and zmm16-31.
    A component whose bytes change gets its XSTATE_BV bit (so XRSTOR loads
    it instead of its initial state)."""
    out = bytearray(encode_fxsave(area[:512], regs)) + bytearray(area[512:])
    changed = 0
    if out[0:160] != area[0:160]:
        changed |= 1 << 0                          # x87
    if out[160:416] != area[160:416] or out[24:28] != area[24:28]:
        changed |= 1 << 1                          # SSE (and MXCSR)
    parts = ((XFEATURE_AVX, AVX_OFF, 16, 16, "ymm%d", 0, 128),
             (XFEATURE_OPMASK, OPMASK_OFF, 8, 8, "k%d", 0, 0),
             (XFEATURE_ZMM_HI256, ZMM_HI256_OFF, 16, 32, "zmm%d", 0, 256),
             (XFEATURE_HI16_ZMM, HI16_ZMM_OFF, 16, 64, "zmm%d", 16, 0))
    for bit, off, count, size, fmt, first, shift in parts:
        if len(out) < off + count * size:
            continue
        before = bytes(out[off:off + count * size])
        for i in range(count):
            name = fmt % (first + i)
            if name in regs:
                _put(out, off + size * i, size, regs[name] >> shift)
        if out[off:off + count * size] != before:
            changed |= 1 << bit
    if changed and len(out) >= XSTATE_BV_OFF + 8:
        bv = _u(out[XSTATE_BV_OFF:XSTATE_BV_OFF + 8]) | changed
        _put(out, XSTATE_BV_OFF, 8, bv)
    return bytes(out)


# Register widths in bits (names not listed here are 64-bit).
WIDTHS = {"fcw": 16, "fsw": 16, "ftw": 8, "fop": 16, "mxcsr": 32, "mxcsr_mask": 32}
WIDTHS.update({"st%d" % i: 80 for i in range(8)})
WIDTHS.update({"xmm%d" % i: 128 for i in range(16)})
WIDTHS.update({"ymm%d" % i: 256 for i in range(16)})
WIDTHS.update({"zmm%d" % i: 512 for i in range(32)})
READ_ONLY = ("xcr0",)


def _sub_registers() -> Dict[str, tuple]:
    """envi's amd64 meta registers: name -> (register, bit offset, width)."""
    subs: Dict[str, tuple] = {}
    for x in "abcd":
        r = "r%sx" % x
        subs.update({"e%sx" % x: (r, 0, 32), "%sx" % x: (r, 0, 16), "%sl" % x: (r, 0, 8),
                     "%sh" % x: (r, 8, 8)})
    for x in ("si", "di", "bp", "sp"):
        r = "r" + x
        subs.update({"e" + x: (r, 0, 32), x: (r, 0, 16), x + "l": (r, 0, 8)})
    for i in range(8, 16):
        r = "r%d" % i
        subs.update({r + "d": (r, 0, 32), r + "w": (r, 0, 16), r + "b": (r, 0, 8), r + "l": (r, 0, 8)})
    for i in range(8):
        subs["mm%d" % i] = ("st%d" % i, 0, 64)
    subs.update({"fpsr": ("fsw", 0, 16), "fpcr": ("fcw", 0, 16)})
    # eflags' status flags, as envi names them.
    for name, off, width in (("CF", 0, 1), ("PF", 2, 1), ("AF", 4, 1), ("ZF", 6, 1), ("SF", 7, 1),
                             ("TF", 8, 1), ("IF", 9, 1), ("DF", 10, 1), ("OF", 11, 1),
                             ("IOPL", 12, 2), ("NT", 14, 1), ("RF", 16, 1), ("VM", 17, 1),
                             ("AC", 18, 1), ("VIF", 19, 1), ("VIP", 20, 1), ("ID", 21, 1)):
        subs[name] = ("eflags", off, width)
    return subs


SUB_REGISTERS = _sub_registers()
STATUS_FLAGS = [n for n, (r, _o, _w) in SUB_REGISTERS.items() if r == "eflags"]

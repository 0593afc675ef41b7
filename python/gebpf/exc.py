"""gebpf's exceptions, under the names vtrace scripts catch.

vtrace's platform layer raises ``vtrace.PlatformException`` for a failure
in the target (a read of memory it cannot give, ...), and envi raises
``SegmentationViolation`` (with ``.va``) for a bad memory access; scripts
written for vtrace catch those names.  Every gebpf exception derives from
:class:`PlatformException`, so an ``except PlatformException`` clause
written for vtrace catches each of them.
"""
from __future__ import annotations


class PlatformException(Exception):
    """The base of gebpf's exceptions (vtrace's name for a platform failure)."""


class SegmentationViolation(PlatformException):
    """An access to an address that has no bytes in the snapshot: in no map,
    or in a map whose bytes were not captured (PROT_NONE, ``[vvar]``...).
    ``va`` is the first such address (as envi's exception of this name)."""

    def __init__(self, va: int, msg: str = "") -> None:
        super().__init__(msg or "Bad Memory Access: 0x%x" % va)
        self.va = va


class InvalidRegisterName(PlatformException, KeyError):
    """A register name the snapshot does not hold (envi's exception name)."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message plain
        return str(self.args[0]) if self.args else ""


class FormatError(PlatformException, ValueError):
    """The file is not a gebpf snapshot (not an x86-64 ELF core, truncated, ...)."""

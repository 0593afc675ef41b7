"""Corrupt snapshots: show, read and diff of a damaged core never crash.

A valid snapshot is damaged in its ELF header, program headers, note and
data (truncated, bytes overwritten with 0x00, 0xff and 0x7f patterns); every
command must end with exit 0, 1 or 2, print at most a clean error, and (in
the sanitizer build of scripts/test) trip neither AddressSanitizer nor
UndefinedBehaviorSanitizer."""
import random
import subprocess

import pytest

from conftest import gebpf_path, prog_path

SAN = ("AddressSanitizer", "runtime error:", "LeakSanitizer")
# (This test found that the reader read an Elf64_Phdr in place at an
# e_phoff that was not 8-aligned, UBSan's "misaligned access"; misaligned
# header offsets are now refused.)


def snapshot(tmp_path):
    """A valid snapshot of snap_det (its bytes).  Each chunk below makes its
    own (~0.1 s; a module fixture would hold every chunk on one xdist
    worker, and one 480-run test was the sanitizer pass's last 25 s)."""
    out = tmp_path / "good.core"
    rc = subprocess.call([gebpf_path(), "snap", "-o", str(out), "--at", "snap_here", "--",
                          prog_path("snap_det")], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, timeout=120)
    assert rc == 0
    return out.read_bytes()


def damaged(good, seed):
    rnd = random.Random(seed)
    b = bytearray(good)
    phoff = int.from_bytes(b[32:40], "little")
    phnum = int.from_bytes(b[56:58], "little")
    note_off = int.from_bytes(b[phoff + 8:phoff + 16], "little")
    where = [(0, 64), (phoff, phoff + 56 * phnum), (note_off, min(len(b), note_off + 4096)),
             (0, len(b))][seed % 4]
    for _ in range(rnd.randint(1, 8)):
        i = rnd.randrange(*where)
        b[i:i + 8] = bytes([rnd.choice([0, 0xff, 0x7f, rnd.randrange(256)])]) * 8
    if seed % 7 == 0:
        del b[rnd.randrange(len(b)):]
    return bytes(b[:len(good)])


def run(args):
    r = subprocess.run([gebpf_path()] + args, capture_output=True, text=True, timeout=60)
    return r


SEEDS = 120      # damaged copies, each shown, read and diffed
CHUNKS = 4       # tests they are split into (xdist runs them side by side)


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_damaged_snapshots_fail_cleanly(gebpf, root, chunk, tmp_path):
    good_bytes = snapshot(tmp_path)
    good = tmp_path / "good.core"
    for seed in range(chunk, SEEDS, CHUNKS):
        bad = tmp_path / ("bad%d.core" % seed)
        bad.write_bytes(damaged(good_bytes, seed))
        for args in (["show", str(bad)], ["show", "--json", str(bad)],
                     ["read", str(bad), "0x400000", "64"], ["diff", str(good), str(bad)]):
            r = run(args)
            assert r.returncode in (0, 1, 2), (seed, args, r.returncode, r.stderr[-2000:])
            assert not any(s in r.stderr for s in SAN), (seed, args, r.stderr[-3000:])
            if r.returncode:
                lines = r.stderr.strip().splitlines()
                assert len(lines) == 1 or args[0] == "diff", (seed, args, r.stderr)
        bad.unlink()

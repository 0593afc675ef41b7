"""The patch trap's short jump (issue 34; docs/trace.md "A short jump and its
trampoline"; user/jit/patch.h): an entry whose 5 bytes cannot hold a jmp
rel32 because another entry lies in them (glibc's memmove, whose tail
mempcpy jumps into 3 bytes after its start) takes a 2-byte jmp rel8 to a
trampoline written over the nops that fall into it.

Here: pt_short (tests/progs/pt_short.c, memmove's shape in a program of
our own: a _chk function falling through the nops, a second way in at +3)
traced under every trap gives the same bytes; glibc's own memcpy, memmove
and mempcpy (tests/progs/libc_strings.c, dynamic: this CPU's IFUNC
variants) traced by the patch trap with no uprobe left, the same bytes as
under the probe trap.  The kills (the worker at each step of the end, both
together and a later trace) are test_trap_crash_steps.py's and
test_leftover.py's, with pt_short among their programs."""
import re
import subprocess

import pytest

from conftest import gebpf_path, prog_path

pytestmark = [pytest.mark.probetrap, pytest.mark.usefixtures("probes_ready")]

SHORT = re.compile(r"the entry at (0x[0-9a-f]+) gets a 2-byte jump to a trampoline at "
                   r"(0x[0-9a-f]+), in the nops before it \(another entry inside its 5 bytes\)")
PATCHED = re.compile(r"patch trap: (\d+) entries patched, (\d+) probed")


def trace(tmp_path, trap, rng, argv, tag):
    out = tmp_path / ("%s-%s.jsonl" % (tag, trap))
    r = subprocess.run([gebpf_path(), "trace", "-v", "--trap", trap, "--range", rng, "-o", str(out),
                        "--"] + argv, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, "--trap %s: exit %d: %s" % (trap, r.returncode, r.stderr[-2000:])
    return out.read_bytes(), r


def symbol(path, name):
    out = subprocess.run(["nm", path], capture_output=True, text=True, check=True).stdout
    return next(int(ln.split()[0], 16) for ln in out.splitlines() if ln.split()[-1] == name)


def test_memmoves_shape_traces_alike_under_every_trap(tmp_path):
    """pt_short, one thread (its calls go in by traced, by traced_chk's
    fall through the nops, by traced_alt's jump to +3, in turn): the patch
    trap's trace is byte for byte that of the probe trap, the page trap and
    --trap none, its start patched with a short jump to the nops after
    traced_chk, nothing probed."""
    prog = prog_path("pt_short")
    argv = [prog, "1", "3", "90"]
    native = subprocess.run(argv, capture_output=True, check=True).stdout
    got = {}
    for trap in ("patch", "probes", "pages", "none"):
        got[trap], r = trace(tmp_path, trap, "traced", argv, "short")
        assert r.stdout.encode() == native, "--trap %s changed its output" % trap
        if trap == "patch":
            m = SHORT.search(r.stderr)
            assert m, r.stderr[-2000:]
            assert int(m.group(1), 16) == symbol(prog, "traced")
            pad = symbol(prog, "traced_pad")
            assert pad <= int(m.group(2), 16) <= symbol(prog, "traced") - 5, \
                "the trampoline in traced_pad's nops: %s" % m.group(0)
            assert PATCHED.search(r.stderr).groups() == ("4", "0"), r.stderr[-2000:]
    # 22 instructions from traced_in to its ret, 11 more in the 6 calls
    # with a system call (i % 16 == 0), and the mov at traced's start in
    # the 60 that do not come in by traced_alt
    assert got["patch"].count(b'"t":"exec"') == 90 * 22 + 6 * 11 + 60, \
        "every call's instructions"
    for trap in ("probes", "pages", "none"):
        assert got["patch"] == got[trap], "--trap patch and --trap %s differ" % trap


@pytest.mark.parametrize("fn", ["memcpy", "memmove", "mempcpy"])
def test_glibcs_memcpy_family_keeps_no_uprobe(fn, tmp_path):
    """libc:FN of a dynamic program (this CPU's IFUNC variant, AVX-512 or
    not, Intel or AMD: glibc 2.36's memmove-vec-unaligned-erms has the same
    shape in each): every entry patched, none probed, the trace byte for
    byte the probe trap's."""
    argv = [prog_path("libc_strings"), "20"]
    patch, r = trace(tmp_path, "patch", "libc:" + fn, argv, fn)
    m = PATCHED.search(r.stderr)
    assert m, r.stderr[-2000:]
    kept = [ln for ln in r.stderr.splitlines() if "keeps a uprobe" in ln]
    assert m.group(2) == "0" and not kept, "libc:%s keeps uprobes:\n%s" % (fn, "\n".join(kept))
    probes, _ = trace(tmp_path, "probes", "libc:" + fn, argv, fn)
    assert patch.count(b'"t":"exec"') >= 20, "each of its 20 calls traced"
    assert patch == probes, "libc:%s: --trap patch and --trap probes differ" % fn

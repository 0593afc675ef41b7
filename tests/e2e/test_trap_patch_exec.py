"""The patch trap across exec and for a module mapped later (docs/trace.md
"The patch trap", "fork, exec, threads"): at an exec the old image's records
are drained and its cache forgotten, the range is resolved again in the new
image and the patch trap set up there (a new cache, new patches) before the
new image runs; a range whose module is not mapped yet is set up once an mmap
maps its code.  Each trace must be byte-identical to --trap probes where the
probe trap follows the same code (the range's file), and equal to the page
trap's where the range moves to another program (the probe trap follows the
file, not the symbol; the patch trap, like the page trap, the symbol).

Needs root and uprobes (the probe trap is the reference)."""
import shutil
import stat
import subprocess
import time

import pytest

from conftest import check_vt_order, gebpf_path, prog_path, read_trace
import lackey
from test_pagetrap import invocations, native, same_file, trace

pytestmark = [pytest.mark.probetrap, pytest.mark.usefixtures("probes_ready")]

SET_UP = "entries patched"
REFUSED = "the patch trap does not apply"


def both(name, rng, tmp_path, *args, other="probes", timeout=120):
    """NAME ARGS traced under the patch trap and under OTHER: the same
    stdout (the native one), byte-identical traces.  (patch run, lines)."""
    a, b = tmp_path / "patch.jsonl", tmp_path / ("%s.jsonl" % other)
    ra = trace(name, rng, a, *args, trap="patch", timeout=timeout)
    rb = trace(name, rng, b, *args, trap=other, timeout=timeout)
    assert ra.stdout == rb.stdout == native(name, *args).decode()
    same_file(a, b, "%s --range %s" % (name, rng), ("patch", other))
    lines, summary = read_trace(a)
    check_vt_order(lines)
    return ra, lines, summary


def test_exec_self(tmp_path):
    """exec_self 2: three images of the same program; the patch trap is set up
    in each (three caches, three patch sets), the trace is the probe trap's
    byte for byte, with traced's 3 calls."""
    r, lines, summary = both("exec_self", "traced", tmp_path, 2)
    assert r.stderr.count(SET_UP) == 3 and REFUSED not in r.stderr, r.stderr
    start = int(summary["start"], 16)
    assert sum(ln["t"] == "exec" and int(ln["pc"], 16) == start for ln in lines) == 3


def test_exec_moves_the_range(tmp_path):
    """exec_other execs recursion: `traced` is resolved again in recursion (at
    another address) and the patch trap set up there; the trace is the page
    trap's byte for byte, its summary names recursion's range."""
    r, lines, summary = both("exec_other", "traced", tmp_path, prog_path("recursion"),
                             other="pages")
    assert r.stderr.count(SET_UP) == 2 and REFUSED not in r.stderr, r.stderr
    second = lackey.Program(prog_path("recursion")).span(["traced"])
    assert (int(summary["start"], 16), int(summary["end"], 16)) == second
    assert second[0] <= int([ln for ln in lines if ln["t"] == "exec"][-1]["pc"], 16) <= second[1]


def exec_chain(kind, tmp_path):
    if kind == "env":
        return shutil.which("env"), [prog_path("trap_dyn"), 50, 200]
    wrap = tmp_path / "wrap.sh"
    wrap.write_text('#!/bin/sh\nexec %s "$@"\n' % prog_path("trap_dyn"))
    wrap.chmod(wrap.stat().st_mode | stat.S_IXUSR)
    return str(wrap), [50, 200]


@pytest.mark.parametrize("kind", ["env", "sh"])
def test_exec_chain_libc_range(kind, tmp_path, monkeypatch):
    """`--range libc:strtol` through env (or a #!/bin/sh wrapper) to trap_dyn:
    libc is not mapped at the start, nor in each new image at its exec; the
    patch trap waits for the mmap that maps its code and is set up then, in
    every image; the probe trap's trace byte for byte (trap_dyn's two atol
    calls and the chain's own)."""
    cmd, args = exec_chain(kind, tmp_path)
    import test_pagetrap
    monkeypatch.setattr(test_pagetrap, "prog_path", lambda name: cmd if name == "chain" else
                        prog_path(name))
    a, b = tmp_path / "patch.jsonl", tmp_path / "probes.jsonl"
    ra = test_pagetrap.trace("chain", "libc:strtol", a, *args, trap="patch", timeout=180)
    test_pagetrap.trace("chain", "libc:strtol", b, *args, trap="probes", timeout=180)
    assert ra.stdout.encode() == native("trap_dyn", 50, 200)
    same_file(a, b, "%s chain, libc:strtol" % kind, ("patch", "probes"))
    assert REFUSED not in ra.stderr and ra.stderr.count(SET_UP) >= 2, ra.stderr
    lines, _ = read_trace(a)
    assert sum(ln["t"] == "exec" for ln in lines) > 0


def test_dlopen_pending(tmp_path):
    """`--range libptdl:ptdl_work` before pt_dlopen dlopens it: pending at the
    start, the patch trap takes over once the library's code is mapped (no
    fallback to the probe trap), and its 20 calls are the probe trap's trace
    byte for byte."""
    r, lines, _ = both("pt_dlopen", "libptdl:ptdl_work", tmp_path, 20)
    assert REFUSED not in r.stderr and r.stderr.count(SET_UP) == 1, r.stderr
    assert len(invocations(lines, int(lines[0]["pc"], 16))[0]) == 20


def test_exec_into_a_range_it_does_not_take(tmp_path):
    """exec_other execs pt_refused, whose `traced` the patch trap does not
    take (`loop` and `xlat`, which its stop-free mode does not translate):
    one line, and the probe trap traces the new image: the page trap's
    trace byte for byte."""
    probe = tmp_path / "p.jsonl"
    rp = trace("pt_refused", "traced", probe, trap="patch")
    assert REFUSED in rp.stderr, rp.stderr
    r, lines, _ = both("exec_other", "traced", tmp_path, prog_path("pt_refused"), other="pages")
    refused = [ln for ln in r.stderr.splitlines() if REFUSED in ln]
    assert len(refused) == 1 and "using the probe trap" in refused[0], r.stderr


def test_fork_children_exec(tmp_path):
    """trap_fork: a fork child, a vfork child and a posix_spawn child (which
    execs this program again) all run `traced`; children are let go untraced
    under every trap, so only the parent's calls are in the trace: the probe
    trap's byte for byte."""
    r, lines, _ = both("trap_fork", "traced", tmp_path, 3)
    assert r.stderr.count(SET_UP) == 1, r.stderr


def test_exec_from_a_thread(tmp_path):
    """exec_thread 2: a second thread execs while the main thread keeps
    entering the range (holding the cache's lock at times): the kernel kills
    the main thread, the exec'ing thread becomes the process's only thread
    (its tid now the pid, its vcpu its own), and the patch trap is set up in
    the new image. Per thread, every invocation of traced is complete but the
    last of a thread the exec killed (a prefix of one); the thread that exec'd
    last ran traced 3 times before its exec and 3 after, as under the page and
    probe traps (the probe trap attaches its probes again for the new image;
    byte-identical traces of exec_thread's deterministic mode under every
    trap: test_exec_thread.py)."""
    entry = lackey.Program(prog_path("exec_thread")).span(["traced"])[0]
    res = {}
    for trap in ("patch", "pages", "probes"):
        out = tmp_path / ("%s.jsonl" % trap)
        r = trace("exec_thread", "traced", out, 2, trap=trap, timeout=120)
        assert r.stdout == native("exec_thread", 2).decode()
        if trap == "patch":
            assert r.stderr.count(SET_UP) == 3 and REFUSED not in r.stderr, r.stderr
        lines, _ = read_trace(out)
        check_vt_order(lines)
        res[trap] = (lines, invocations(lines, entry))
    shape = lambda run: [ln[:2] for ln in run]  # (each thread returns to its own stack)
    full = shape(max((run for per in res["pages"][1].values() for run in per), key=len))
    for trap, (lines, per) in res.items():
        last = lines[-1]["vcpu"]
        assert len(per) == 3, ("%s: %d threads ran traced (3: each image's main thread, the "
                               "last one exec'd twice)" % (trap, len(per)))
        for v, runs in per.items():
            for k, run in enumerate(runs):
                got = shape(run)
                ok = got == full or (k == len(runs) - 1 and v != last and got == full[:len(got)])
                assert ok, "%s: vcpu %d, invocation %d of %d: %d lines" % (
                    trap, v, k, len(runs), len(run))
        assert len(per[last]) == 6, "%s: the last thread ran traced %d times" % (
            trap, len(per[last]))
    pa, pb = res["patch"], res["pages"]
    assert pa[1][pa[0][-1]["vcpu"]] == pb[1][pb[0][-1]["vcpu"]]


def test_attached_process_that_execs(tmp_path):
    """-p PID of a shell that execs exec_self 1 a moment later, with the range
    `exec_self:traced` (pending in the shell): set up at the exec, again at
    exec_self's own exec; both calls of traced are traced, the attached
    program's output is its own, and the trace ends with its exit."""
    script = tmp_path / "later.sh"
    script.write_text("#!/bin/sh\nread line\nexec %s 1\n" % prog_path("exec_self"))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    target = subprocess.Popen([str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    out = tmp_path / "t.jsonl"
    try:
        g = subprocess.Popen([shutil.which("env") or "env", "-u", "PYTEST_CURRENT_TEST",
                              gebpf_path(), "trace", "-v", "--trap", "patch", "-p",
                              str(target.pid), "--range", prog_path("exec_self") + ":traced",
                              "-o", str(out)], stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)  # (attached: the shell waits in its read)
        target.stdin.write("go\n")
        target.stdin.close()
        assert target.wait(timeout=60) == 0
        err = g.communicate(timeout=60)[1]
    finally:
        target.kill()
    assert target.stdout.read() == native("exec_self", 1).decode()
    assert err.count(SET_UP) == 2 and REFUSED not in err, err
    lines, summary = read_trace(out)
    check_vt_order(lines)
    start = int(summary["start"], 16)
    assert sum(ln["t"] == "exec" and int(ln["pc"], 16) == start for ln in lines) == 2

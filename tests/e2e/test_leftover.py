"""What an earlier gebpf left (docs/trace.md "What an earlier gebpf left";
user/trap/patch/leftover.c, user/jit/live.c): gebpf and its worker SIGKILLed
together in the middle of a patch-trap trace (a cgroup's OOM kill, a
container stop) leave the program patched, running through a code cache
nobody serves.  The program must run on correctly by itself (the cache's
liveness word: every entry then runs the original code), and the next
trace must recognise what was left, write the program's bytes back from
its file and simply work.

pt_crash: 3 threads calling `traced` thousands of times a second, a call
out of the range and a system call inside it (tests/progs/pt_crash.c)."""
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import gebpf_path, prog_path
from test_trap_crash import maps_of, text_now, untraced, worker_of, gone

pytestmark = [pytest.mark.probetrap, pytest.mark.usefixtures("probes_ready")]

THREADS = 3


def start_prog(fill="20000p", prog="pt_crash"):   # (paced: tests/progs/pt_crash.c)
    p = subprocess.Popen([prog_path(prog), str(THREADS), fill], stdout=subprocess.PIPE)
    t0 = time.monotonic()
    while len(os.listdir("/proc/%d/task" % p.pid)) < THREADS and time.monotonic() - t0 < 10:
        time.sleep(0.01)
    return p


def trace_until_patched(pid, tmp_path, tag):
    """A -v --trap patch trace of pid, returned once its patches are in."""
    err = open(os.path.join(str(tmp_path), tag + ".err"), "w+")
    g = subprocess.Popen([gebpf_path(), "trace", "-v", "-p", str(pid), "--range", "traced",
                          "--trap", "patch", "--duration", "30",
                          "-o", os.path.join(str(tmp_path), tag + ".jsonl")],
                         stdout=subprocess.DEVNULL, stderr=err)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 60 and g.poll() is None:
        err.seek(0)
        if "entries patched" in err.read():
            break
        time.sleep(0.01)
    err.seek(0)
    text = err.read()
    assert "entries patched" in text, text
    return g, err


def kill_both(g):
    w = worker_of(g)
    assert w, "no worker"
    for pid in (w, g.pid):
        os.kill(pid, signal.SIGKILL)
    g.wait(timeout=30)
    assert gone(w, 20), "the worker did not end"


def finish(p, prog="pt_crash"):
    """SIGUSR1: each thread stops at its next call; its output must be a
    native run's given the same counts."""
    p.send_signal(signal.SIGUSR1)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 0, "%s: status %d" % (prog, p.returncode)
    counts = [ln.split()[0] for ln in out.decode().splitlines()]
    want = subprocess.run([prog_path(prog), str(THREADS), "20000"] + counts,
                          capture_output=True, timeout=120, check=True).stdout
    assert out == want, "output %r, native %r" % (out, want)


@pytest.mark.parametrize("prog", ["pt_crash", "pt_short"])
def test_both_killed_the_program_runs_on_and_the_next_trace_takes_over(prog, tmp_path):
    """pt_short (tests/progs/pt_short.c): its start's 2-byte jump and the
    trampoline it leads to, in the nops before it, are both written back
    (a trampoline alone would leave the start jumping into nops that lead
    back to it)."""
    p = start_prog(prog=prog)
    try:
        maps0 = maps_of(p.pid)
        g, _ = trace_until_patched(p.pid, tmp_path, "first")
        time.sleep(0.3)
        kill_both(g)
        assert untraced(p.pid, 20)
        code = text_now(p.pid, prog)
        assert code is not None, "%s ended" % prog
        assert not all(got == want for got, want in code.values()), \
            "the patches are there (what the kill left): %r" % code
        time.sleep(0.5)     # it runs on, by itself, through the cache nobody serves
        assert p.poll() is None, "%s died: %s" % (prog, p.returncode)

        # The next trace: recognised, written back, traced.
        out = os.path.join(str(tmp_path), "second.jsonl")
        r = subprocess.run([gebpf_path(), "trace", "-v", "-p", str(p.pid), "--range", "traced",
                            "--duration", "1", "-o", out], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        m = re.search(r"a code cache gebpf \d+ left at 0x[0-9a-f]+-0x[0-9a-f]+ \(range "
                      r"0x[0-9a-f]+-0x[0-9a-f]+ of [^)]*" + prog + r"\): marked gone, its ring's "
                      r"memory given back, (\d+) patched places written back from their "
                      r"files, (\d+) threads inside it", r.stderr)
        assert m, r.stderr
        assert int(m.group(1)) >= 2, "traced's entries (its start, helper's return site)"
        if int(m.group(2)) == 0:
            assert "entries patched" in r.stderr, "the patch trap took over:\n" + r.stderr
        else:   # a thread was inside a stretch when it attached: the probe trap traced
            assert "code cache an earlier gebpf left" in r.stderr, r.stderr
        with open(out) as f:
            lines = f.read().splitlines()
        summary = lines[-1]
        assert '"t":"summary"' in summary
        insns = int(re.search(r'"insns":(\d+)', summary).group(1))
        assert insns > 0, summary
        assert untraced(p.pid, 20)
        code = text_now(p.pid, prog)
        assert code is not None, "%s ended" % prog
        assert all(got == want for got, want in code.values()), \
            "the text is the file's after the second trace: %r" % code
        left = [ln for ln in maps_of(p.pid).splitlines() if ln not in maps0.splitlines()]
        assert len(left) <= 2, "the earlier cache stays (two mappings), no other:\n%s" % "\n".join(left)
        finish(p, prog)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_a_stale_cache_is_not_taken_for_the_programs_own_code(tmp_path):
    """Both killed, then a trace with --trap probes: it too must find the
    jumps and write the file's bytes back before it reads the code (a uprobe
    on a jump into a cache nobody serves, or the jump decoded as the
    program's instruction, would break the program)."""
    p = start_prog()
    try:
        g, _ = trace_until_patched(p.pid, tmp_path, "first")
        kill_both(g)
        assert untraced(p.pid, 20)
        out = os.path.join(str(tmp_path), "probes.jsonl")
        r = subprocess.run([gebpf_path(), "trace", "-v", "-p", str(p.pid), "--range", "traced",
                            "--trap", "probes", "--duration", "1", "-o", out],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert "patched places written back from their files" in r.stderr, r.stderr
        code = text_now(p.pid, "pt_crash")
        assert code is not None, "pt_crash ended"
        assert all(got == want for got, want in code.values()), code
        with open(out) as f:
            summary = f.read().splitlines()[-1]
        assert int(re.search(r'"insns":(\d+)', summary).group(1)) > 0, summary
        finish(p)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()

"""`gebpf sample` (DWARF stacks) whose user side lags behind its target:
samples still queued when the target exits must unwind as well as the
ones read while it lived.  A slow machine (QEMU TCG in scripts/kmatrix)
does this by itself; here gebpf is stopped (SIGSTOP) from the moment it
has read the target's modules until the target is a zombie."""
import os
import signal
import subprocess
import time

import pytest

import conftest
from sample_util import counts_line, need_bpf, parse_folded

# Sampling counts samples of its targets' CPU time, which other tests
# running beside them take (at load 40: 9 samples where 100 were asked, BPF
# programs of another sampler counted as left over): these tests run alone,
# in scripts/test's serial part (docs/testing.md).
pytestmark = pytest.mark.serial

CHAIN = ["main", "chain1", "chain2", "chain3", "chain4", "chain5", "leaf_hot"]


def wait_for(cond, what, timeout=60):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.02)


def has_open(pid, suffix):
    """Whether process pid holds a file descriptor to a file named *suffix."""
    d = "/proc/%d/fd" % pid
    for fd in os.listdir(d):
        try:
            if os.readlink(os.path.join(d, fd)).endswith(suffix):
                return True
        except OSError:
            pass
    return False


def state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def test_samples_drained_after_the_target_exited_unwind(gebpf, tmp_path):
    """unwind_chain spends some of its time in the vDSO (a pc in no mapped
    file, after which the unwinder reads the maps again: of a zombie, they
    are empty).  Every sample in the leaf, read before or after the exit,
    unwinds through the whole chain to _start."""
    need_bpf()
    out = tmp_path / "f.folded"
    p = subprocess.Popen([gebpf, "sample", "--folded", "--kernel", "-F", "997", "-o", str(out),
                          "--", conftest.prog_path("unwind_chain"), "1.5", "20000"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=conftest.stable_env())
    try:
        kids = "/proc/%d/task/%d/children" % (p.pid, p.pid)
        wait_for(lambda: p.poll() is not None or open(kids).read().split(), "the target")
        assert p.poll() is None, p.communicate()
        target = int(open(kids).read().split()[0])
        # The library of the leaf is open: its maps were read while it lived.
        wait_for(lambda: p.poll() is not None or has_open(p.pid, "/libunwindleaf.so"),
                 "gebpf to read the target's modules")
        assert p.poll() is None, p.communicate()
        os.kill(p.pid, signal.SIGSTOP)
        try:
            wait_for(lambda: state(target) == "Z", "the target to exit")
        finally:
            os.kill(p.pid, signal.SIGCONT)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    rows = parse_folded(out.read_text())
    n = counts_line(err)
    assert sum(c for _, c in rows) == n["kept"] == n["unwound"] + n["truncated"], (n, err)
    leaf = sum(c for s, c in rows if s[-1] == CHAIN[-1])
    whole = sum(c for s, c in rows if s[0] == "_start" and s[-len(CHAIN):] == CHAIN)
    vdso = sum(c for s, c in rows if s[-1] != CHAIN[-1] and ("clock_gettime" in s or "[unknown]" in s))
    assert leaf > 300, rows[:5]
    assert vdso > 10, "too few samples in the vDSO to test anything: %r" % rows[:10]
    assert whole >= 0.95 * leaf, (whole, leaf, [r for r in rows if r[0][-1] == CHAIN[-1]][:5])

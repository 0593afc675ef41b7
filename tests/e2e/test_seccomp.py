"""Targets under seccomp (issue 23, case 4): gebpf reads each thread's
seccomp state before it injects anything (docs/trace.md "Seccomp").

tests/progs/seccomp_prog enters seccomp (strict mode, or one of three
filters), says "ready", waits for a byte on stdin (gebpf attaches
meanwhile), calls `traced` ITERS times, says "done", waits for another byte
(the test ends the trace with SIGTERM), prints its checksum and exits.  In
strict mode it makes only read, write and exit after entering it: the
injected mmap of the code cache or mprotect of the page trap killed it.
Every run must finish with the native checksum, and its trace must be the
reference's byte for byte (--trap none --engine step: nothing injected,
nothing translated)."""
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import gebpf_path, prog_path, read_trace, stable_env

pytestmark = pytest.mark.usefixtures("trace_ready")

ITERS = 300          # 300 calls of 72 instructions: ~1 s single-stepped here


def native_checksum(mode):
    r = subprocess.run([prog_path("seccomp_prog"), mode, str(ITERS)], input=b"ab",
                       capture_output=True, timeout=60)
    assert r.returncode == 0, (mode, r.returncode, r.stderr)
    assert r.stdout.startswith(b"ready\ndone\nchecksum "), r.stdout
    return r.stdout.split(b"\n")[2]


def tracer_of(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"^TracerPid:\s*(\d+)", f.read(), re.M).group(1))


def traced_run(mode, out, extra):
    """seccomp_prog MODE under `gebpf trace -p`: (program's exit status, its
    checksum line, gebpf's exit status, gebpf's stderr)."""
    # ASLR off (setarch execs the program: same pid): the `ret` reads the
    # same stack address in every run.
    p = subprocess.Popen(["setarch", "x86_64", "-R", prog_path("seccomp_prog"), mode,
                          str(ITERS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         env=stable_env())
    g = None
    try:
        assert p.stdout.readline() == b"ready\n"
        assert os.readlink("/proc/%d/exe" % p.pid) == prog_path("seccomp_prog")
        with open("/proc/%d/status" % p.pid) as f:
            want = {"strict": "1"}.get(mode, "2")
            assert re.search(r"^Seccomp:\s+%s$" % want, f.read(), re.M)
        g = subprocess.Popen([gebpf_path(), "trace", "-p", str(p.pid), "--range", "traced",
                              "--max-events", "0", "-o", str(out)] + extra,
                             stderr=subprocess.PIPE, text=True, env=stable_env())
        # Attached: the thread stays stopped until the trace is set up, so
        # the byte written now is read only under the trace.
        end = time.monotonic() + 30
        while tracer_of(p.pid) == 0:
            assert g.poll() is None and time.monotonic() < end, "gebpf did not attach"
            time.sleep(0.01)
        p.stdin.write(b"a")
        p.stdin.flush()
        done = p.stdout.readline()
        if done != b"done\n":   # killed (by its seccomp state) under the trace
            p.wait(timeout=30)
            g.wait(timeout=30)
            return p.returncode, done, g.returncode, g.stderr.read()
        g.send_signal(signal.SIGTERM)
        err = g.communicate(timeout=60)[1]
        p.stdin.write(b"b")
        p.stdin.flush()
        rest = p.stdout.read()
        p.wait(timeout=30)
        return p.returncode, rest.rstrip(b"\n"), g.returncode, err
    finally:
        for proc in (g, p):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


def warnings(err):
    return [ln for ln in err.splitlines() if ln.startswith("gebpf: warning: ")]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The trace of each mode with nothing injected: --trap none --engine step."""
    refs = {}

    def get(mode):
        if mode not in refs:
            out = tmp_path_factory.mktemp("ref") / ("%s.jsonl" % mode)
            rc, csum, grc, err = traced_run(mode, out, ["--trap", "none", "--engine", "step"])
            assert rc == 0 and csum == native_checksum(mode), (mode, rc, csum, err)
            assert grc == 0 and not warnings(err), err
            lines, summary = read_trace(str(out))
            assert summary["insns"] == ITERS * 72, summary
            refs[mode] = out.read_bytes()
        return refs[mode]
    return get


@pytest.mark.parametrize("extra, used", [
    ([], "the step engine and the probe trap"),
    (["--trap", "pages"], "the step engine and no entry trap (--trap none)"),
    (["--engine", "jit"], "the step engine and the probe trap"),
])
def test_strict_mode_is_traced_without_system_calls(reference, tmp_path, extra, used):
    """Strict seccomp, attached: one warning naming the pid and what is used
    instead; the program finishes with its checksum; the trace is exact."""
    out = tmp_path / "t.jsonl"
    rc, csum, grc, err = traced_run("strict", out, extra)
    assert rc == 0, "the target died under the trace (exit %d): %s" % (rc, err)
    assert csum == native_checksum("strict"), (csum, err)
    assert grc == 0, err
    w = warnings(err)
    assert len(w) == 1 and "strict seccomp mode" in w[0] and used in w[0], err
    assert re.search(r"pid \d+: thread \d+ is in strict seccomp mode", w[0]), w[0]
    assert out.read_bytes() == reference("strict")


def test_filter_that_kills_getpid_keeps_the_code_cache(reference, tmp_path):
    """A filter that kills on getpid: the code cache's exit stubs make a
    getpid, but gebpf skips it at its entry stop and the filter sees -1, so
    the translating engine is kept (silently) and the program survives."""
    out = tmp_path / "t.jsonl"
    rc, csum, grc, err = traced_run("kill-getpid", out, ["-v"])
    assert rc == 0 and csum == native_checksum("kill-getpid"), (rc, csum, err)
    assert grc == 0 and not warnings(err), err
    assert "code cache at" in err, "the translating engine was not used: %s" % err[-2000:]
    assert out.read_bytes() == reference("kill-getpid")


@pytest.mark.parametrize("mode, refused", [
    ("kill-mmap", "kill the process on the mmap of the code cache"),
    ("allowlist", "kill the process on the mmap of the code cache"),
])
def test_filter_that_refuses_the_code_cache(reference, tmp_path, mode, refused):
    """A filter that kills on mmap (or allows only read/write/exit): the
    filter is run on each call first; the step engine is used instead."""
    out = tmp_path / "t.jsonl"
    rc, csum, grc, err = traced_run(mode, out, [])
    assert rc == 0, "the target died under the trace (exit %d): %s" % (rc, err)
    assert csum == native_checksum(mode), (csum, err)
    assert grc == 0, err
    w = warnings(err)
    assert len(w) == 1 and "under a seccomp filter" in w[0] and refused in w[0], err
    assert "the step engine and the probe trap" in w[0], w[0]
    assert out.read_bytes() == reference(mode)


def test_allowlist_refuses_the_page_trap(reference, tmp_path):
    out = tmp_path / "t.jsonl"
    rc, csum, grc, err = traced_run("allowlist", out, ["--trap", "pages"])
    assert rc == 0 and csum == native_checksum("allowlist"), (rc, csum, err)
    w = warnings(err)
    assert len(w) == 1 and "no entry trap (--trap none)" in w[0], err
    assert out.read_bytes() == reference("allowlist")

"""The page trap on attached targets (tests/e2e/test_pagetrap.py has the
launched ones): attach to a server-like loop, trace, detach, and demand
that the target is left exactly as found (protections, code bytes,
signals, tracer) after every way out, and that it keeps answering as it
does natively.  Test program: tests/progs/trap_server.c.
"""
import os
import re
import select
import signal
import subprocess
import time

import pytest

from conftest import (check_vt_order, exits_within, gebpf_path, prog_path, read_trace, run_gebpf,
                      stable_env, started, trace_summary, trap_args)
from test_pagetrap import ENTERS, symbol

pytestmark = pytest.mark.usefixtures("trace_ready")


# ------------------------------------------------------------ (6), (7) attach to a server, ways out

SYSCALL_ERROR = re.compile(rb"^(poll|read): errno \d+\n", re.M)


class Server:
    """trap_server under test: ask(n) sends request N and returns its answer
    line; finish() closes its input and returns the rest of its output.
    Lines saying that its poll()/read() failed (natively impossible) are set
    aside in .errors; check_errors() fails the test if there were any."""

    def __init__(self, tick_us=1000):
        self.p = subprocess.Popen([prog_path("trap_server"), str(tick_us)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, env=stable_env())
        self.pid = self.p.pid
        self.buf = b""
        self.errors = []
        assert self.line(10) == b"ready\n", "trap_server did not start"

    def line(self, timeout):
        end = time.monotonic() + timeout
        fd = self.p.stdout.fileno()
        while True:
            while b"\n" not in self.buf:
                left = end - time.monotonic()
                if left <= 0 or not select_read(fd, left):
                    pytest.fail("trap_server %d: no answer within %.0f s (state %s)"
                                % (self.pid, timeout, proc_state(self.pid)))
                chunk = os.read(fd, 4096)
                if not chunk:
                    pytest.fail("trap_server %d: output closed (exit %s)" % (self.pid, self.p.poll()))
                self.buf += chunk
            ln, self.buf = self.buf.split(b"\n", 1)
            ln += b"\n"
            if not SYSCALL_ERROR.match(ln):
                return ln
            self.errors.append(ln.decode().strip())

    def check_errors(self):
        assert not self.errors, (
            "trap_server %d: a blocked syscall failed under the trace (%s): an interrupted "
            "syscall was not restarted (a -ERESTART* code leaked to the program)"
            % (self.pid, "; ".join(self.errors)))

    def ask(self, n, timeout=20):
        self.p.stdin.write(b"%d\n" % n)
        self.p.stdin.flush()
        return self.line(timeout)

    def finish(self, timeout=20):
        rest, _ = self.p.communicate(timeout=timeout)   # closes its stdin
        rest = self.buf + rest
        self.errors += [m.group(0).decode().strip() for m in SYSCALL_ERROR.finditer(rest)]
        return SYSCALL_ERROR.sub(b"", rest)

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(timeout=10)


def select_read(fd, timeout):
    r, _, _ = select.select([fd], [], [], timeout)
    return bool(r)


def proc_state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


@pytest.fixture
def server():
    yield from started(Server)


def answers(reqs):
    """The native server's answers to REQS (request -> answer line)."""
    r = subprocess.run([prog_path("trap_server"), "0"], input=b"".join(b"%d\n" % n for n in reqs),
                       capture_output=True, timeout=60, check=True)
    out = r.stdout.splitlines(keepends=True)
    assert out[0] == b"ready\n" and out[-1] == b"bye %d\n" % len(reqs), out
    return dict(zip(reqs, out[1:-1]))


def handle_page(pid):
    """The perms of the mapping holding trap_server's `handle` in PID."""
    addr = symbol("trap_server", "handle")[0]
    with open("/proc/%d/maps" % pid) as f:
        for ln in f:
            lo, hi = (int(x, 16) for x in ln.split()[0].split("-"))
            if lo <= addr < hi:
                return ln.split()[1]
    return None


def process_picture(pid):
    """What gebpf must leave as it found: the maps (protections, no extra
    mapping), the bytes of `handle`'s page (no breakpoint), the tracer and
    the signal state (nothing pending, same masks)."""
    with open("/proc/%d/maps" % pid) as f:
        maps = f.read()
    page = symbol("trap_server", "handle")[0] & ~0xfff
    with open("/proc/%d/mem" % pid, "rb") as f:
        f.seek(page)
        code = f.read(4096)
    status = {}
    with open("/proc/%d/status" % pid) as f:
        for ln in f:
            k, _, v = ln.partition(":")
            if k in ("TracerPid", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt"):
                status[k] = v.strip()
    return {"maps": maps, "code": code, "status": status, "state": proc_state(pid)}


def same_picture(before, after, how):
    assert after["maps"] == before["maps"], "%s: /proc/PID/maps changed:\nbefore:\n%s\nafter:\n%s" % (
        how, before["maps"], after["maps"])
    assert after["code"] == before["code"], "%s: the code page of `handle` changed" % how
    assert after["status"]["TracerPid"] == "0", "%s: still traced: %s" % (how, after["status"])
    assert after["status"] == before["status"], "%s: signal state: before %s, after %s" % (
        how, before["status"], after["status"])
    assert after["state"] in ("S", "R"), "%s: target left in state %s" % (how, after["state"])


def attach_while_serving(srv, gebpf_args, stop=None, out=None):
    """Run `gebpf trace -p SERVER --range handle ARGS` while asking the
    server requests of 100 calls; STOP (a signal) is sent after 0.8 s.
    Returns (gebpf's CompletedProcess-like result, {request: answer},
    whether the range's page was seen without exec while tracing)."""
    g = subprocess.Popen([gebpf_path(), "trace", *trap_args("pages"), "-p", str(srv.pid), "--range", "handle",
                          "-o", str(out)] + [str(a) for a in gebpf_args],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=stable_env())
    got, armed, n, t0, sent = {}, False, 100, time.monotonic(), False
    try:
        while g.poll() is None and time.monotonic() - t0 < 30:
            got[n] = srv.ask(n)
            # the page is open while an idle tick steps through `handle`:
            # look a few times
            for _ in range(10):
                if armed or g.poll() is not None:
                    break
                armed = handle_page(srv.pid) == "r--p"
                time.sleep(0.002)
            n += 1
            if stop and not sent and time.monotonic() - t0 > 0.8:
                g.send_signal(stop)
                sent = True
            time.sleep(0.02)
        _, err = g.communicate(timeout=30)
    finally:
        if g.poll() is None:
            g.kill()
            g.wait()
    g.stderr_text = err.decode(errors="replace")
    return g, got, armed


def test_attach_server_duration(server, tmp_path):
    """(6) Attach to a serving loop, trace 1 s, detach: every answer (before,
    during and after the trace) is the native one, the page trap was armed
    meanwhile, and the server keeps serving."""
    srv = server()
    got = {7: srv.ask(7)}
    out = tmp_path / "out.jsonl"
    g, during, armed = attach_while_serving(srv, ["--duration", "1"], out=out)
    assert g.returncode == 0, g.stderr_text
    # (at least one: how many in 1 s is a rate; 1 at load 40)
    assert len(during) >= 1, "no request answered during the 1 s trace"
    got.update(during)
    for n in (3, 1000):
        got[n] = srv.ask(n)
    rest = srv.finish()
    assert srv.p.returncode == 0 and rest == b"bye %d\n" % len(got), rest
    want = answers(list(got))
    bad = {n: (got[n], want[n]) for n in got if got[n] != want[n]}
    assert not bad, "answers changed by the trace (got, want): %s" % bad
    lines, summary = read_trace(out)
    check_vt_order(lines)
    lo, hi = symbol("trap_server", "handle")
    assert summary["insns"] > 0
    assert all(lo <= int(ln["pc"], 16) <= hi for ln in lines), "a PC outside `handle`"
    assert armed, "`handle`'s page never lost PROT_EXEC while traced: was the page trap used?"
    srv.check_errors()


@pytest.mark.parametrize("tick_us", [0, 300000], ids=["poll-forever", "poll-300ms"])
def test_attach_to_idle_server(tick_us, server, tmp_path):
    """Attach to a server blocked in poll() (no timeout: -ERESTARTNOHAND on
    the interrupt; 300 ms: -ERESTART_RESTARTBLOCK), trace 1 s, Ctrl-C.  The
    interrupted syscall must resume as if nothing happened: no "poll: errno"
    line (natively impossible), then the right answers."""
    srv = server(tick_us)
    first = srv.ask(5)
    time.sleep(0.2)
    out = tmp_path / "out.jsonl"
    # ended by SIGINT after 1 s (test_duration_on_idle_target checks
    # --duration on an idle target)
    g = subprocess.Popen([gebpf_path(), "trace", *trap_args("pages"), "-p", str(srv.pid), "--range", "handle",
                          "-o", str(out)], stderr=subprocess.PIPE, env=stable_env())
    time.sleep(1)
    g.send_signal(signal.SIGINT)
    err = exits_within(g, 20, "SIGINT")
    assert g.returncode == 0, err
    trace_summary(out)
    got = [srv.ask(n) for n in (7, 300)]
    rest = srv.finish()
    srv.check_errors()
    want = answers([5, 7, 300])
    assert [first] + got + [rest] == [want[5], want[7], want[300], b"bye 3\n"], (
        "answers after the trace: %r" % ([first] + got + [rest]))


@pytest.mark.parametrize("step_all", [False, True], ids=["trap", "step-all"])
def test_duration_on_idle_target(step_all, server, tmp_path):
    """`--duration 1` on an attached target that sits blocked in poll() and
    never enters the range: the trace still ends (before: never).  (How
    soon after 1 s: bench/bench_pace.py.)"""
    srv = server(0)
    srv.ask(3)
    out = tmp_path / "out.jsonl"
    argv = ["trace", *trap_args("pages"), "-p", str(srv.pid), "--range", "handle", "--duration", "1", "-o", str(out)]
    t0 = time.monotonic()
    try:
        r = run_gebpf(argv + (["--step-all"] if step_all else []), timeout=60)
    except subprocess.TimeoutExpired:
        r = None
    took = time.monotonic() - t0
    assert r is not None, "--duration 1 on an idle target: gebpf still tracing after 60 s"
    assert r.returncode == 0, r.stderr
    print("--duration 1 took %.1f s" % took)
    lines, summary = read_trace(out)
    assert summary["insns"] == 0


WAYS_OUT = {
    "duration": (["--duration", "1"], None),
    "max-insns": (["--max-insns", "3000"], None),
    "SIGINT": ([], signal.SIGINT),
    "SIGTERM": ([], signal.SIGTERM),
}


@pytest.mark.parametrize("how", sorted(WAYS_OUT))
def test_ways_out_restore_the_target(how, server, tmp_path):
    """(7) After each way out of an attached trace, the target is as found:
    same maps (protections restored, no mapping left), same code bytes, not
    traced, no pending signal, same masks; and it serves right answers."""
    args, sig = WAYS_OUT[how]
    srv = server()
    first = srv.ask(5)
    before = process_picture(srv.pid)
    out = tmp_path / "out.jsonl"
    g, during, armed = attach_while_serving(srv, args, stop=sig, out=out)
    assert g.returncode == 0, "%s: gebpf exit %d: %s" % (how, g.returncode, g.stderr_text)
    lines, summary = read_trace(out)
    assert summary["insns"] > 0
    if how == "max-insns":
        assert summary["insns"] == 3000, summary
    time.sleep(0.1)
    after = process_picture(srv.pid)
    same_picture(before, after, how)
    assert armed, "%s: the range's page never lost PROT_EXEC while traced" % how
    last = srv.ask(250)
    rest = srv.finish()
    want = answers([5] + list(during) + [250])
    assert first == want[5] and last == want[250]
    assert {n: during[n] for n in during} == {n: want[n] for n in during}
    assert rest == b"bye %d\n" % (len(during) + 2) and srv.p.returncode == 0
    srv.check_errors()


def test_way_out_target_exits_launch_mode(tmp_path):
    """(7) The launched target exits while the trap is armed: gebpf ends
    with exit 0 and the summary, and the program's output is the native one."""
    out = tmp_path / "out.jsonl"
    reqs = b"100\n200\n300\n"
    r = subprocess.run([gebpf_path(), "trace", *trap_args("pages"), "-v", "--range", "handle", "-o", str(out), "--",
                        prog_path("trap_server"), "1000"], input=reqs, capture_output=True,
                       timeout=60, env=stable_env())
    assert r.returncode == 0, r.stderr
    want = subprocess.run([prog_path("trap_server"), "0"], input=reqs, capture_output=True,
                          timeout=60).stdout
    assert r.stdout == want
    lines, summary = read_trace(out)
    assert summary["insns"] >= 600 * 6, summary
    assert ENTERS.encode() in r.stderr


def test_way_out_target_exits_attach_mode(server, tmp_path):
    """(7) An attached target exits during the trace: the summary is written
    and gebpf says so in one line naming the pid (or exits 0)."""
    srv = server()
    srv.ask(10)
    out = tmp_path / "out.jsonl"
    g = subprocess.Popen([gebpf_path(), "trace", *trap_args("pages"), "-p", str(srv.pid), "--range", "handle", "-o",
                          str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         env=stable_env())
    time.sleep(0.7)
    srv.ask(100)
    rest = srv.finish()
    assert rest == b"bye 2\n" and srv.p.returncode == 0, (rest, srv.p.returncode)
    srv.check_errors()
    err = exits_within(g, 30, "its target exited")
    assert g.returncode in (0, 1), err
    if g.returncode == 1:
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("gebpf: ") and str(srv.pid) in lines[0], err
    lines, summary = read_trace(out)
    assert summary["insns"] >= 600, summary


def test_gebpf_sigkilled_launch_mode_kills_target(tmp_path):
    """If gebpf is SIGKILLed while the trap is armed, a launched target would
    fault at its next entry: it dies with gebpf (PTRACE_O_EXITKILL) instead
    of running on half-protected (documented in `gebpf trace --help`)."""
    g = subprocess.Popen([gebpf_path(), "trace", *trap_args("pages"), "--range", "handle", "-o",
                          str(tmp_path / "out.jsonl"), "--", prog_path("trap_server"), "1000"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=stable_env())
    try:
        assert g.stdout.readline() == b"ready\n"
        kids = []
        with open("/proc/%d/task/%d/children" % (g.pid, g.pid)) as f:
            kids = [int(x) for x in f.read().split()]
        assert len(kids) == 1, kids
        time.sleep(0.3)
        g.kill()
        g.wait(timeout=10)
        end = time.monotonic() + 10
        while proc_state(kids[0]) not in ("gone", "Z") and time.monotonic() < end:
            time.sleep(0.05)
        assert proc_state(kids[0]) in ("gone", "Z"), "the target outlived a SIGKILLed gebpf"
    finally:
        if g.poll() is None:
            g.kill()
            g.wait()
    r = run_gebpf(["trace", "--help"])
    assert "SIGKILL" in r.stdout + r.stderr, "--help does not warn about SIGKILL"

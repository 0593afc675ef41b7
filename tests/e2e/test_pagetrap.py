"""The page trap: native speed outside the range, the same trace inside.

Without --step-all, `gebpf trace --range R` runs the target natively and
single-steps only while the PC is on the range's pages; --step-all steps
everything.  design.md: "speed never changes the output".  So almost every
test here traces the same launch twice, with and without --step-all, and
demands byte-identical traces (a multiset of per-invocation sequences for
multi-threaded programs, whose interleaving may legitimately differ), plus
the program's own output as in a native run.  The attach tests check that
the target is left exactly as found (protections, code, signals, tracer).

Test programs: tests/progs/trap_*.c (and lib/trapfoo.c); docs/testing.md
"Page trap tests" lists what each one is for.
"""
import collections
import os
import re
import select
import signal
import subprocess
import time

import pytest

import lackey
from conftest import (PROGS, check_vt_order, gebpf_path, prog_path, range_arg, read_trace,
                      run_gebpf, stable_env)

pytestmark = pytest.mark.usefixtures("trace_ready")

ENTERS = "enters the range"   # gebpf -v says so at each page-trap entry


# ------------------------------------------------------------ helpers

def native(name, *args, timeout=60):
    """stdout of a native run (ASLR on: the programs print no absolute address)."""
    r = subprocess.run([prog_path(name)] + [str(a) for a in args], capture_output=True,
                       timeout=timeout, env=stable_env())
    assert r.returncode == 0, "%s %s exits %d natively" % (name, args, r.returncode)
    return r.stdout


def trace(name, rng, out, *args, step_all=False, timeout=60, extra=()):
    """Launch PROG ARGS under `gebpf trace -v --range RNG -o OUT` (with
    --step-all or not); a run that does not end in TIMEOUT seconds fails the
    test as a hang (gebpf is SIGKILLed; the target dies with it: EXITKILL)."""
    argv = ["trace", "-v", "--range", rng, "-o", str(out)] + list(extra)
    if step_all:
        argv.append("--step-all")
    argv += ["--", prog_path(name)] + [str(a) for a in args]
    t0 = time.monotonic()
    try:
        r = run_gebpf(argv, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr or ""
        r = None
    if r is None:
        pytest.fail("gebpf %s hung: no end after %d s (a deadlock?); its stderr:\n%s"
                    % (" ".join(argv), timeout, err[-2000:]))
    r.elapsed = time.monotonic() - t0
    assert r.returncode == 0, "gebpf %s: exit %d: %s" % (" ".join(argv), r.returncode, r.stderr)
    return r


def same_file(a, b, what):
    """Byte equality of two traces, reporting the first differing line."""
    da, db = a.read_bytes(), b.read_bytes()
    if da == db:
        return
    la, lb = da.decode().splitlines(), db.decode().splitlines()
    i = next((k for k in range(min(len(la), len(lb))) if la[k] != lb[k]), min(len(la), len(lb)))
    pytest.fail("%s: the page-trap trace differs from --step-all at line %d (of %d vs %d):\n"
                "  trap:     %s\n  step-all: %s\n  trap summary:     %s\n  step-all summary: %s"
                % (what, i + 1, len(la), len(lb), la[i] if i < len(la) else "<end>",
                   lb[i] if i < len(lb) else "<end>", la[-1] if la else "", lb[-1] if lb else ""))


def trap_vs_step_all(name, rng, tmp_path, *args, timeout=60, want_stdout=None):
    """Trace NAME ARGS both ways; the traces must be byte-identical and well
    formed, and the program's output that of a native run.  Returns
    (lines, summary, trap run, step-all run)."""
    a, b = tmp_path / "trap.jsonl", tmp_path / "stepall.jsonl"
    ra = trace(name, rng, a, *args, timeout=timeout)
    rb = trace(name, rng, b, *args, step_all=True, timeout=timeout)
    want = native(name, *args) if want_stdout is None else want_stdout
    assert ra.stdout.encode() == want, "%s printed differently under the page trap:\n%s\nnatively:\n%s" \
        % (name, ra.stdout, want.decode())
    assert rb.stdout.encode() == want, "%s printed differently under --step-all:\n%s" % (name, rb.stdout)
    same_file(a, b, "%s %s --range %s" % (name, " ".join(map(str, args)), rng))
    lines, summary = read_trace(a)
    check_vt_order(lines)
    assert summary["dropped"] == 0
    assert ENTERS not in rb.stderr, "--step-all must not use the page trap: %s" % rb.stderr
    if summary["insns"]:
        assert ENTERS in ra.stderr, ("the page trap was not used (no %r in gebpf -v): %s"
                                     % (ENTERS, ra.stderr[-1500:]))
    return lines, summary, ra, rb


def symbol(name, sym):
    start, end = lackey.Program(prog_path(name)).span([sym])
    return start, end


def syscall_pcs(name, sym):
    p = lackey.Program(prog_path(name))
    table = p.insns(*p.span([sym]))
    return sorted(pc for pc, txt in table.items() if txt == "syscall")


def invocations(lines, entry):
    """vcpu -> list of invocations, split at each exec of ENTRY; each
    invocation a tuple of (t, pc, addr, size) lines (vcpu and vt dropped)."""
    per = collections.defaultdict(list)
    for ln in lines:
        if ln["t"] == "exec" and (int(ln["pc"], 16) == entry or not per[ln["vcpu"]]):
            per[ln["vcpu"]].append([])
        if ln["t"] in ("exec", "read", "write"):
            per[ln["vcpu"]][-1].append((ln["t"], ln["pc"], ln.get("addr"), ln.get("size")))
    return {v: [tuple(x) for x in runs] for v, runs in per.items()}


def bag(per):
    return collections.Counter(run for runs in per.values() for run in runs)


def same_bag(mine, theirs, what):
    extra, missing = mine - theirs, theirs - mine
    assert not extra and not missing, (
        "%s: %d invocations only under the page trap, %d only under --step-all; first of each:\n"
        "  trap only:     %s\n  step-all only: %s"
        % (what, sum(extra.values()), sum(missing.values()), next(iter(extra), None),
           next(iter(missing), None)))


# ------------------------------------------------------------ (1) every exact-test program

SINGLE = sorted(n for n, s in PROGS.items() if not s.get("threads"))
THREADED = sorted(n for n, s in PROGS.items() if s.get("threads"))


@pytest.mark.parametrize("name", SINGLE)
def test_exact_programs_trap_equals_step_all(name, tmp_path):
    """Every program of test_exact.py: the page-trap trace is byte for byte
    the --step-all trace (test_exact.py checks the latter against lackey)."""
    a, b = tmp_path / "trap.jsonl", tmp_path / "stepall.jsonl"
    ra = trace(name, range_arg(name), a)
    rb = trace(name, range_arg(name), b, step_all=True)
    assert ra.stdout == rb.stdout, "%s printed differently with and without the trap" % name
    same_file(a, b, name)
    lines, summary = read_trace(a)
    assert summary["insns"] > 0 and summary["dropped"] == 0
    assert ENTERS in ra.stderr, "the page trap was not used for %s: %s" % (name, ra.stderr)


@pytest.mark.parametrize("name", THREADED)
def test_exact_threads_trap_equals_step_all(name, tmp_path):
    """The two-thread program: vcpu numbering and interleaving may differ, so
    the per-invocation sequences are compared as multisets."""
    a, b = tmp_path / "trap.jsonl", tmp_path / "stepall.jsonl"
    ra = trace(name, range_arg(name), a)
    rb = trace(name, range_arg(name), b, step_all=True)
    assert ra.stdout == rb.stdout == native(name).decode()
    (la, sa), (lb, sb) = read_trace(a), read_trace(b)
    check_vt_order(la)
    for k in ("insns", "mem", "events"):
        assert sa[k] == sb[k], "summary %s: trap %s, step-all %s" % (k, sa, sb)
    entry = lackey.Program(prog_path(name)).range_of(range_arg(name))[0]
    pa, pb = invocations(la, entry), invocations(lb, entry)
    assert sorted(map(len, pa.values())) == sorted(map(len, pb.values())) == [3, 3], \
        "invocations per vcpu: trap %s, step-all %s" % (
            {v: len(r) for v, r in pa.items()}, {v: len(r) for v, r in pb.items()})
    same_bag(bag(pa), bag(pb), name)


# ------------------------------------------------------------ (2) the hot function

HOT_LEN = 11   # instructions per call of trap_hot's `traced` (TRACED_LEN there)


def hot_pcs():
    start, end = symbol("trap_hot", "traced")
    p = lackey.Program(prog_path("trap_hot"))
    pcs = sorted(p.insns(start, end))
    assert len(pcs) == HOT_LEN, "trap_hot's traced has %d instructions, want %d" % (len(pcs), HOT_LEN)
    return pcs


@pytest.mark.parametrize("args", [(100, 100), (100, 100, 3)], ids=["alone", "shared-page"])
def test_hot_function_trap_equals_step_all(args, tmp_path):
    """trap_hot on a loop small enough to single-step: the same bytes both
    ways.  "shared-page": `neighbour`, out of the range but on its page, is
    called 3 times per iteration (stepped, never emitted)."""
    lines, summary, _, _ = trap_vs_step_all("trap_hot", "traced", tmp_path, *args)
    assert summary["insns"] == args[0] * HOT_LEN, summary
    pcs = {hex(pc) for pc in hot_pcs()}
    assert {ln["pc"] for ln in lines} == pcs, "exec lines outside `traced` (the neighbour?)"


def test_hot_function_1e8_instructions(tmp_path):
    """trap_hot's defaults: 10,000 calls of an 11-instruction function among
    ~1e8 instructions of out-of-range work.  Single-stepping all of it would
    take over an hour here; with the trap it must finish within 60 s, with
    exactly 10,000 x 11 exec lines, each call the same 11 PCs in order."""
    out = tmp_path / "big.jsonl"
    want = native("trap_hot")
    r = trace("trap_hot", "traced", out, timeout=120)
    assert r.stdout.encode() == want, "trap_hot printed %r, natively %r" % (r.stdout, want)
    assert r.elapsed < 60, "the trap took %.1f s for 110,000 in-range instructions" % r.elapsed
    lines, summary = read_trace(out)
    assert summary["dropped"] == 0
    assert summary["insns"] == 10000 * HOT_LEN, summary
    assert summary["mem"] == 10000 * 6, summary    # 3 reads + 3 writes per call
    check_vt_order(lines)
    pcs = [hex(pc) for pc in hot_pcs()]
    execs = [ln["pc"] for ln in lines if ln["t"] == "exec"]
    bad = next((i for i in range(0, len(execs), HOT_LEN) if execs[i:i + HOT_LEN] != pcs), None)
    assert bad is None, "call %d runs %s, want %s" % (bad // HOT_LEN, execs[bad:bad + HOT_LEN], pcs)
    assert {ln["vcpu"] for ln in lines} == {0}


# ------------------------------------------------------------ (3) threads blocking inside the range

def test_threads_blocking_in_range(tmp_path):
    """trap_threads: 4 threads call `traced`; thread 0 blocks in read() and
    thread 1 in a futex wait, both from `syscall` instructions inside the
    range, until threads 2 and 3 have made their own calls.  No deadlock,
    4 vcpus, the native output, and the same invocations as --step-all."""
    k = 20
    a, b = tmp_path / "trap.jsonl", tmp_path / "stepall.jsonl"
    ra = trace("trap_threads", "traced", a, k, 200, timeout=60)
    want = native("trap_threads", k, 200)
    assert ra.stdout.encode() == want, "output under the trap:\n%s\nnatively:\n%s" % (
        ra.stdout, want.decode())
    lines, summary = read_trace(a)
    check_vt_order(lines)
    entry = symbol("trap_threads", "traced")[0]
    per = invocations(lines, entry)
    assert len(per) == 4, "want 4 vcpus, got %s" % sorted(per)
    assert sorted(len(r) for r in per.values()) == [k, k, 2 * k + 1, 2 * k + 1], \
        {v: len(r) for v, r in per.items()}

    # While a thread is blocked in its syscall inside the range, the others
    # ran `traced` (they had to, to wake it): between the syscall's exec
    # line and that thread's next exec line there are other vcpus' lines.
    execs = [ln for ln in lines if ln["t"] == "exec"]
    for pc in syscall_pcs("trap_threads", "traced"):
        at = [i for i, ln in enumerate(execs) if ln["pc"] == hex(pc)]
        assert at, "no exec of the syscall at %#x" % pc
        i = at[0]
        v = execs[i]["vcpu"]
        nxt = next((j for j in range(i + 1, len(execs)) if execs[j]["vcpu"] == v), len(execs))
        others = {execs[j]["vcpu"] for j in range(i + 1, nxt)}
        assert others, ("vcpu %d's syscall at %#x (vt %d): no other thread ran in the range "
                        "while it was blocked" % (v, pc, execs[i]["vt"]))

    rb = trace("trap_threads", "traced", b, k, 200, step_all=True, timeout=60)
    assert rb.stdout.encode() == want
    lb, sb = read_trace(b)
    for key in ("insns", "mem", "events"):
        assert summary[key] == sb[key], "summary %s: trap %s, step-all %s" % (key, summary, sb)
    same_bag(bag(per), bag(invocations(lb, entry)), "trap_threads")


# ------------------------------------------------------------ the program's address-space layout

def test_layout_unchanged_by_the_trap(tmp_path):
    """trap_mmap maps memory (a page, a large malloc, a thread stack) after
    it has entered and left the range, and touches it from the range: any
    page the tracer maps where the program's next mmap would go moves these
    addresses, and the trace differs from --step-all."""
    lines, summary, _, _ = trap_vs_step_all("trap_mmap", "traced", tmp_path)
    assert summary["insns"] == 5 * 4, summary
    assert len({ln["vcpu"] for ln in lines}) == 2


# ------------------------------------------------------------ entry and exit leave the thread as it was

@pytest.mark.parametrize("idle", [0, 1], ids=["one-thread", "with-idle-thread"])
def test_entry_exit_preserve_thread_state(idle, tmp_path):
    """trap_regs jumps into the range with a constant in every register,
    known flags and a filled red zone, and checks them all after it jumps
    back out (where the tracer re-protects the range: by a trampoline for a
    lone thread, by an injected mprotect with another thread live); also
    errno and a blocked, pending SIGUSR1 (design.md: injection preserves
    registers, flags, the red zone, errno and pending signals)."""
    want = native("trap_regs", 5, idle)
    assert want.endswith(b"rounds 5 differences 0 usr1 2\n"), want
    lines, summary, _, _ = trap_vs_step_all("trap_regs", "traced_block", tmp_path, 5, idle,
                                            want_stdout=want)
    assert summary["insns"] == 5 * 4, summary


# ------------------------------------------------------------ (4) the program's own SIGSEGV handler

def segv_ranges():
    start = symbol("trap_segv", "calm")[0]
    end = symbol("trap_segv", "traced_null")[1]
    return {"traced": "traced", "traced_null": "traced_null", "calm": "calm",
            "span": "%#x-%#x" % (start, end)}


@pytest.mark.parametrize("which", ["traced", "traced_null", "calm", "span"])
def test_own_sigsegv_handler(which, tmp_path):
    """trap_segv recovers with siglongjmp from its own faults: a write to a
    PROT_READ page (the first instruction of `traced`), a null read (in
    `traced_null`) and a call into a readable, non-executable page of its own
    (SEGV_ACCERR with si_addr == rip, like the trap's own faults).  Every
    fault reaches the handler as natively, whether the range holds the
    faulting code (traced, traced_null, span) or not (calm)."""
    want = native("trap_segv", 3)
    assert want.count(b"fault code") == 9, want   # the program does what it says
    lines, summary, _, _ = trap_vs_step_all("trap_segv", segv_ranges()[which], tmp_path, 3,
                                            want_stdout=want)
    if which == "traced":
        # its first instruction faults every time: nothing in it completes
        assert summary["insns"] == 0, summary
    else:
        assert summary["insns"] > 0, summary


# ------------------------------------------------------------ (5) shared library and PIE

@pytest.mark.parametrize("rng", ["libtrapfoo:foo_hot", "trap_dyn:dyn_hot"])
def test_shared_library_and_pie(rng, tmp_path):
    """trap_dyn (dynamically linked PIE) with its hot function in
    progs/lib/libtrapfoo.so: a range in the library (MODULE:SYMBOL) and one
    in the PIE executable (where ASLR-off launches put them); trap ==
    --step-all, 50 entries each."""
    lines, summary, _, _ = trap_vs_step_all("trap_dyn", rng, tmp_path, 50, 200)
    start = int(summary["start"], 16)
    if rng.startswith("lib"):
        assert start >= 0x7f0000000000, "library range at %#x?" % start
    else:
        assert 0x550000000000 <= start < 0x7f0000000000, "PIE range at %#x?" % start
    calls = collections.Counter(ln["pc"] for ln in lines if ln["t"] == "exec")
    assert calls[summary["start"]] == 50, "want 50 entries, got %d" % calls[summary["start"]]


# ------------------------------------------------------------ (8) the program mprotects the range's page

@pytest.mark.parametrize("phases", ["n", "w", "r"], ids=["PROT_NONE", "RW", "PROT_READ"])
def test_program_mprotects_range_page(phases, tmp_path):
    """trap_mprotect changes the protection of `traced`'s page itself between
    calls: PROT_NONE then R+X again (n), RW then R+X again (w), or PROT_READ
    and a call that must fault into its own handler, then R+X again (r).
    Every call must be traced as with --step-all, and the program must see
    its own protections (the r phase faults natively: 2 faults)."""
    want = native("trap_mprotect", 2, phases)
    if phases == "r":
        assert want.count(b"ro: fault code 2 at traced+0") == 2, want
    lines, summary, _, _ = trap_vs_step_all("trap_mprotect", "traced", tmp_path, 2, phases,
                                            want_stdout=want)
    calls = 1 + 2 * (1 if phases == "r" else 2)
    assert summary["insns"] == 6 * calls, summary


# ------------------------------------------------------------ (9) fork, vfork, posix_spawn children

@pytest.mark.parametrize("which", ["f", "v", "s"], ids=["fork", "vfork", "posix_spawn"])
def test_children_run_range_code(which, tmp_path):
    """trap_fork's children call `traced` themselves: a fork child (it
    inherits the armed protections: gebpf must restore them before letting
    it go, or it dies of SIGSEGV), a vfork child (shares the parent's memory
    while the parent waits) and a posix_spawn child (CLONE_VFORK, then
    exec).  Each must end as natively ("exit N", never "signal 11"), with
    the parent's calls traced as with --step-all."""
    want = native("trap_fork", 5, which)
    lines, summary, _, _ = trap_vs_step_all("trap_fork", "traced", tmp_path, 5, which,
                                            timeout=15, want_stdout=want)
    assert summary["insns"] == 6 * 5 * 2, "the parent's 10 calls only: %s" % summary
    assert {ln["vcpu"] for ln in lines} == {0}, "a child's calls in the trace"


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
    made = []

    def start(tick_us=1000):
        s = Server(tick_us)
        made.append(s)
        return s
    yield start
    for s in made:
        s.kill()


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
    g = subprocess.Popen([gebpf_path(), "trace", "-p", str(srv.pid), "--range", "handle",
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
    assert len(during) >= 3, "only %d requests answered during the 1 s trace" % len(during)
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
    g = subprocess.Popen([gebpf_path(), "trace", "-p", str(srv.pid), "--range", "handle",
                          "-o", str(out)], stderr=subprocess.PIPE, env=stable_env())
    time.sleep(1)
    g.send_signal(signal.SIGINT)
    try:
        _, err = g.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        g.kill()
        g.communicate()
        pytest.fail("gebpf did not end within 20 s of SIGINT")
    assert g.returncode == 0, err
    read_trace(out)
    got = [srv.ask(n) for n in (7, 300)]
    rest = srv.finish()
    srv.check_errors()
    want = answers([5, 7, 300])
    assert [first] + got + [rest] == [want[5], want[7], want[300], b"bye 3\n"], (
        "answers after the trace: %r" % ([first] + got + [rest]))


@pytest.mark.parametrize("step_all", [False, True], ids=["trap", "step-all"])
def test_duration_on_idle_target(step_all, server, tmp_path):
    """`--duration 1` on an attached target that sits blocked in poll() and
    never enters the range: the trace still ends after about 1 s."""
    srv = server(0)
    srv.ask(3)
    out = tmp_path / "out.jsonl"
    argv = ["trace", "-p", str(srv.pid), "--range", "handle", "--duration", "1", "-o", str(out)]
    t0 = time.monotonic()
    try:
        r = run_gebpf(argv + (["--step-all"] if step_all else []), timeout=10)
    except subprocess.TimeoutExpired:
        r = None
    took = time.monotonic() - t0
    assert r is not None, "--duration 1 on an idle target: gebpf still tracing after 10 s"
    assert r.returncode == 0, r.stderr
    assert took < 5, "--duration 1 took %.1f s" % took
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
    r = subprocess.run([gebpf_path(), "trace", "-v", "--range", "handle", "-o", str(out), "--",
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
    g = subprocess.Popen([gebpf_path(), "trace", "-p", str(srv.pid), "--range", "handle", "-o",
                          str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         env=stable_env())
    time.sleep(0.7)
    srv.ask(100)
    rest = srv.finish()
    assert rest == b"bye 2\n" and srv.p.returncode == 0, (rest, srv.p.returncode)
    srv.check_errors()
    try:
        _, err = g.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        g.kill()
        g.communicate()
        pytest.fail("gebpf did not end after its target exited")
    err = err.decode()
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
    g = subprocess.Popen([gebpf_path(), "trace", "--range", "handle", "-o",
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

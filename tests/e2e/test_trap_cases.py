"""The hard cases of entering and leaving a range, under every entry trap and
both engines (issue 19: the tests that judge a new trap).

Each program of CASES (tests/progs/, docs/testing.md "Trap cases") is traced
under every trap x engine combination and must give a trace byte-identical
to the reference (`--trap none --engine step`: everything single-stepped),
print what it prints natively (its checksum), and, where lackey can run it
(a static or no-PIE program, single-threaded, no timer), have exactly
lackey's exec lines.  Multi-threaded programs are compared as multisets of
per-invocation sequences (the order of turns is the scheduler's).  The
parked-thread case attaches (`-p`) to a program whose thread is blocked in
the range's own `read` and compares those traces the same way.

The traps are those `gebpf trace --help` lists for --trap, plus TRAPS
below; a trap the binary refuses is skipped with gebpf's own reason, so a
new trap is covered by adding its name to TRAPS (or just to the CLI).
"""
import functools
import os
import re
import subprocess
import time

import pytest

import lackey
from conftest import (check_vt_order, gebpf_path, prog_path, read_trace, run_gebpf, stable_env,
                      trap_args)
from test_pagetrap import bag, invocations, same_bag, same_file, trace

pytestmark = [pytest.mark.probetrap, pytest.mark.usefixtures("probes_ready")]

# the one list: add a trap here ("default": no --trap, gebpf's own choice)
TRAPS = ("probes", "pages", "none", "patch", "default")
ENGINES = ("jit", "step")
REFERENCE = ("none", "step")


def help_traps():
    """The trap names `gebpf trace --help` gives for --trap ("a|b|c")."""
    try:
        r = subprocess.run([gebpf_path(), "trace", "--help"], capture_output=True, text=True,
                           timeout=30)
    except OSError:
        return ()
    m = re.search(r"--trap\s+([\w|]+)", r.stdout + r.stderr)
    return tuple(m.group(1).split("|")) if m else ()


ALL_TRAPS = tuple(TRAPS) + tuple(t for t in help_traps() if t not in TRAPS)


@functools.lru_cache(maxsize=None)
def refusal(trap):
    """None when this gebpf traces with --trap TRAP, else its reason (the
    error line of a probe run on mem_sizes)."""
    out = "/tmp/gebpf-trap-probe-%d-%s.jsonl" % (os.getpid(), trap)
    try:
        r = run_gebpf(["trace"] + trap_args(trap) + ["--range", "traced", "-o", out, "--",
                                                      prog_path("mem_sizes")], timeout=60)
    finally:
        if os.path.exists(out):
            os.unlink(out)
    if r.returncode == 0:
        return None
    return "gebpf refuses --trap %s (exit %d): %s" % (trap, r.returncode,
                                                     r.stderr.strip().splitlines()[-1:])


def need(trap):
    why = refusal(trap)
    if why:
        pytest.skip(why)


def span(name, *fns):
    lo, hi = lackey.Program(prog_path(name)).span(list(fns))
    return "%#x-%#x" % (lo, hi)


class Case:
    """A program, its range, arguments and how to check it.  lackey: its
    exec lines can be checked against lackey's; threads: compare as
    multisets of invocations."""

    def __init__(self, id, name, rng, args=(), lackey=True, threads=False, timeout=120):
        self.id, self.name, self._rng, self.args = id, name, rng, tuple(args)
        self.lackey, self.threads, self.timeout = lackey, threads, timeout

    @property
    def rng(self):
        return self._rng() if callable(self._rng) else self._rng


CASES = [
    # recursion inside the range, and through it (traced -> outside -> traced)
    Case("recursion", "recursion", "traced"),
    Case("reenter", "pt_reenter", "traced", (20,)),
    # a callee outside calls back into the range: libc qsort, in-range
    # comparator calling an in-range helper; and a comparator alone
    Case("callback", "tc_callback", lambda: span("tc_callback", "traced", "traced_cmp",
                                                 "traced_key")),
    Case("qsort_cb", "qsort_cb", "traced"),
    # longjmp back into the range from outside, and out of it to main
    Case("longjmp", "pt_setjmp", "traced", (20, "out")),
    # a C++ exception caught in the range, and one thrown through it
    Case("except", "tc_except", "traced", (30,)),
    # a signal handler (outside) interrupting the range, returning into it
    Case("sigmid", "pt_sigmid", "traced", (50,)),
    # (a 5 ms timer: under --trap none the handler is single-stepped, and a
    # 1 ms one can come back before it has returned on a loaded VM, each time)
    Case("sigmid-timer", "pt_sigmid", "traced", (50, "timer", 5000), lackey=False),
    # synchronous faults whose SA_SIGINFO handler resumes elsewhere (ucontext
    # rip); not lackey: it loses the buffered events of a superblock that a
    # fault aborts (the instructions before the fault and the fault itself)
    Case("sigret", "pt_sigret", "traced", (10,), lackey=False),
    Case("sigret-first", "pt_sigret", "first_jump", (10,), lackey=False),
    # 16 threads released together into the range
    Case("threads16", "pt_threads", "traced", (25, 16), lackey=False, threads=True),
    # a range in a library dlopen'ed after the start
    Case("dlopen", "pt_dlopen", "libptdl:ptdl_work", (20,), lackey=False),
    # entries 2 and 4 bytes into the range's first instruction bytes
    Case("short-entry", "tc_short", "traced", (20,)),
    # ... and one of them faults, its handler resuming at another address
    # (not lackey: a fault, as for sigret)
    Case("short-fault", "tc_shortfault", "traced", (20,), lackey=False),
    # ... the same fault at an entry that keeps a uprobe while the patch trap
    # patches the other (the handler resumes by RIP += 4: no code address in
    # the data)
    Case("probed-fault", "tc_probedfault", "traced", (20,), lackey=False),
    # ... entered by 8 threads at once
    Case("short-threads", "tc_shortmt", "traced", (50, 8), lackey=False, threads=True),
    # handlers in the range: a SIGILL one stepping over a ud2 (RIP += 2:
    # back into the range's middle, not where it was raised), a SIGUSR1 one
    # entered by delivery after raise(); both return through libc's
    # restorer, off the range (issue 35: the probe trap stopped writing at
    # the first; not lackey: a fault, as for sigret)
    Case("sighere", "tc_sighere", lambda: span("tc_sighere", "traced", "traced_ill", "traced_usr"),
         (40,), lackey=False),
]
# ("default" with its own engine only: what a user gets with neither option;
# with --engine step the default is the probe trap, the probes-step combo
# here, its choice checked by test_trace_verbose.py)
COMBOS = [(t, e) for t in ALL_TRAPS for e in ENGINES if t != "default" or e == ENGINES[0]]

# (case id, trap) -> why it fails today (strict: an unexpected pass fails).
XFAIL = {
    ("sigret", "pages"): "page trap: pt_sigret's SIGSEGV handler shares the trapped page; entering "
    "it faults (no PROT_EXEC) while SIGSEGV is blocked in that handler, and the kernel's "
    "force_sig_info_to_task then resets SIGSEGV to SIG_DFL, so the program's next fault kills it "
    "(measured: the same program with SA_NODEFER traces correctly)",
    ("sigret-first", "pages"): "page trap: as for sigret (the handler's entry fault resets "
    "SIGSEGV to SIG_DFL)",
    ("dlopen", "pages"): "page trap: a range in a library not mapped yet (pending) is the probe "
    "trap's only (docs/trace.md \"Range\"): gebpf exits 2, no mapped module matches 'libptdl'",
}


def group(cid):
    """The case's tests share its runs (run_case's cache, per process): with
    `--dist loadgroup` they run on one xdist worker, which makes the
    reference (everything single-stepped) once, not once per worker."""
    return pytest.mark.xdist_group("trap_cases:" + cid)


def params(cases):
    out = []
    for c in cases:
        for t, e in COMBOS:
            why = XFAIL.get((c.id, t))
            marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
            marks.append(group(c.id))
            out.append(pytest.param(c, t, e, marks=marks, id="%s-%s-%s" % (c.id, t, e)))
    return out


def native(case):
    r = subprocess.run([prog_path(case.name)] + [str(a) for a in case.args], capture_output=True,
                       timeout=120)
    assert r.returncode == 0, "%s %s exits %d natively" % (case.name, case.args, r.returncode)
    return r.stdout.decode()


_RUNS = {}
_STDERR = {}


def run_case(case, trap, engine, tmp_path_factory):
    """(trace path, stdout) of CASE under TRAP and ENGINE (cached per session)."""
    key = (case.id, trap, engine)
    if key not in _RUNS:
        out = tmp_path_factory.mktemp("tc") / ("%s-%s-%s.jsonl" % key)
        r = trace(case.name, case.rng, out, *case.args, trap=trap, timeout=case.timeout,
                  extra=["--engine", engine])
        _RUNS[key] = (out, r.stdout)
        _STDERR[key] = r.stderr
    return _RUNS[key]


def entry_of(case):
    path = prog_path(case.name)
    return lackey.Program(path).range_of(case.rng)[0]


@pytest.mark.parametrize("case,trap,engine", params(CASES))
def test_case_equals_reference(case, trap, engine, tmp_path_factory):
    """CASE under TRAP x ENGINE: the native output, a well-formed trace, and
    the reference's bytes (as multisets of invocations for threads)."""
    need(trap)
    got, out = run_case(case, trap, engine, tmp_path_factory)
    assert out == native(case), "%s under --trap %s --engine %s printed %r, natively %r" % (
        case.id, trap, engine, out, native(case))
    lines, summary = read_trace(got)
    check_vt_order(lines)
    assert summary["dropped"] == 0 and summary["insns"] > 0, summary
    if (trap, engine) == REFERENCE:
        return
    ref, _ = run_case(case, *REFERENCE, tmp_path_factory)
    what = "%s (%s %s --range %s)" % (case.id, case.name, " ".join(map(str, case.args)), case.rng)
    if not case.threads:
        same_file(got, ref, what, ("%s/%s" % (trap, engine), "none/step"))
        return
    rlines, rsummary = read_trace(ref)
    for k in ("insns", "mem", "events"):
        assert summary[k] == rsummary[k], "summary %s: %s vs reference %s" % (k, summary, rsummary)
    entry = entry_of(case)
    mine, theirs = invocations(lines, entry), invocations(rlines, entry)
    assert sorted(map(len, mine.values())) == sorted(map(len, theirs.values())), \
        "invocations per vcpu differ from the reference"
    same_bag(bag(mine), bag(theirs), what)


# Cases where the patch trap patches some entries and keeps a uprobe at the
# others (docs/trace.md "The patch trap": the planner's refusals): case id
# -> entries probed.  short-entry: the entries 2 and 4 bytes into the range;
# except: a landing pad on the range's last byte (its `ret`); short-fault:
# its first instruction, which faults; short-threads: as short-entry, 8
# threads (a hit may find the lock held by another thread's stretch).
# except: also an entry whose 5 bytes hold a branch target of the range
# (the planner's refusal for native runs).  short-fault is not here since
# that refusal: ts_in2's 5 bytes hold ts_mid, a code address its data
# holds, so no entry can be patched and the probe trap traces it;
# probed-fault is that case with ts_in2 patchable.
PATCH_PROBED = {"short-entry": 2, "except": 2, "short-threads": 2, "probed-fault": 1}


@pytest.mark.parametrize("cid", [pytest.param(c, marks=group(c), id=c) for c in sorted(PATCH_PROBED)])
def test_patch_mixes_patches_and_uprobes(cid, tmp_path_factory):
    """Under --trap patch the case is traced by the patch trap with its
    refused entries on uprobes, and those uprobes are entered (the trace's
    bytes are test_case_equals_reference's)."""
    need("patch")
    case = next(c for c in CASES if c.id == cid)
    run_case(case, "patch", "jit", tmp_path_factory)
    err = _STDERR[(cid, "patch", "jit")]
    assert "entries patched, %d probed" % PATCH_PROBED[cid] in err, err
    stops, n, sent = probe_counts(err)
    assert stops + sent > 0 and n == PATCH_PROBED[cid], err


# The -v lines of the entries that keep a uprobe (trap/patch/probe.c): hits
# handled at a stop, the uprobes, hits the BPF program sent straight into
# the cache (where the kernel lets it write ip: docs/bpf.md "Redirects").
THROUGH = re.compile(r"the patch trap: (\d+) entries through its (\d+) uprobes \(\d+ waited for "
                     r"the cache's lock\), (\d+) sent straight into the cache")
REDIRECTS = "uprobes send the thread straight into the code cache"
FALLBACK = re.compile(r"patch trap: its uprobes stop the thread after .*")


def probe_counts(err):
    m = THROUGH.search(err)
    assert m, err
    return tuple(int(g) for g in m.groups())


@pytest.mark.parametrize("cid", [pytest.param(c, marks=group(c), id=c) for c in sorted(PATCH_PROBED)])
def test_probed_entry_without_a_stop(cid, tmp_path_factory):
    """Where the kernel lets a uprobe program write ip (Linux 6.18), a hit
    at an entry that keeps a uprobe never stops the thread: the BPF program
    sends it to the entry's block in the cache, the kernel skips the
    instruction (no out-of-line run), and the trace is still the
    reference's bytes (test_case_equals_reference).  Skips elsewhere,
    saying which way gebpf went."""
    need("patch")
    case = next(c for c in CASES if c.id == cid)
    run_case(case, "patch", "jit", tmp_path_factory)
    err = _STDERR[(cid, "patch", "jit")]
    if REDIRECTS not in err:
        m = FALLBACK.search(err)
        pytest.skip("this kernel cannot redirect a uprobe hit: gebpf says %r" % (
            m.group(0) if m else err[-300:]))
    stops, _, sent = probe_counts(err)
    assert stops == 0 and sent > 0, "hits stopped: %d, sent into the cache: %d\n%s" % (
        stops, sent, err)


def test_probed_entry_fallback_is_the_same_trace(tmp_path):
    """GEBPF_PROBETRAP_NOREDIRECT=1 forces the stop at a probed entry (the
    kernel's out-of-line run, gebpf writes the entry's lines): the trace is
    the probe trap's byte for byte, as the redirected one is.  (Both runs
    get the same environment: the target's stack depends on it.)"""
    need("patch")
    case = next(c for c in CASES if c.id == "short-entry")
    env = dict(stable_env(), GEBPF_PROBETRAP_NOREDIRECT="1")
    outs = {}
    for trap in ("patch", "probes"):
        outs[trap] = tmp_path / (trap + ".jsonl")
        r = run_gebpf(["trace", "-v", "--range", case.rng, "-o", outs[trap], *trap_args(trap),
                       "--", prog_path(case.name), *map(str, case.args)], timeout=60, env=env)
        assert r.returncode == 0, r.stderr
        if trap == "patch":
            assert FALLBACK.search(r.stderr) and REDIRECTS not in r.stderr, r.stderr
            stops, _, sent = probe_counts(r.stderr)
            assert stops > 0 and sent == 0, r.stderr
    same_file(outs["patch"], outs["probes"], "short-entry, no redirects", ("patch", "probes"))


LACKEY_CASES = [c for c in CASES if c.lackey]


@pytest.mark.parametrize("case", [pytest.param(c, marks=group(c.id), id=c.id) for c in LACKEY_CASES])
def test_exec_lines_match_lackey(case, valgrind, tmp_path_factory):
    """The reference's exec lines are lackey's, in order (every other
    combination equals the reference byte for byte above)."""
    got, out = run_case(case, *REFERENCE, tmp_path_factory)
    res = lackey.oracle(prog_path(case.name), [str(a) for a in case.args], case.rng)
    assert res["returncode"] == 0 and res["stdout"].decode() == out, (res["returncode"],
                                                                      res["stdout"], out)
    mine = [ln["pc"] for ln in read_trace(got)[0] if ln["t"] == "exec"]
    theirs = [ln["pc"] for ln in res["lines"] if ln["t"] == "exec"]
    n = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
    assert mine == theirs, "%s: exec line %d differs (gebpf %d, lackey %d lines): gebpf %s, " \
        "lackey %s" % (case.id, n, len(mine), len(theirs), mine[n:n + 3], theirs[n:n + 3])


# ------------------------------------------------------------ a thread parked in the range at attach

PARKED_LINES = 30


def thread_state(pid, tid):
    with open("/proc/%d/task/%d/stat" % (pid, tid)) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def tracer_of(pid, tid):
    with open("/proc/%d/task/%d/status" % (pid, tid)) as f:
        return int(re.search(r"^TracerPid:\s*(\d+)", f.read(), re.M).group(1))


def wait_for(cond, secs, what):
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > secs:
            pytest.fail("%s: not within %d s" % (what, secs))
        time.sleep(0.01)


def parked_in_read(pid, tid, lo, hi):
    """The worker is blocked in read(2) at a PC of the range."""
    try:
        with open("/proc/%d/task/%d/syscall" % (pid, tid)) as f:
            f = f.read().split()
    except OSError:
        return False
    return f[0] == "0" and lo <= int(f[-1], 16) <= hi + 1 and thread_state(pid, tid) == "S"


def run_parked(trap, engine, out):
    """tc_parked started with ASLR off, its worker blocked in `traced`'s
    read; `gebpf trace -p` attaches, then stdin feeds PARKED_LINES words.
    Returns (program stdout after "ready", gebpf stderr)."""
    lo, hi = lackey.Program(prog_path("tc_parked")).span(["traced"])
    p = subprocess.Popen(["setarch", "-R", prog_path("tc_parked")], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, env={"PATH": os.environ.get("PATH", "")})
    g = None
    try:
        ready = p.stdout.readline().decode()
        assert ready.startswith("ready "), ready
        tid = int(ready.split()[1])
        wait_for(lambda: parked_in_read(p.pid, tid, lo, hi), 20, "tc_parked's worker in read")
        g = subprocess.Popen([gebpf_path(), "trace", "-v"] + trap_args(trap) +
                             ["--engine", engine, "-p", str(p.pid), "--range", "traced", "-o",
                              str(out)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # attached and set up: both threads traced, and back asleep in their reads
        wait_for(lambda: g.poll() is not None or all(
            tracer_of(p.pid, t) != 0 and thread_state(p.pid, t) == "S" for t in (p.pid, tid)),
            30, "gebpf attached to tc_parked")
        time.sleep(0.3)
        assert g.poll() is None, "gebpf ended before the input: %s" % g.stderr.read().decode()
        rest, _ = p.communicate(b"".join(b"%d\n" % i for i in range(1, PARKED_LINES + 1)),
                                timeout=120)
        _, err = g.communicate(timeout=60)
        err = err.decode()
        assert p.returncode == 0, "tc_parked exits %d" % p.returncode
        # an attached target that exits ends the trace: exit 1 and one line saying so
        assert g.returncode == 0 or (g.returncode == 1 and err.rstrip().splitlines()[-1] ==
                                     "gebpf: pid %d: exited with status 0 during the trace" % p.pid), \
            "gebpf: exit %d: %s" % (g.returncode, err[-2000:])
        return rest.decode(), err
    finally:
        for x in (g, p):
            if x is not None and x.poll() is None:
                x.kill()
                x.wait()


def parked_native():
    r = subprocess.run([prog_path("tc_parked")], capture_output=True, timeout=60,
                       input=b"".join(b"%d\n" % i for i in range(1, PARKED_LINES + 1)))
    assert r.returncode == 0
    return r.stdout.decode().split("\n", 1)[1]


_PARKED = {}


@pytest.mark.parametrize("trap,engine", [pytest.param(*c, marks=group("parked"), id="%s-%s" % c)
                                         for c in COMBOS])
def test_parked_thread_at_attach(trap, engine, tmp_path_factory):
    """tc_parked's worker blocked in the range's own read when gebpf attaches:
    the trace begins with that read (restarted after the attach's
    interrupt), has one fresh entry per later word, the program its native
    checksum, and the reference's bytes."""
    need(trap)
    for key in (REFERENCE, (trap, engine)):
        if key not in _PARKED:
            out = tmp_path_factory.mktemp("parked") / ("%s-%s.jsonl" % key)
            _PARKED[key] = (out,) + run_parked(key[0], key[1], out)
    out, rest, _ = _PARKED[(trap, engine)]
    assert rest == parked_native()
    lines, summary = read_trace(out)
    check_vt_order(lines)
    p = lackey.Program(prog_path("tc_parked"))
    lo, hi = p.span(["traced"])
    sc = [pc for pc, t in p.insns(lo, hi).items() if t == "syscall"]
    assert len(sc) == 1, sc
    assert int(lines[0]["pc"], 16) == sc[0], "the trace begins at %s, not at the read (%#x)" % (
        lines[0]["pc"], sc[0])
    fresh = sum(1 for ln in lines if ln["t"] == "exec" and int(ln["pc"], 16) == lo)
    assert fresh == PARKED_LINES, "%d entries at traced's start, want %d" % (fresh, PARKED_LINES)
    if (trap, engine) != REFERENCE:
        same_file(out, _PARKED[REFERENCE][0], "tc_parked attached",
                  ("%s/%s" % (trap, engine), "none/step"))

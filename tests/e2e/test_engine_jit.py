"""The translating engine (`--engine jit`, docs/trace.md "Engines") against
the single-step engine (`--engine step`, the reference): byte-identical
traces on every trace test program, real programs (Python's malloc in libc,
a dlopen'ed library), synchronous faults in translated code, asynchronous
signals, threads; and what a user must be able to count on: the code cache
is gone after a trace, Ctrl-C ends a trace in the middle of translated
code, and a SIGKILL of gebpf and of its worker leaves a program that was
inside translated code to finish correctly.

The random-instruction corpus is in test_engine_corpus.py.  The engine
runs between the entries of an explicit trap (--trap probes or pages): the
default, the patch trap, runs the range in a cache of its own, not the
engine's (its tests: test_trap_patch.py, test_trap_cases.py).
"""
import concurrent.futures
import os
import re
import signal
import subprocess

import pytest

from conftest import (PROGS, check_vt_order, gebpf_path, output_grew, prog_path, range_arg,
                      read_trace, stable_env, trace_summary)
from test_attach_forks import native_check, stop_and_read
from test_pagetrap import bag, invocations, native, same_bag, same_file, trace

import lackey

pytestmark = [pytest.mark.probetrap, pytest.mark.usefixtures("probes_ready")]

JIT_STATS = re.compile(r"jit: (\d+) runs, (\d+) stops, (\d+) instructions translated-run, (\d+) blocks")


def jit_stats(stderr):
    m = JIT_STATS.search(stderr)
    assert m, "no jit statistics in gebpf -v's output:\n" + stderr[-2000:]
    return dict(zip(("runs", "stops", "insns", "blocks"), map(int, m.groups())))


def jit_vs_step(name, rng, tmp_path, *args, timeout=120, check_native=True, extra=(), trap="probes"):
    """Trace NAME ARGS with both engines (under TRAP): byte-identical traces,
    the same output (that of a native run unless check_native is false).
    Returns (lines, summary, jit statistics)."""
    a, b = tmp_path / "jit.jsonl", tmp_path / "step.jsonl"
    ra = trace(name, rng, a, *args, trap=trap, timeout=timeout,
               extra=["--engine", "jit"] + list(extra))
    rb = trace(name, rng, b, *args, trap=trap, timeout=timeout,
               extra=["--engine", "step"] + list(extra))
    assert ra.stdout == rb.stdout, "%s printed differently: jit %r, step %r" % (
        name, ra.stdout, rb.stdout)
    if check_native:
        assert ra.stdout.encode() == native(name, *args)
    same_file(a, b, "%s %s --range %s" % (name, " ".join(map(str, args)), rng), ("jit", "step"))
    lines, summary = read_trace(a)
    check_vt_order(lines)
    return lines, summary, jit_stats(ra.stderr)


SINGLE = sorted(n for n, s in PROGS.items() if not s.get("threads"))


@pytest.mark.parametrize("trap", ["probes", "pages"])
@pytest.mark.parametrize("name", SINGLE)
def test_exact_programs(name, trap, tmp_path):
    """Every program of test_exact.py (checked against lackey there), entered
    through the probe trap and through the page trap."""
    _, summary, st = jit_vs_step(name, range_arg(name), tmp_path,
                                 check_native=not PROGS[name].get("exit"), trap=trap)
    assert summary["insns"] > 0


def test_loop_runs_translated(tmp_path):
    """hot_loop's 28,000 in-range instructions: all but its entry and its
    last instruction run translated, in one run."""
    _, summary, st = jit_vs_step("hot_loop", range_arg("hot_loop"), tmp_path)
    assert summary["insns"] == 28004
    assert st["insns"] >= 28000 and st["runs"] == 1, st


@pytest.mark.parametrize("name,args", [
    ("pt_hot", (3000, 1000)),      # a function entered 3000 times, a call out each time
    ("pt_cold", ()),               # a .cold part reached by a jump
    ("pt_reenter", ()),            # the range re-entered from a callee
    ("pt_setjmp", ()),             # longjmp out of the range
    ("pt_sigmid", ()),             # asynchronous signals in the middle of the range
    ("jit_spin", (1, 4096)),       # 4,096 iterations, loads, stores, 4 calls out (16,384
                                   # made the step reference 13 CPU s of CI's parallel part,
                                   # the same code run 4 times as often)
])
def test_probe_programs(name, args, tmp_path):
    _, summary, st = jit_vs_step(name, "traced", tmp_path, *args)
    assert st["insns"] > summary["insns"] // 2, (st, summary)


@pytest.mark.parametrize("trap", ["probes", "pages"])
@pytest.mark.parametrize("case", ["segv", "movs", "push", "bus", "fpe", "gp"])
def test_fault_in_translated_code(case, trap, tmp_path):
    """A translated instruction that faults: its exec line and the accesses
    it completed, the handler sees the original address, the re-run is
    logged again (the program checks si_addr and the saved RIP itself)."""
    _, _, st = jit_vs_step("sync_sigs", "sf_" + case, tmp_path, case, 2, check_native=False,
                           trap=trap)
    assert st["insns"] > 0


@pytest.mark.parametrize("name", ["threads", "pt_threads"])
def test_threads(name, tmp_path):
    """Threads take turns in the range; stretches are never interleaved:
    per-invocation sequences equal the step engine's (as multisets: the
    order of turns is the scheduler's)."""
    a, b = tmp_path / "jit.jsonl", tmp_path / "step.jsonl"
    rng = range_arg(name) if name in PROGS else "traced"
    ra = trace(name, rng, a, trap="probes", extra=["--engine", "jit"])
    rb = trace(name, rng, b, trap="probes", extra=["--engine", "step"])
    assert ra.stdout == rb.stdout == native(name).decode()
    (la, sa), (lb, sb) = read_trace(a), read_trace(b)
    check_vt_order(la)
    for k in ("insns", "mem", "events"):
        assert sa[k] == sb[k], (sa, sb)
    entry = lackey.Program(prog_path(name)).range_of(rng)[0]
    same_bag(bag(invocations(la, entry)), bag(invocations(lb, entry)), name)
    assert jit_stats(ra.stderr)["insns"] > 0


def run(argv, timeout=180):
    return subprocess.run([gebpf_path()] + [str(a) for a in argv], capture_output=True, text=True,
                          timeout=timeout, env=stable_env())


def test_python_malloc(tmp_path):
    """A function of a shared library in a program we did not write:
    Debian's python3 building strings, --range libc:malloc (resolved when
    libc is mapped), both engines, at most 100,000 in-range instructions."""
    code = "x=[str(i)*3 for i in range(20000)]; print(len(x))"
    out = {}
    for eng in ("jit", "step"):
        f = tmp_path / ("%s.jsonl" % eng)
        r = run(["trace", "-v", "--trap", "probes", "--engine", eng, "--max-insns", 100000,
                 "--range", "libc:malloc",
                 "-o", f, "--", "/usr/bin/python3", "-c", code])
        assert r.returncode == 0, r.stderr[-2000:]
        assert r.stdout == "20000\n"
        out[eng] = r
    same_file(tmp_path / "jit.jsonl", tmp_path / "step.jsonl", "python3 libc:malloc", ("jit", "step"))
    summary = trace_summary(tmp_path / "jit.jsonl")
    st = jit_stats(out["jit"].stderr)
    assert summary["insns"] > 10000 and st["insns"] > 0.9 * summary["insns"], (st, summary)


def test_dlopen_library(tmp_path):
    """A range in a library the program dlopens after the trace started."""
    rng = "libptdl:ptdl_work"
    _, summary, st = jit_vs_step("pt_dlopen", rng, tmp_path)
    assert summary["insns"] > 0 and st["insns"] > 0


def maps_of(pid):
    """The process's mappings, but the kernel's [uprobes] page (made at the
    first probe hit, kept by the kernel: docs/trace.md "Entry traps")."""
    with open("/proc/%d/maps" % pid) as f:
        return [ln for ln in f.read().splitlines() if not ln.endswith("[uprobes]")]


# about 3 s natively here: gebpf attaches in the middle of the loop
ROUNDS = 30000


def spin(rounds):
    p = subprocess.Popen([prog_path("jit_spin"), str(rounds)], stdout=subprocess.PIPE, text=True,
                         env=stable_env())
    assert p.stdout.readline() == "ready\n"
    return p


def test_attach_leaves_no_code_cache(tmp_path):
    """Attached for a second in the middle of the loop: the trace ends
    (--duration), the code cache is unmapped, the program's maps are as they
    were and it prints the checksum of a native run.  (Twice ROUNDS: on a
    loaded CI host the attach took most of the program's 3 s and it ended
    as gebpf let it go, before its maps were read.)"""
    want = native("jit_spin", 2 * ROUNDS).decode()
    p = spin(2 * ROUNDS)
    try:
        before = maps_of(p.pid)
        r = run(["trace", "-v", "--trap", "probes", "--engine", "jit", "-p", p.pid, "--range",
                 "traced", "--duration", 1, "-o", tmp_path / "t.jsonl"])
        assert r.returncode == 0, r.stderr[-2000:]
        assert "code cache at" in r.stderr
        st = jit_stats(r.stderr)
        assert st["insns"] > 0
        assert maps_of(p.pid) == before, "the target's mappings changed"
        lines, summary = read_trace(tmp_path / "t.jsonl")
        check_vt_order(lines)
    finally:
        out, _ = p.communicate(timeout=300)
    assert p.returncode == 0
    assert "ready\n" + out == want


def code_cache_left(pid):
    """The code cache's mappings in pid (a shared anonymous mapping:
    /dev/zero (deleted)); the process must still run."""
    with open("/proc/%d/maps" % pid) as f:
        maps = f.read().splitlines()
    assert maps, "process %d is gone" % pid
    return [ln for ln in maps if ln.endswith("/dev/zero (deleted)")]


FORK_ROUNDS = 1000000  # never reached: each run stops the program (SIGUSR1, jit_forks.c) once
#                       its cache is looked at (5000 rounds, ~1 s natively, made the test
#                       61 s at load 5: each run's rest ran natively after the end)


def test_duration_end_with_forks_leaves_no_code_cache(tmp_path):
    """Issue 23 case 5: a program whose range makes its own fork, vfork and
    wait4 system calls (so at the end its one thread is often in one of
    them, stepped) traced with --duration 1, 15 times: after every end the
    still running program has no code cache mapped, and, stopped by SIGUSR1,
    it prints the checksum its rounds make natively (every child exited as
    it should)."""
    prog = prog_path("jit_forks")
    native_check(prog)

    def run(k):
        """One end; (k, the cache left) or None."""
        err = tmp_path / ("err%d.txt" % k)
        with open(err, "w") as ef:
            g = subprocess.Popen([gebpf_path(), "trace", "-v", "--engine", "jit", "--range",
                                  "traced_forks", "--duration", "1",
                                  "-o", str(tmp_path / ("t%d.jsonl" % k)),
                                  "--", prog, str(FORK_ROUNDS)],
                                 stdout=subprocess.PIPE, stderr=ef, text=True, env=stable_env())
            first = g.stdout.readline().split()
            assert first[:1] == ["ready"], first
            pid = int(first[1])
            assert g.wait(timeout=120) == 0, err.read_text()[-2000:]
        stderr = err.read_text()
        assert "code cache at" in stderr, stderr[-2000:]
        cache = code_cache_left(pid)  # (the program runs on, detached)
        why = stop_and_read(g, pid, FORK_ROUNDS)   # (EOF: the program ended)
        g.stdout.close()
        assert why is None, "run %d: %s" % (k, why)
        return (k, cache) if cache or "stays mapped" in stderr else None

    # (three at a time: each run is ~4 s of the program's forks, whatever
    # the trace does)
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as ex:
        left = [r for r in ex.map(run, range(15)) if r]
    assert not left, "the code cache stayed mapped after %d of 15 ends: %r" % (len(left), left)


def test_ctrl_c_in_translated_code(tmp_path):
    """SIGINT to gebpf while the owner runs translated code: the summary is
    written, the target goes on and finishes as natively."""
    want = native("jit_spin", ROUNDS).decode()
    p = spin(ROUNDS)
    try:
        g = subprocess.Popen([gebpf_path(), "trace", "-v", "--trap", "probes", "--engine", "jit",
                              "-p", str(p.pid), "--range", "traced", "-o",
                              str(tmp_path / "t.jsonl")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # (the trace under way: 1.5 s was not enough for the attach at load 15)
        output_grew(tmp_path / "t.jsonl", g, 1 << 20)
        g.send_signal(signal.SIGINT)
        _, err = g.communicate(timeout=60)
        assert g.returncode == 0, err[-2000:]
        assert jit_stats(err)["insns"] > 0
        lines, summary = read_trace(tmp_path / "t.jsonl")
        assert summary["insns"] > 0
    finally:
        out, _ = p.communicate(timeout=300)
    assert p.returncode == 0 and "ready\n" + out == want


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


@pytest.mark.parametrize("who", ["gebpf", "gebpf and its worker"])
def test_sigkill_mid_run(who, tmp_path):
    """SIGKILL while the owner runs translated code.  Of gebpf: its worker
    ends the trace as SIGTERM does.  Of both: the kernel detaches the
    target wherever it is, possibly inside the code cache: its next block
    head sends it to the original code (docs/trace.md "Harmless without
    gebpf"; before, it ran on translated: 4 s of work took 160 s to more
    than 300 s): the program still prints the checksum of a native run."""
    want = native("jit_spin", ROUNDS).decode()
    p = spin(ROUNDS)
    try:
        g = subprocess.Popen([gebpf_path(), "trace", "--engine", "jit", "-p", str(p.pid),
                              "--range", "traced", "-o", str(tmp_path / "t.jsonl")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        output_grew(tmp_path / "t.jsonl", g, 1 << 20)   # (mid-run, however long the attach)
        victims = [g.pid] + (children(g.pid) if who != "gebpf" else [])
        for v in victims:
            os.kill(v, signal.SIGKILL)
        g.communicate(timeout=60)
    finally:
        out, _ = p.communicate(timeout=300)
    assert p.returncode == 0, "the target died (%d) after gebpf was killed" % p.returncode
    assert "ready\n" + out == want

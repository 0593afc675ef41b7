"""Crash safety of the patch trap (issue 19; docs/trace.md "Ending"):
SIGKILL of gebpf, of its worker, and of both, at random moments of an
attach-mode --trap patch trace of pt_crash (3 threads entering `traced`
thousands of times a second each, a call out of the range and a system call
inside it).  The moments fall in the set-up (the cache being mapped, the
patches written, threads moved), while the program runs, and in the end
(--duration: threads unwound, bytes restored, the cache unmapped).

Every run: the program finishes with its native output (each thread's
count and checksum, those of a native run given the same counts).  After
gebpf alone dies (its worker gets SIGTERM and ends the trace): the text of
`traced` and `helper` is the file's, the maps are as before (no cache), gs
bases 0.  After the worker alone dies, gebpf (the process the user started)
writes the patched entries back: the text is the file's (the cache and gs
bases may stay).  After both die everything the worker did stays
(docs/trace.md "Ending"): only the program's result counts.  Whether the
ring's writer gave up waiting for its gone consumer is counted
(ring_gave_up), not required: the trace's budget is full before the ring
is.

The same campaigns run pt_churn (3 threads at a time, each created, entering
`traced` 300 times and exiting, 2000 in all: threads are made and end while
the patches are in, and after the worker is gone): it must finish by itself
with its native output (a thread made after the worker died inherits its
creator's area: the entry blocks' owner check sends it to native copies).
And pt_relchurn, pt_churn's program whose patched entries begin with a call
and with jccs: the native copies run them relocated (user/jit/reloc.c), and
`-v` must say that every entry block has the owner check.

Each test is a campaign (campaign.py, docs/testing.md "Random campaigns"):
in CI the fixed seeds 1..RUNS (a seed's phase is seed % 3: set-up, run, end
in turn), three runs at a time; GEBPF_SEEDS=S1,S2 replays seeds, and
scripts/soak runs the same campaigns on fresh seeds for as long as it is
told.  GEBPF_CRASH_REPORT=FILE appends each campaign's counts there, and
every failed run.  GEBPF_CRASH_CHURN="THREADS TOTAL CALLS" runs pt_churn and
pt_relchurn with those arguments (CHURN below).

A program may end by itself while its run reads what the kill left
(pt_churn, about a second after its start on a fast idle host): those reads
count as not made (left_in), never as a text left patched."""
import json
import os
import random
import re
import signal
import subprocess
import time

import pytest

from conftest import gebpf_path, prog_path
from test_probetrap import children_of, tracer_of
from test_trap_patch import gs_base, text_of

pytestmark = [pytest.mark.probetrap, pytest.mark.campaign, pytest.mark.usefixtures("probes_ready")]

RUNS = 30          # CI's runs per campaign (10 per phase): docs/testing.md "Random campaigns"
THREADS = 3
PHASES = ("setup", "run", "end")
PROGS = ("pt_crash", "pt_churn", "pt_relchurn")
# pt_crash's FILL, by seed // 3 (so CI's 30 seeds give each phase each fill
# twice): 300, the most entries a second (a fiftieth of 20000's work between
# two); 20000, thousands of entries a second a thread, flat out; 20000p, the same paced (a fifth of a CPU a thread,
# tests/progs/pt_crash.c: three threads flat out in three runs at a time
# took the cycles of the campaign beside them).
FILLS = ("20000p", "300", "20000p", "20000", "20000p")


# The churn programs make threads while gebpf or its worker is dead: only
# the entry blocks' owner check sends those to the native copies (by the fs
# base with rdfsbase, by the TCB's self-pointer at fs:0 on a CPU that hides
# FSGSBASE: docs/trace.md "The owner check"; both forms have their unit
# tests, and -v's line says which ran here).
CHURNS = ("pt_churn", "pt_relchurn")


# pt_churn THREADS TOTAL CALLS: ~2 s natively (3.5 s on this loaded VM, about
# 1 s on an idle host); GEBPF_CRASH_CHURN="3 900 300" makes it end here about
# when the end phase's runs read it, as it did on CI's host (issues 32, 33).
CHURN = (os.environ.get("GEBPF_CRASH_CHURN") or "3 2000 300").split()


def owner_checks(stderr):
    """(entry blocks with the owner check, entry blocks), from -v; None
    when the trace did not get that far."""
    m = re.search(r"the owner check in (\d+) of (\d+) entry blocks", stderr)
    return (int(m.group(1)), int(m.group(2))) if m else None


# The code a trace of `traced` may write, per program: pt_short's start
# takes a 2-byte jump to a trampoline in the nops before it (traced_pad).
TEXT_NAMES = {"pt_short": ("traced", "helper", "traced_pad")}


def text_now(pid, prog, names=None):
    """{name: (its bytes in pid, the file's)}; None when pid's memory is gone
    (the program ended: /proc/PID/mem then reads nothing, without an error)."""
    names = names or TEXT_NAMES.get(prog, ("traced", "helper"))
    files = {name: text_of(prog_path(prog), name) for name in names}
    out = {}
    with open("/proc/%d/mem" % pid, "rb") as f:
        for name, (addr, want) in files.items():
            f.seek(addr)
            got = f.read(len(want))
            if len(got) != len(want):
                return None
            out[name] = (got, want)
    return out


def maps_of(pid):
    """pid's maps ("" once its memory is gone: the program ended)."""
    with open("/proc/%d/maps" % pid) as f:
        return f.read()


def shared_maps(maps):
    """The shared mappings of a maps text (a code cache is one: shared
    anonymous memory).  Private ones are left out: the churn programs'
    threads come and go with their stacks, which glibc maps while the set
    of threads grows (a kill's run once found pt_churn's maps "changed" by
    a new thread's stack, the cache gone)."""
    return [ln for ln in maps.splitlines() if len(ln.split()) > 1 and ln.split()[1][3:4] == "s"]


def left_in(pid, prog, before, stderr):
    """What a kill left in pid: {text_restored, cache_gone, gs0, dropping},
    each None when the program ended before it was read (pt_churn ends by
    itself, perhaps between the campaign's look at it and these reads: its
    memory then reads as nothing, once taken for a text left patched)."""
    try:
        code, maps = text_now(pid, prog), maps_of(pid)
        if code is not None and maps:
            return {"text_restored": all(got == want for got, want in code.values()),
                    "cache_gone": shared_maps(maps) == shared_maps(before), "gs0": gs_all_zero(pid),
                    "dropping": dropping(pid, stderr)}
    except OSError:
        pass
    return dict.fromkeys(("text_restored", "cache_gone", "gs0", "dropping"))


CODE_SIZE, NS_DROPPING = 8 << 20, 304   # user/jit/jit.h, user/jit/internal.h


def dropping(pid, stderr):
    """Whether the ring's writer, left with no consumer, gave up waiting
    (the cache still mapped; None: no cache)."""
    m = re.search(r"code cache at 0x([0-9a-f]+)-", stderr)
    if not m or ("%x-" % int(m.group(1), 16)) not in maps_of(pid):
        return None
    with open("/proc/%d/mem" % pid, "rb") as f:
        f.seek(int(m.group(1), 16) + CODE_SIZE + NS_DROPPING)
        return f.read(8) != bytes(8)


def exiting(proc):
    """/proc/PROC (a pid, or PID/task/TID) is gone or exiting (a zombie: the
    kernel refuses a PTRACE_SEIZE of an exiting task with EPERM)."""
    try:
        with open("/proc/%s/stat" % proc) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in "ZX"
    except (OSError, IndexError):
        return True


def gs_all_zero(pid):
    """Every thread's gs base 0 (a thread that ended meanwhile, pt_churn's,
    or that is exiting, as every thread of a program at its end, counts as
    0)."""
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            if gs_base(int(t)) != 0:
                return False
        except AssertionError:
            if not exiting("%d/task/%s" % (pid, t)):
                raise
    return True


def traced_threads(pid):
    """The threads of pid that a tracer holds (the worker detaches them one
    by one: the main thread's TracerPid alone says too little)."""
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return []
    held = []
    for t in tids:
        try:
            with open("/proc/%d/task/%s/status" % (pid, t)) as f:
                if int(re.search(r"^TracerPid:\s*(\d+)", f.read(), re.M).group(1)):
                    held.append(t)
        except (OSError, AttributeError):
            pass    # (ended)
    return held


def gone(pid, timeout):
    """Process pid (not our child) has ended, within timeout seconds."""
    end = time.monotonic() + timeout
    while pid and not exiting(pid) and time.monotonic() < end:
        time.sleep(0.01)
    return not pid or exiting(pid)


def untraced(pid, timeout):
    end = time.monotonic() + timeout
    while traced_threads(pid) and time.monotonic() < end:
        time.sleep(0.02)
    return not traced_threads(pid)


def worker_of(g, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        kids = children_of(g.pid)
        if kids:
            return kids[0]
        if g.poll() is not None:
            return None
        time.sleep(0.002)
    return None


def one_run(mode, seed, outdir, prog="pt_crash", args=None):
    """One attach to PROG (run with ARGS, or the campaign's), one kill (mode:
    gebpf, worker or both) at a random moment; returns what was seen."""
    rnd = random.Random("%s-%d" % (mode, seed) + ("" if prog == "pt_crash" else prog))
    phase = PHASES[seed % 3]
    fill = FILLS[seed // 3 % len(FILLS)]
    duration = rnd.uniform(0.2, 0.6)
    churn = prog in CHURNS
    if churn:
        fill = "-"
    res = {"mode": mode, "seed": seed, "phase": phase, "fill": fill, "prog": prog}
    argv = [prog_path(prog)] + (args or (CHURN if churn else [str(THREADS), fill]))
    p = subprocess.Popen(argv, stdout=subprocess.PIPE)
    g = None
    try:
        t0 = time.monotonic()   # (its threads' stacks are in the maps)
        while len(os.listdir("/proc/%d/task" % p.pid)) < THREADS and time.monotonic() - t0 < 10:
            time.sleep(0.01)
        time.sleep(0.02)
        before = maps_of(p.pid)
        tag = "%s-%s-%d" % (prog, mode, seed)
        err = open(os.path.join(outdir, tag + ".err"), "w+")
        g = subprocess.Popen([gebpf_path(), "trace", "-v", "-p", str(p.pid), "--range", "traced",
                              "--trap", "patch", "--duration", "%.3f" % duration,
                              "-o", os.path.join(outdir, tag + ".jsonl")],
                             stdout=subprocess.DEVNULL, stderr=err)
        w = worker_of(g)
        if phase == "setup":
            # Attach, map the cache, translate, plan, write the patches
            # and move the threads: ~0.1-0.3 s here.
            time.sleep(rnd.uniform(0.0, 0.3))
        else:
            t0 = time.monotonic()
            while time.monotonic() - t0 < 20 and g.poll() is None:
                err.seek(0)
                if "entries patched" in err.read():
                    break
                time.sleep(0.005)
            if phase == "run":
                time.sleep(rnd.uniform(0.0, duration))
            else:   # the end: from the duration's expiry through the teardown
                time.sleep(duration + rnd.uniform(-0.02, 0.5))
        res["attached"] = bool(w) and tracer_of(p.pid) == w
        res["ended"] = g.poll() is not None
        if mode == "gebpf":
            kill = [g.pid]
        elif mode == "worker":
            kill = [w]
        else:
            kill = [w, g.pid] if rnd.random() < 0.5 else [g.pid, w]
        for pid in kill:
            try:
                if pid:
                    os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass    # (the trace had ended)
        g.wait(timeout=30)
        # The worker (gebpf SIGKILLed: it ends the trace; else killed) is
        # gone before anything is read: one still attaching or detaching
        # threads would hold some of them (EPERM for gs_base's seize).
        res["worker_gone"] = gone(w, 20)
        res["detached"] = untraced(p.pid, 20)
        if mode != "gebpf":
            # The program runs on on whatever the worker left, 0.3 s.  (Its
            # ring does not fill: the trace's budget, --max-events' default,
            # is full long before, and the entries after it write no
            # records; the writer's give-up with no consumer has its unit
            # tests, tests/unit/test_jit_nostop.c.  A wait of up to 1.6 s
            # for it here was never met, and cost ~2 CPU s a FILL 300 run.)
            time.sleep(0.3)
        if churn and p.poll() is not None:
            res["text_restored"] = res["cache_gone"] = res["gs0"] = res["dropping"] = None
            err.seek(0)
            res["stderr"] = err.read()
            res["owner"] = owner_checks(res["stderr"])
            res["stderr"] = res["stderr"][-2000:]
            out = p.stdout.read()
            return finish_churn(res, p, out, argv)
        err.seek(0)
        res["stderr"] = err.read()
        res["owner"] = owner_checks(res["stderr"])
        res["stderr"] = res["stderr"][-2000:]
        res.update(left_in(p.pid, prog, before, res["stderr"]))
        if churn:
            end_early(p)
            try:
                out, _ = p.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                res["result"] = "hung"
                return res
            return finish_churn(res, p, out, argv)
        return finish_crash(res, p, argv)
    finally:
        for proc in (g, p):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


def finish_crash(res, p, argv):
    """pt_crash (run as argv) told to end (SIGUSR1): its output against a
    native run's given the same counts."""
    if p.poll() is not None:
        res["result"] = "died: status %d" % p.returncode
        return res
    p.send_signal(signal.SIGUSR1)
    try:
        out, _ = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        res["result"] = "hung"
        return res
    if p.returncode != 0:
        res["result"] = "status %d" % p.returncode
        return res
    counts = [ln.split()[0] for ln in out.decode().splitlines()]
    want = subprocess.run(argv[:2] + [argv[2].rstrip("p")] + counts, capture_output=True,
                          timeout=120,
                          check=True).stdout
    res["result"] = "ok" if out == want else "checksum %r, native %r" % (out, want)
    return res


def end_early(p):
    """A churn program whose kill's leftovers are read: told to make no
    more threads (SIGUSR1: tests/progs/pt_churn.c), it joins those it made
    and prints their sum.  Its threads made since the kill (0.3 s of them
    after the worker's) ran on what was left; the rest of its TOTAL would
    only have run on, 1-6 s of CPU a run (a third of the churn campaigns'
    time)."""
    try:
        if p.poll() is None:
            p.send_signal(signal.SIGUSR1)
    except ProcessLookupError:
        pass


NATIVE = {}


def native_prefix(argv):
    """{K: the line a churn program (argv) prints when it ends after K
    threads} from one native run with `prefix` (tests/progs/pt_churn.c)."""
    key = tuple(argv)
    if key not in NATIVE:
        out = subprocess.run(list(argv) + ["prefix"], capture_output=True, timeout=120,
                             check=True).stdout
        NATIVE[key] = {ln.split(b" ")[0]: ln + b"\n" for ln in out.splitlines()}
    return NATIVE[key]


def finish_churn(res, p, out, argv):
    """pt_churn ended (by itself, or early after end_early): its output
    against a native run's for as many threads."""
    p.wait()
    if p.returncode != 0:
        res["result"] = "died: status %d" % p.returncode
        return res
    want = native_prefix(argv).get(out.split(b" ")[0])
    res["result"] = "ok" if out == want else "output %r, native %r" % (out, want)
    return res


def campaign_of(c, mode, tmp_path, prog="pt_crash"):
    """The runs of Campaign C (its seeds), three at a time, and their counts."""
    runs = [r for _, r in c.map(lambda s: one_run(mode, s, str(tmp_path), prog), workers=3)]
    count = lambda f: sum(1 for r in runs if f(r))
    summary = {
        "prog": prog, "mode": mode, "runs": len(runs),
        "attached": count(lambda r: r.get("attached")),
        "checksum_ok": count(lambda r: r["result"] == "ok"),
        "detached": count(lambda r: r["detached"]),
        "text_restored": count(lambda r: r["text_restored"]),
        "cache_gone": count(lambda r: r["cache_gone"]),
        "gs0": count(lambda r: r["gs0"]),
        "ring_gave_up": count(lambda r: r.get("dropping")),
        "all_checked": count(lambda r: r.get("owner") and r["owner"][0] == r["owner"][1]),
        "by_phase": {ph: count(lambda r: r["phase"] == ph) for ph in PHASES},
    }
    print(json.dumps(summary))
    rep = os.environ.get("GEBPF_CRASH_REPORT")
    if rep:
        with open(rep, "a") as f:
            f.write(json.dumps(summary) + "\n")
            for r in runs:
                if r["result"] != "ok" or (mode == "gebpf" and not (
                        False not in (r["text_restored"], r["cache_gone"], r["gs0"]))) or (
                        mode == "worker" and r["text_restored"] is False):
                    f.write(json.dumps(r) + "\n")
    return runs, summary


def failures(runs, pred):
    """{seed: what went wrong} for the runs pred names a failure for; on
    pt_relchurn also every run whose -v says an entry block without the
    owner check."""
    def bad(r):
        o = r.get("owner")
        return pred(r) or (r["prog"] == "pt_relchurn" and o and o[0] != o[1] and
                           "the owner check in %d of %d entry blocks" % o)
    return {r["seed"]: "%s %s (%s, fill %s): %s" % (r["prog"], r["mode"], r["phase"], r["fill"],
                                                   bad(r)) for r in runs if bad(r)}


# What makes a run of each kind a failure (the reason; else a false value).
BAD = {
    "gebpf": lambda r: ((r["result"] != "ok" and r["result"]) or
                        (not r["detached"] and "still traced") or
                        (r["text_restored"] is False and "text not restored") or
                        (r["cache_gone"] is False and "maps changed") or
                        (r["gs0"] is False and "gs base")),
    "worker": lambda r: ((r["result"] != "ok" and r["result"]) or
                         (r["text_restored"] is False and "text not restored")),
    "both": lambda r: r["result"] != "ok" and r["result"],
}


@pytest.mark.parametrize("prog", PROGS)
def test_sigkill_gebpf(prog, campaign, tmp_path):
    """gebpf SIGKILLed (its worker ends the trace): the native result, the
    text restored, the cache gone, gs 0, nothing traced."""
    c = campaign(RUNS)
    runs, s = campaign_of(c, "gebpf", tmp_path, prog)
    c.check(failures(runs, BAD["gebpf"]), s)
    some_attached(runs, s)
    assert prog != "pt_relchurn" or s["all_checked"] >= len(runs) // 3, s


@pytest.mark.parametrize("prog", PROGS)
def test_sigkill_worker(prog, campaign, tmp_path):
    """The worker SIGKILLed: the program finishes natively, and its text is
    the file's (gebpf, still alive, wrote the entries back: common/guard.h);
    the cache and gs bases may stay."""
    c = campaign(RUNS)
    runs, s = campaign_of(c, "worker", tmp_path, prog)
    c.check(failures(runs, BAD["worker"]), s)
    some_attached(runs, s)
    assert prog != "pt_relchurn" or s["all_checked"] >= len(runs) // 3, s


@pytest.mark.parametrize("prog", PROGS)
def test_sigkill_both(prog, campaign, tmp_path):
    """gebpf and its worker SIGKILLed together: the program finishes natively."""
    c = campaign(RUNS)
    runs, s = campaign_of(c, "both", tmp_path, prog)
    c.check(failures(runs, BAD["both"]), s)
    some_attached(runs, s)
    assert prog != "pt_relchurn" or s["all_checked"] >= len(runs) // 3, s


def some_attached(runs, s):
    """The campaign was not vacuous: a kill of the run phase came while the
    worker held the program.  How many did is the load's to say (a set-up
    slowed past the trace's --duration ends it before a run-phase kill; a
    floor of a third of the runs failed a soak once at load 12): it asks
    only that one did, of three or more (a replay of a few seeds passes:
    docs/testing.md "Random campaigns")."""
    late = [r for r in runs if r["phase"] == "run"]
    assert len(late) < 3 or any(r.get("attached") for r in late), \
        "no kill of the run phase came while the worker held the program: %s" % json.dumps(s)


def test_a_program_ending_while_read_is_no_text_left_patched(monkeypatch):
    """Issues 32 and 33: CI's test_sigkill_worker[pt_churn] said "text not
    restored" at the end phase in 1 run of 20 (an Intel host, twice), and
    gebpf had restored it.  pt_churn ends by itself, about a second after
    its start on an idle host, and it ended while its run read what the kill
    left: /proc/PID/mem, opened while the program lived, then reads nothing,
    without an error, and nothing was compared with the file's text (its
    maps read as "", "maps changed" after a kill of gebpf).  With
    GEBPF_CRASH_CHURN="3 900 300" this VM's campaign (RUNS=60, seed 9000)
    failed 12 runs so, each one's program ended with its native output after
    the worker's own end or the guard's "2 of 2 patched places written
    back".  Here the program ends right after the open: the run must count
    the reads as not made (None), not as a kill's leftovers."""
    p = subprocess.Popen([prog_path("pt_churn"), "3", "100000", "300"],
                         stdout=subprocess.DEVNULL)
    try:
        t0 = time.monotonic()
        while len(os.listdir("/proc/%d/task" % p.pid)) < THREADS and time.monotonic() - t0 < 10:
            time.sleep(0.01)
        before = maps_of(p.pid)
        ended = []
        real_open = open

        def open_then_end(path, *args, **kwargs):
            f = real_open(path, *args, **kwargs)
            if str(path).endswith("/mem") and not ended:
                os.kill(p.pid, signal.SIGKILL)
                ended.append(gone(p.pid, 10))   # (a zombie: its pid stays ours)
            return f
        monkeypatch.setitem(globals(), "open", open_then_end)
        left = left_in(p.pid, "pt_churn", before, "")
        monkeypatch.delitem(globals(), "open")
        assert ended == [True]
        assert left == dict.fromkeys(("text_restored", "cache_gone", "gs0", "dropping")), left
        assert not BAD["worker"](dict(left, result="ok"))
    finally:
        p.kill()
        p.wait()


# Runs of the campaigns that once failed, run again each time: (kind, the
# program and its arguments, seed).  When the kill and the program's own end
# come is the host's, so such a run finds its bug again only sometimes; the
# test that fails every time without the fix is named with it.
FOUND = [
    # Issues 32, 33 (test_a_program_ending_while_read_is_no_text_left_patched):
    # the end phase; here its program ended while the run read it.
    ("worker", "pt_churn 3 900 300", 9005),
]


@pytest.mark.parametrize("mode,prog,seed", FOUND)
def test_found_again(mode, prog, seed, tmp_path):
    name, *args = prog.split()
    bad = failures([one_run(mode, seed, str(tmp_path), name, args)], BAD[mode])
    assert not bad, "\n".join(bad.values())


def test_signal_handlers_entering_the_range_gebpf_killed(campaign, tmp_path):
    """pt_signest (a SIGPROF handler calling `traced` while its thread is
    often inside it, or in its system call), gebpf SIGKILLed: its worker
    ends the trace as for pt_crash; every result checked in the program."""
    c = campaign(RUNS)
    runs, s = campaign_of(c, "gebpf", tmp_path, "pt_signest")
    bad = failures(runs, lambda r: (r["result"] != "ok" and r["result"]) or
                   (not r["text_restored"] and "text not restored") or (not r["gs0"] and "gs base"))
    c.check(bad, s)
    some_attached(runs, s)


def test_signal_handlers_entering_the_range_both_killed(campaign, tmp_path):
    """pt_signest, gebpf and its worker SIGKILLed: the handler's entry, taken
    where the worker left the thread (inside the cache, holding its lock or
    waiting for it), must not wait for the thread itself, and neither call
    may clobber the other's state: the program finishes natively (the entry
    finds gebpf gone and runs the original code: docs/trace.md "Harmless
    without gebpf").  (A quarter of the runs: each hung one waits 30 s.)
    Seed 353 (the end phase) once died of SIGSEGV: a thread running the
    handler under PTRACE_SYSCALL, in the cache's lock wait, was not stopped
    for the end, and the cache was unmapped under it (docs/trace.md "The
    end"); 1 run in 200 at a load of 4."""
    c = campaign(max(3, RUNS // 4), fixed=(353,))
    runs, s = campaign_of(c, "both", tmp_path, "pt_signest")
    bad = failures(runs, lambda r: r["result"] != "ok" and r["result"])
    c.check(bad, s)
    some_attached(runs, s)

"""The patch trap (`gebpf trace --trap patch`, docs/trace.md "The patch
trap"): entries patched into jumps to the stop-free code cache, no stop while
the program runs.  Every trace test program must give a file byte-identical
to --trap probes (where the patch trap does not apply it says so in one line
and the probe trap traces), and the target must be left as it was found:
its text equal to the file's, no code cache in its maps, gs base 0, even
when gebpf itself is SIGKILLed (its worker gets SIGTERM from the guard:
test_trap_crash.py).

Needs root and uprobes (the probe trap is the reference)."""
import ctypes
import json
import os
import re
import signal
import subprocess
import time

import pytest
from elftools.elf.elffile import ELFFile

from conftest import (PROGS, check_vt_order, gebpf_path, output_grew, prog_path, range_arg,
                      read_trace, run_gebpf, trace_summary)
import lackey
from test_pagetrap import bag, invocations, native, same_bag, same_file, trace
from test_probetrap import check_hot_runs, tracer_of

pytestmark = [pytest.mark.probetrap, pytest.mark.usefixtures("probes_ready")]

SINGLE = sorted(n for n, s in PROGS.items() if not s.get("threads"))
THREADED = sorted(n for n, s in PROGS.items() if s.get("threads"))
# Programs whose range the patch trap takes (the others: an instruction it
# cannot translate, an entry it cannot patch; the probe trap traces them).
APPLIES = {"mem_sizes", "atomics", "syscall_write", "rep_string", "stack_ops", "bittest",
           "exit_mid", "page_cross", "simd",
           "hot_loop", "tls", "switch", "recursion", "qsort_cb", "signal", "setjmp"}
# ... of which entries keep a uprobe (the planner refused their patch):
# setjmp's range ends inside the 5 bytes of its last entry, and its
# recursive call's return site (leave; ret) covers a `je` target.
PROBED = {"setjmp": 2}
REFUSED = "the patch trap does not apply"


def patch_vs_probes(name, rng, tmp_path, *args, extra=(), check_native=True):
    a, b = tmp_path / "patch.jsonl", tmp_path / "probes.jsonl"
    ra = trace(name, rng, a, *args, trap="patch", extra=extra)
    rb = trace(name, rng, b, *args, trap="probes", extra=extra)
    assert ra.stdout == rb.stdout, "%s printed differently: patch %r, probes %r" % (
        name, ra.stdout, rb.stdout)
    if check_native:
        assert ra.stdout.encode() == native(name, *args)
    same_file(a, b, "%s --range %s %s" % (name, rng, " ".join(extra)), ("patch", "probes"))
    lines, summary = read_trace(a)
    check_vt_order(lines)
    return ra, lines, summary


@pytest.mark.parametrize("name", SINGLE)
def test_exact_programs(name, tmp_path):
    """Byte-identical to the probe trap; patched where it applies, else one
    line saying why."""
    r, lines, summary = patch_vs_probes(name, range_arg(name), tmp_path,
                                        check_native=not PROGS[name].get("exit"))
    assert summary["insns"] > 0
    refused = [ln for ln in r.stderr.splitlines() if REFUSED in ln]
    if name in APPLIES:
        assert not refused and "entries patched, %d probed" % PROBED.get(name, 0) in r.stderr, \
            r.stderr
    else:
        assert len(refused) == 1, r.stderr


def threads_vs_probes(name, rng, tmp_path, *args, extra=()):
    """The same invocations per thread as under the probe trap (the
    interleaving of stretches may differ), the same counts, the native
    output; the patch trap's stderr."""
    a, b = tmp_path / "patch.jsonl", tmp_path / "probes.jsonl"
    ra = trace(name, rng, a, *args, trap="patch", extra=extra)
    rb = trace(name, rng, b, *args, trap="probes", extra=extra)
    assert ra.stdout == rb.stdout == native(name, *args).decode()
    assert "entries patched" in ra.stderr, ra.stderr
    (la, sa), (lb, sb) = read_trace(a), read_trace(b)
    check_vt_order(la)
    for k in ("insns", "mem", "events"):
        assert sa[k] == sb[k], "summary %s: patch %s, probes %s" % (k, sa, sb)
    entry = lackey.Program(prog_path(name)).range_of(rng)[0]
    pa, pb = invocations(la, entry), invocations(lb, entry)
    assert sorted(map(len, pa.values())) == sorted(map(len, pb.values()))
    same_bag(bag(pa), bag(pb), name)
    return ra.stderr, pa


@pytest.mark.parametrize("name", THREADED)
def test_exact_threads(name, tmp_path):
    """Several threads (an area each, stretches named by markers)."""
    threads_vs_probes(name, range_arg(name), tmp_path)


def test_thread_churn(tmp_path):
    """600 threads, 3 at a time, each calling `traced` 20 times and
    exiting: an exited thread's area of the cache goes to a later thread
    (at most 256 at once, not in all: more than 256 threads in all need
    areas given back), and the trace stays exact.  20 calls a thread take
    the in-range nanosleep twice (calls 0 and 16) and `helper`'s return
    entry every call; more calls only lengthened the two traces (100 calls:
    160 MB each, a minute of parsing)."""
    err, per = threads_vs_probes("pt_churn", "traced", tmp_path, 3, 600, 20,
                                 extra=("--max-events", "0"))
    assert err.count("new thread") == 600 and len(per) == 600, err[-2000:]
    assert sorted(set(map(len, per.values()))) == [20]


def test_signal_handlers_entering_the_range(tmp_path):
    """pt_signest: a SIGPROF handler calls `traced` while its thread is
    often inside it (or in its nanosleep), and the handler's own call is
    interrupted by the next SIGPROF: handlers nest, and each one's
    rt_sigreturn must be seen (a watch that ended at the handler's system
    call in the cache, or at the inner return, let the outer handler return
    natively into the range: the tail of a patch's jump, SIGSEGV/SIGILL in
    about 1 run of 10).  5 runs, each with the native output and no miss."""
    args = (3, 300, 20000, 20000, 20000)
    want = native("pt_signest", *args)
    taken = 0
    for k in range(5):
        out = tmp_path / ("signest%d.jsonl" % k)
        r = trace("pt_signest", "traced", out, *args, trap="patch", timeout=120)
        assert "entries patched" in r.stderr, r.stderr
        assert r.stdout.encode() == want if isinstance(r.stdout, str) else r.stdout == want, (
            r.stdout, want)
        assert "in-range misses" not in "".join(
            ln for ln in r.stderr.splitlines() if "warning" in ln), r.stderr
        m = re.search(r"(\d+) signals taken out of the cache", r.stderr)
        assert m, r.stderr
        taken += int(m.group(1))
    assert taken > 0, "no SIGPROF landed in the cache in 5 runs: the case was not exercised"


def test_max_insns(tmp_path):
    """--max-insns ends at the same instruction as under the probe trap."""
    _, lines, summary = patch_vs_probes("pt_hot", "traced", tmp_path, "300", "10",
                                        extra=("--max-insns", "1000"), check_native=False)
    assert summary["insns"] == 1000


def test_in_range_miss(tmp_path):
    """A target of the range the up-front translation does not reach
    (pt_miss: through a register, past 9000 nops): the first call's stretch
    from the miss runs natively (one warning: the trace is not exact), gebpf
    translates the target at its next idle, and the 5 later calls are traced
    exactly as --trap none --engine step traces them."""
    a, b = tmp_path / "patch.jsonl", tmp_path / "none.jsonl"
    ra = trace("pt_miss", "traced", a, trap="patch")
    trace("pt_miss", "traced", b, trap="none", extra=("--engine", "step"))
    assert "entries patched" in ra.stderr, ra.stderr
    warned = [ln for ln in ra.stderr.splitlines() if "in-range misses" in ln and "warning" in ln]
    assert len(warned) == 1 and "1 in-range misses" in warned[0], ra.stderr
    assert "6 entries, 1 in-range misses" in ra.stderr, ra.stderr
    (la, sa), (lb, sb) = read_trace(a), read_trace(b)
    check_vt_order(la)
    strip = lambda ls: [{k: v for k, v in o.items() if k != "vt"} for o in ls]
    la, lb = strip(la), strip(lb)
    execs = [k for k, o in enumerate(lb) if o["t"] == "exec"]
    assert len(execs) == 30 and sb["insns"] == 30, sb
    # The first call: its 3 instructions up to the jmp, not the missed 2.
    want = lb[:execs[3]] + lb[execs[5]:]
    assert la == want, "patch trace %s\nwant %s" % (la, want)
    assert sa["insns"] == 28


@pytest.mark.parametrize("name,insns,misses", [("pt_inpatch", 35, 0), ("pt_slot", 7, 0)])
def test_target_under_a_patch(name, insns, misses, tmp_path):
    """An indirect call's target inside the 5 bytes of another entry's patch
    (found by the random corpus), in a range too large to translate whole
    (pt_inpatch) or whose lookup slot a later instruction shares (pt_slot):
    translated and put in the lookup table last, it never runs natively (the
    jump's tail: SIGSEGV before).  Exactly --trap none's trace, no miss
    (pt_slot's return site was evicted too, one miss, when its filler was
    10-byte movabs: the lookup chain around it is another since its filler
    became 15-byte nops, for the code cache's room)."""
    a, b = tmp_path / "patch.jsonl", tmp_path / "none.jsonl"
    ra = trace(name, "traced", a, trap="patch")
    trace(name, "traced", b, trap="none", extra=("--engine", "step"))
    assert "entries patched" in ra.stderr and " %d in-range misses" % misses in ra.stderr, \
        ra.stderr
    assert "killed" not in ra.stderr, ra.stderr
    same_file(a, b, "%s --range traced" % name, ("patch", "none"))
    assert trace_summary(a)["insns"] == insns


def test_internal_target_under_an_entry(tmp_path):
    """pt_intarget: a loop head reached only from inside the range lies in
    the 5 bytes of an entry (a return site): that entry keeps a uprobe (code
    running natively from the original bytes would branch into the jump's
    middle), the start is patched, and the trace is exactly the probe
    trap's."""
    r, lines, summary = patch_vs_probes("pt_intarget", "traced", tmp_path)
    refused = [ln for ln in r.stderr.splitlines() if "keeps a uprobe" in ln]
    assert len(refused) == 1 and "a branch target or code address of the range inside its 5 bytes" \
        in refused[0], r.stderr
    assert "1 entries patched, 1 probed" in r.stderr, r.stderr
    assert summary["insns"] == 36


PYTHON = "/usr/bin/python3"
PY_SCRIPT = "s = 0\nfor i in range(20):\n    s += i * i % 7\nprint(s)\n"


@pytest.mark.skipif(not os.path.exists(PYTHON), reason="no /usr/bin/python3")
def test_python_eval_loop(tmp_path):
    """Python's bytecode loop (_PyEval_EvalFrameDefault: ~14k instructions,
    620 entries, two of them refused by the planner and kept on a uprobe,
    computed-goto handlers found in the file's data) traced in launch mode:
    the patch trap's file is byte-identical to the probe trap's, with no
    in-range miss."""
    runs = {}
    for t in ("patch", "probes"):
        out = tmp_path / ("%s.jsonl" % t)
        r = run_gebpf(["trace", "-v", "--trap", t, "--range", "_PyEval_EvalFrameDefault",
                       "--max-insns", "300000", "-o", out, "--", PYTHON, "-S", "-c", PY_SCRIPT],
                      timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        assert r.stdout == "41\n"
        runs[t] = (out, r.stderr)
    err = runs["patch"][1]
    m = re.search(r"patch trap: (\d+) entries patched, (\d+) probed", err)
    assert m and int(m.group(1)) > 0 and int(m.group(2)) > 0, err[-3000:]
    assert " 0 in-range misses" in err, err[-3000:]
    same_file(runs["patch"][0], runs["probes"][0], "python3 --range _PyEval_EvalFrameDefault",
              ("patch", "probes"))
    assert trace_summary(runs["patch"][0])["insns"] == 300000


# ------------------------------------------------------------ the target as found

PTRACE_SEIZE, PTRACE_INTERRUPT, PTRACE_GETREGS, PTRACE_DETACH = 0x4206, 0x4207, 12, 17
_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
_libc.ptrace.restype = ctypes.c_long


def gs_base(pid):
    """The gs base of pid's main thread (attached and detached for it)."""
    assert _libc.ptrace(PTRACE_SEIZE, pid, None, None) == 0, os.strerror(ctypes.get_errno())
    try:
        _libc.ptrace(PTRACE_INTERRUPT, pid, None, None)
        os.waitpid(pid, 0x40000000)  # __WALL
        regs = (ctypes.c_ulonglong * 27)()
        assert _libc.ptrace(PTRACE_GETREGS, pid, None, ctypes.byref(regs)) == 0
        return regs[22]              # user_regs_struct.gs_base
    finally:
        _libc.ptrace(PTRACE_DETACH, pid, None, None)


def text_of(path, name):
    """The file bytes of function NAME (its link-time address, its bytes)."""
    with open(path, "rb") as f:
        elf = ELFFile(f)
        sym = next(s for s in elf.get_section_by_name(".symtab").iter_symbols()
                   if s.name == name)
        addr, size = sym["st_value"], sym["st_size"]
        for seg in elf.iter_segments():
            if seg["p_type"] == "PT_LOAD" and seg["p_vaddr"] <= addr < seg["p_vaddr"] + seg["p_filesz"]:
                f.seek(seg["p_offset"] + addr - seg["p_vaddr"])
                return addr, f.read(size)
    raise AssertionError("no %s in %s" % (name, path))


def check_as_found(pid, maps_before):
    addr, want = text_of(prog_path("pt_hot"), "traced")
    with open("/proc/%d/mem" % pid, "rb") as f:
        f.seek(addr)
        got = f.read(len(want))
    assert got == want, "traced's text after the trace: %s, the file's %s" % (got.hex(), want.hex())
    with open("/proc/%d/maps" % pid) as f:
        maps = f.read()
    assert maps == maps_before, "maps changed:\n%s\nbefore:\n%s" % (maps, maps_before)
    assert gs_base(pid) == 0


FILL = "100000"


def finish_hot(p):
    """SIGUSR1 ends pt_hot -1: its checksum must be a native run's of as many calls."""
    p.send_signal(signal.SIGUSR1)
    got, _ = p.communicate(timeout=120)
    first, _, rest = got.partition(b"\n")
    assert p.returncode == 0 and first.startswith(b"calls "), (p.returncode, got)
    want = subprocess.run([prog_path("pt_hot"), first.split()[1].decode(), FILL],
                          capture_output=True, timeout=120, check=True).stdout
    assert rest == want, (got, want)


def test_attach_left_as_found(tmp_path):
    """Attach to pt_hot for 1 s: every invocation is traced's straight-line
    sequence; afterwards its text is the file's, its maps as before, gs 0,
    and it ends with its native checksum."""
    p = subprocess.Popen([prog_path("pt_hot"), "-1", FILL], stdout=subprocess.PIPE)
    try:
        time.sleep(0.1)
        with open("/proc/%d/maps" % p.pid) as f:
            before = f.read()
        out = tmp_path / "attach.jsonl"
        r = subprocess.run([gebpf_path(), "trace", "-v", "-p", str(p.pid), "--range", "traced",
                            "--trap", "patch", "--duration", "1", "-o", str(out)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert "entries patched" in r.stderr, r.stderr
        assert p.poll() is None, "pt_hot ended while traced"
        check_as_found(p.pid, before)
        finish_hot(p)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    check_hot_runs(out, 100)


def test_sigint_launch(tmp_path):
    """SIGINT to gebpf ends a launched trace: exit 0, a well-formed trace."""
    out = tmp_path / "int.jsonl"
    g = subprocess.Popen([gebpf_path(), "trace", "--range", "traced", "--trap", "patch", "-o",
                          str(out), "--", prog_path("pt_hot"), "-1", FILL],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    output_grew(out, g, 1 << 20)   # (1 s was not enough at load 15: no event yet)
    g.send_signal(signal.SIGINT)
    _, err = g.communicate(timeout=60)
    assert g.returncode == 0, err
    lines, summary = read_trace(out)
    check_vt_order(lines)
    assert summary["insns"] > 1000, summary


# SIGKILL of gebpf, of its worker and of both: test_trap_crash.py.


PY_LOOP = "def f(n):\n    s = 0\n    for i in range(n):\n        s += i * i % 7\n    return s\n" \
          "while True:\n    f(1000)\n"
RANGE_RE = re.compile(r"range _PyEval_EvalFrameDefault = (0x[0-9a-f]+)-(0x[0-9a-f]+)")


def file_bytes(path, addr, size):
    """The bytes of a non-PIE file at link-time ADDR (its PT_LOAD segments)."""
    with open(path, "rb") as f:
        for seg in ELFFile(f).iter_segments():
            if seg["p_type"] == "PT_LOAD" and seg["p_vaddr"] <= addr < seg["p_vaddr"] + seg["p_filesz"]:
                f.seek(seg["p_offset"] + addr - seg["p_vaddr"])
                return f.read(size)
    raise AssertionError("%#x not in %s" % (addr, path))


def python_as_found(pid, lo, hi, maps_before):
    """The range's text is the file's (no patch, no uprobe's int3), the maps
    as before (no code cache), gs 0, and the loop still running."""
    with open("/proc/%d/mem" % pid, "rb") as f:
        f.seek(lo)
        got = f.read(hi - lo + 1)
    want = file_bytes(os.path.realpath(PYTHON), lo, hi - lo + 1)
    assert got == want, "%d bytes of the range differ from the file's" % sum(
        a != b for a, b in zip(got, want))
    with open("/proc/%d/maps" % pid) as f:
        assert f.read() == maps_before
    assert gs_base(pid) == 0


@pytest.mark.skipif(not os.path.exists(PYTHON), reason="no /usr/bin/python3")
def alive(pid):
    """pid exists and is no zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_python_attached(tmp_path):
    """A Python loop attached with -p for 2 s, range _PyEval_EvalFrameDefault:
    the patch trap traces it with its refused entries on uprobes and no
    in-range miss; then, attached again, gebpf SIGKILLed (its worker gets
    SIGTERM from the guard): both times the target is left as found, its
    uprobes gone."""
    p = subprocess.Popen([PYTHON, "-S", "-c", PY_LOOP], stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        with open("/proc/%d/maps" % p.pid) as f:
            before = f.read()
        out = tmp_path / "py.jsonl"
        r = subprocess.run([gebpf_path(), "trace", "-v", "-p", str(p.pid), "--trap", "patch",
                            "--range", "_PyEval_EvalFrameDefault", "--duration", "2", "-o",
                            str(out)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-3000:]
        m = re.search(r"patch trap: (\d+) entries patched, (\d+) probed", r.stderr)
        assert m and int(m.group(1)) > 0 and int(m.group(2)) > 0, r.stderr[-3000:]
        assert " 0 in-range misses" in r.stderr, r.stderr[-3000:]
        lo, hi = (int(x, 16) for x in RANGE_RE.search(r.stderr).groups())
        with open(out, "rb") as f:          # (the summary: 1M lines are slow to parse)
            f.seek(-400, os.SEEK_END)
            summary = json.loads(f.read().splitlines()[-1])
        assert summary["t"] == "summary" and summary["insns"] > 100000, summary
        assert p.poll() is None, "python ended while traced"
        python_as_found(p.pid, lo, hi, before)
        g = subprocess.Popen([gebpf_path(), "trace", "-p", str(p.pid), "--trap", "patch",
                              "--range", "_PyEval_EvalFrameDefault", "-o", str(tmp_path / "k.jsonl")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):         # attached, the trap set up (the range being traced)
            if os.path.exists(tmp_path / "k.jsonl") and os.path.getsize(tmp_path / "k.jsonl") > 4096:
                break
            time.sleep(0.05)
        worker = tracer_of(p.pid)
        g.send_signal(signal.SIGKILL)
        g.wait(timeout=30)
        # The worker detaches, then removes the disarmed uprobes (their
        # removal waits for grace periods while python runs): as found
        # once it is gone.
        for _ in range(300):
            if tracer_of(p.pid) == 0 and not (worker and alive(worker)):
                break
            time.sleep(0.05)
        assert tracer_of(p.pid) == 0, "python still traced 15 s after gebpf was SIGKILLed"
        assert not (worker and alive(worker)), "gebpf's worker still there 15 s after the kill"
        python_as_found(p.pid, lo, hi, before)
        assert p.poll() is None, "python died"
    finally:
        p.kill()
        p.wait()


def test_no_room_for_the_cache_falls_back_and_says_what_is_there(tmp_path):
    """pt_noroom reserves every free MiB from 16 MiB to 2 GiB: attached
    with the default trap, gebpf finds no 24 MiB for a code cache within
    1 GiB of `traced`, says so in one warning, lists under -v what lies
    there (so that a runtime's layout that leaves no room, as a node run
    once did on CI, can be read from the log), and traces every call
    exactly with the probe trap."""
    calls = 50
    p = subprocess.Popen([prog_path("pt_noroom"), str(calls)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().startswith("ready ")
        out, errp = tmp_path / "t.jsonl", tmp_path / "t.err"
        with open(errp, "w+") as err:
            g = subprocess.Popen([gebpf_path(), "trace", "-v", "-p", str(p.pid), "--range", "traced",
                                  "-o", str(out)], stdout=subprocess.DEVNULL, stderr=err)
            end = time.monotonic() + 60
            while "for the set-up" not in errp.read_text() and g.poll() is None:
                assert time.monotonic() < end, errp.read_text()
                time.sleep(0.02)
            p.stdin.write("x")
            p.stdin.flush()
            assert p.stdout.readline() == "%d\n" % sum(3 * i + 1 for i in range(calls))
            g.send_signal(signal.SIGINT)
            assert g.wait(timeout=120) == 0, errp.read_text()
        stderr = errp.read_text()
        p.stdin.close()
        assert p.wait(timeout=60) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert re.search(r"no room for a code cache near 0x[0-9a-f]+ \(no free 24 MiB within 1 GiB "
                     r"of the range", stderr), stderr
    assert re.search(r"the mappings within 1 GiB of 0x[0-9a-f]+-0x[0-9a-f]+ \(brk starts at", stderr), stderr
    assert re.search(r"^gebpf: trace:   0x[0-9a-f]+-0x[0-9a-f]+ \d+ KiB .*pt_noroom$", stderr, re.M), stderr
    assert "entries patched" not in stderr, stderr
    prog = lackey.Program(prog_path("pt_noroom"))
    n = len(prog.insns(*prog.span(["traced"])))
    assert trace_summary(out)["insns"] == calls * n, stderr


XOL_LATER = "its uprobe removed once the program ran past it"


@pytest.mark.parametrize("name,rng,args", [("trap_hot", "traced", (5, 20)),
                                           ("tc_except", "traced", (30,))],
                         ids=["static", "dynamic"])
def test_launch_uprobe_removed_after_the_program_ran_past_it(name, rng, args, tmp_path):
    """At launch under the patch trap, the uprobe that maps the kernel's
    uprobe page first is removed once the program ran past its instruction
    (a static program's first one, ld.so's after its call of _dl_start),
    not before the program runs (docs/trace.md "Probe trap"): -v says so,
    the program's output is its native one and the trace is byte for byte
    the probe trap's (the same layout), whose uprobe went before the
    program ran."""
    a, b = tmp_path / "patch.jsonl", tmp_path / "probes.jsonl"
    ra = trace(name, rng, a, *args, trap="patch")
    rb = trace(name, rng, b, *args, trap="probes")
    assert XOL_LATER in ra.stderr, ra.stderr
    assert "entries patched" in ra.stderr, ra.stderr
    assert XOL_LATER not in rb.stderr and "mapped first" in rb.stderr, rb.stderr
    assert ra.stdout.encode() == rb.stdout.encode() == native(name, *args)
    same_file(a, b, "%s --range %s" % (name, rng), ("patch", "probes"))
    assert read_trace(a)[1]["insns"] > 0


def test_launch_uprobe_near_the_range_goes_before_the_program_runs(tmp_path):
    """exit_mid's range starts 7 bytes after its entry point, whose first
    instruction the uprobe is on: the patch trap reads those bytes, so the
    uprobe goes before the program runs, and the trace is the probe trap's."""
    a, b = tmp_path / "patch.jsonl", tmp_path / "probes.jsonl"
    ra = trace("exit_mid", "traced", a, trap="patch")
    trace("exit_mid", "traced", b, trap="probes")
    assert "entries patched" in ra.stderr and "mapped first" in ra.stderr, ra.stderr
    assert XOL_LATER not in ra.stderr, ra.stderr
    same_file(a, b, "exit_mid --range traced", ("patch", "probes"))

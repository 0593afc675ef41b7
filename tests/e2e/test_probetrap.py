"""The probe trap (`gebpf trace --trap probes`): uprobes at the range's
entries, the target native everywhere else, and safe if gebpf dies.

The contract is the same as the page trap's: "speed never changes the
output".  Every trace test program traced with --trap probes must give a
file byte-identical to --trap none (everything single-stepped; --step-all
is its old spelling), and the program's output must be the native one.
Programs made for entries (tests/progs/pt_*; docs/testing.md lists them;
recursion is test_exact.py's `recursion`):
a compiler-split cold part jumping back, longjmp back into the
range, a C++ exception caught inside it, signals whose handler (outside)
returns into the middle, re-entry from outside while the range is active,
a library dlopened after the trace starts, exec chains (env, a #!/bin/sh
wrapper), four threads, and a hot program SIGKILLed gebpf must leave
running correctly.

Every test here is marked `probetrap` (run them alone with -m probetrap)
and needs a gebpf with --trap: without it they fail, they are not skipped.
"""
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import time

import pytest
from elftools.elf.elffile import ELFFile

import lackey
from campaign import Campaign
from conftest import PROGS, check_vt_order, gebpf_path, private_prog, prog_path, range_arg, read_trace
from test_pagetrap import (bag, invocations, native, same_bag, same_file, symbol, syscall_pcs,
                           trace)

pytestmark = [pytest.mark.probetrap, pytest.mark.usefixtures("probes_ready")]

NAMES = ("probes", "none")


def probes_vs_none(name, rng, tmp_path, *args, timeout=60, check_native=True, ref="none",
                   ref_args=None):
    """Trace NAME ARGS with --trap probes and --trap REF (none: everything
    single-stepped; with REF_ARGS instead of ARGS): byte-identical,
    well-formed traces, the same output, and that of a native run (unless
    check_native is false: programs that exit non-zero).  Returns (lines,
    summary)."""
    a, b = tmp_path / "probes.jsonl", tmp_path / ("%s.jsonl" % ref)
    ra = trace(name, rng, a, *args, trap="probes", timeout=timeout)
    rb = trace(name, rng, b, *(args if ref_args is None else ref_args), trap=ref, timeout=timeout)
    assert ra.stdout == rb.stdout, "%s printed differently: probes %r, %s %r" % (
        name, ra.stdout, ref, rb.stdout)
    want = native(name, *args) if check_native else ra.stdout.encode()
    assert ra.stdout.encode() == want, "%s printed differently under the probe trap:\n%s\n" \
        "natively:\n%s" % (name, ra.stdout, want.decode())
    same_file(a, b, "%s %s --range %s" % (name, " ".join(map(str, args)), rng), ("probes", ref))
    lines, summary = read_trace(a)
    check_vt_order(lines)
    assert summary["dropped"] == 0, summary
    return lines, summary


def probes_vs_none_threads(name, rng, tmp_path, *args, timeout=60):
    """The same for a multi-threaded program: vcpu numbering and the
    interleaving of stretches may differ, so the per-invocation sequences are
    compared as multisets.  Returns (per-vcpu invocations, summary)."""
    a, b = tmp_path / "probes.jsonl", tmp_path / "none.jsonl"
    ra = trace(name, rng, a, *args, trap="probes", timeout=timeout)
    rb = trace(name, rng, b, *args, trap="none", timeout=timeout)
    want = native(name, *args).decode()
    assert ra.stdout == rb.stdout == want, "output: probes %r, none %r, native %r" % (
        ra.stdout, rb.stdout, want)
    (la, sa), (lb, sb) = read_trace(a), read_trace(b)
    check_vt_order(la)
    for k in ("insns", "mem", "events"):
        assert sa[k] == sb[k], "summary %s: probes %s, none %s" % (k, sa, sb)
    entry = lackey.Program(prog_path(name)).range_of(rng)[0]
    pa, pb = invocations(la, entry), invocations(lb, entry)
    assert sorted(map(len, pa.values())) == sorted(map(len, pb.values())), \
        "invocations per vcpu: probes %s, none %s" % (
            {v: len(r) for v, r in pa.items()}, {v: len(r) for v, r in pb.items()})
    same_bag(bag(pa), bag(pb), name)
    return pa, sa


def exec_count(lines, pc):
    return sum(1 for ln in lines if ln["t"] == "exec" and int(ln["pc"], 16) == pc)


def insn_after(name, fn, pattern):
    """PCs in NAME's function FN of the instructions that follow one whose
    disassembly matches PATTERN (e.g. the return site of a call)."""
    p = lackey.Program(prog_path(name))
    table = p.insns(*p.span([fn]))
    pcs = sorted(table)
    return [pcs[i + 1] for i, pc in enumerate(pcs[:-1]) if re.search(pattern, table[pc])]


# ------------------------------------------------------------ every trace test program

SINGLE = sorted(n for n, s in PROGS.items() if not s.get("threads"))
THREADED = sorted(n for n, s in PROGS.items() if s.get("threads"))


@pytest.mark.parametrize("name", SINGLE)
def test_exact_programs(name, tmp_path):
    """The programs of test_exact.py (checked against lackey there)."""
    lines, summary = probes_vs_none(name, range_arg(name), tmp_path,
                                    check_native=not PROGS[name].get("exit"))
    assert summary["insns"] > 0


@pytest.mark.parametrize("name", THREADED)
def test_exact_threads(name, tmp_path):
    probes_vs_none_threads(name, range_arg(name), tmp_path)


def segv_span():
    return "%#x-%#x" % (symbol("trap_segv", "calm")[0], symbol("trap_segv", "traced_null")[1])


# The page-trap programs of test_pagetrap.py: (name, range, args).
PAGETRAP_CASES = [
    ("trap_hot", "traced", (100, 100)),
    ("trap_hot", "traced", (100, 100, 3)),
    ("trap_mmap", "traced", ()),
    ("trap_regs", "traced_block", (5, 0)),
    ("trap_regs", "traced_block", (5, 1)),
    ("trap_segv", "traced", (3,)),
    ("trap_segv", "traced_null", (3,)),
    ("trap_segv", "calm", (3,)),
    ("trap_segv", segv_span, (3,)),
    ("trap_mprotect", "traced", (2, "n")),
    ("trap_mprotect", "traced", (2, "w")),
    ("trap_mprotect", "traced", (2, "r")),
    ("trap_fork", "traced", (5, "f")),
    ("trap_fork", "traced", (5, "v")),
    ("trap_fork", "traced", (5, "s")),
    ("trap_smc", "jit", ()),
    ("trap_dyn", "libtrapfoo:foo_hot", (50, 200)),
    ("trap_dyn", "trap_dyn:dyn_hot", (50, 200)),
]


def case_id(c):
    rng = c[1] if isinstance(c[1], str) else "span"
    return "-".join([c[0], rng] + [str(a) for a in c[2]])


@pytest.mark.parametrize("case", PAGETRAP_CASES, ids=case_id)
def test_pagetrap_programs(case, tmp_path):
    name, rng, args = case
    probes_vs_none(name, rng if isinstance(rng, str) else rng(), tmp_path, *args)


def test_pagetrap_threads(tmp_path):
    """trap_threads: threads blocked in syscalls inside the range while the
    others enter it."""
    per, _ = probes_vs_none_threads("trap_threads", "traced", tmp_path, 20, 200)
    assert len(per) == 4, sorted(per)


# ------------------------------------------------------------ programs made for entries

def test_cold_split(tmp_path):
    """pt_cold: `traced.cold` (out of the range) jumps back into the middle
    of `traced`: the instruction it lands on runs once per cold path."""
    n = 200
    lines, summary = probes_vs_none("pt_cold", "traced", tmp_path, n)
    p = lackey.Program(prog_path("pt_cold"))
    cold = p.insns(*p.span(["traced.cold"]))
    lo, hi = p.span(["traced"])
    back = [int(m.group(1), 16) for t in cold.values()
            for m in [re.match(r"jmp\s+([0-9a-f]+)", t)] if m and lo <= int(m.group(1), 16) <= hi]
    assert back, "traced.cold does not jump back into traced: %s" % cold
    colds = sum((x + i) % 7 == 0 for x in range(n) for i in range(4))
    # the landing instruction also runs on the hot path; the cold runs add colds
    assert exec_count(lines, back[0]) >= colds, (hex(back[0]), colds)
    assert exec_count(lines, lo) == n


def test_setjmp_longjmp_back_into_range(tmp_path):
    """pt_setjmp: libc's longjmp, called from `bail` (outside), lands right
    after traced's call to setjmp: 20 first returns plus 10 longjmps."""
    lines, _ = probes_vs_none("pt_setjmp", "traced", tmp_path, 20)
    site = insn_after("pt_setjmp", "traced", r"call\s.*<_?setjmp>")
    assert len(site) == 1, site
    assert exec_count(lines, site[0]) == 30


def test_exception_caught_in_range(tmp_path):
    """pt_except: `thrower` (outside) throws for every third value; the
    unwinder resumes `traced` at its landing pad, which begins the catch.
    The reference is the page trap (itself byte-identical to --trap none on
    every other program, test_pagetrap.py): under --trap none the first
    throw of a static C++ program single-steps libgcc sorting every FDE of
    the binary, 2.8 million instructions (2.5 minutes on the test VM)."""
    lines, _ = probes_vs_none("pt_except", "traced", tmp_path, 30, ref="pages")
    p = lackey.Program(prog_path("pt_except"))
    table = p.insns(*p.span(["traced"]))
    catch = [pc for pc, t in table.items() if "__cxa_begin_catch" in t]
    assert len(catch) == 1, table
    assert exec_count(lines, catch[0]) == 10


@pytest.mark.parametrize("timer", [False, True], ids=["tgkill", "tgkill+timer"])
def test_signal_returns_into_middle(timer, tmp_path):
    """pt_sigmid: a SIGUSR1 sent by an inline syscall in `traced` runs its
    handler (outside) as the syscall returns, and sigreturn resumes the
    range after the syscall (10 times); with "timer", a 1 ms interval timer
    also interrupts the range anywhere (its handler touches nothing the
    range reads, so the trace is the same wherever it hits).  The reference
    (--trap none) gets a 20 ms timer: single-stepped, the handler and its
    return take ~10 steps, and a step of 40 us or more (a loaded VM) makes
    that longer than 1 ms, so every step met the timer's next signal first
    and the program never went on (a CI run: 60 s at one pc)."""
    args = (50, "timer", 1000) if timer else (50,)
    ref = (50, "timer", 20000) if timer else None
    lines, _ = probes_vs_none("pt_sigmid", "traced", tmp_path, *args, ref_args=ref)
    pcs = syscall_pcs("pt_sigmid", "traced")
    assert len(pcs) == 1, pcs
    after = insn_after("pt_sigmid", "traced", r"^syscall")
    assert (exec_count(lines, pcs[0]), exec_count(lines, after[0])) == (10, 10), \
        "exec lines of the syscall and of the instruction after it (10 each natively)"


def test_reentry_from_outside(tmp_path):
    """pt_reenter: `traced` calls `outside`, which calls `traced` again while
    the first is active: 5 x (1 + 2 + 3 + 4) entries at the start."""
    lines, _ = probes_vs_none("pt_reenter", "traced", tmp_path, 20)
    assert exec_count(lines, symbol("pt_reenter", "traced")[0]) == 50


def test_four_threads(tmp_path):
    """pt_threads: four threads released together by a barrier call
    `traced` 25 times each."""
    per, _ = probes_vs_none_threads("pt_threads", "traced", tmp_path, 25)
    assert sorted(len(r) for r in per.values()) == [25] * 4, {v: len(r) for v, r in per.items()}


# ------------------------------------------------------------ ranges whose module is not mapped yet

def elf_function(path, name):
    """(link-time start, sorted instruction PCs) of function NAME in PATH."""
    with open(path, "rb") as f:
        elf = ELFFile(f)
        for secname in (".symtab", ".dynsym"):
            sec = elf.get_section_by_name(secname)
            for s in sec.iter_symbols() if sec else ():
                if s.name == name and s["st_info"]["type"] in ("STT_FUNC", "STT_GNU_IFUNC"):
                    lo, size = s["st_value"], s["st_size"]
                    break
            else:
                continue
            break
        else:
            raise KeyError("%s: no function %s" % (path, name))
    out = subprocess.run(["objdump", "-d", "-w", "--no-show-raw-insn", "--start-address=%#x" % lo,
                          "--stop-address=%#x" % (lo + size), path],
                         check=True, capture_output=True, text=True).stdout
    pcs = sorted(int(m.group(1), 16) for m in re.finditer(r"^\s*([0-9a-f]+):\s", out, re.M))
    return lo, pcs


def check_function_lines(lines, summary, path, name, any_base=False):
    """Every exec line is an instruction of NAME (placed where the summary's
    start says the function is; with any_base, at any page-aligned load
    address: each image of an exec chain maps the library at its own)."""
    lo, pcs = elf_function(path, name)
    base = int(summary["start"], 16) - lo
    want = {pc + base for pc in pcs}
    got = {int(ln["pc"], 16) for ln in lines if ln["t"] == "exec"}
    assert got, "no exec line at all (summary %s)" % summary
    if any_base:
        got = {g for g in got if not any(g >= p and (g - p) % 4096 == 0 for p in pcs)} | \
            (got & want)
    assert got <= want, "exec lines outside %s: %s" % (
        name, sorted(hex(x) for x in got - want)[:10])
    return base + lo


def test_dlopen_after_start(tmp_path):
    """pt_dlopen dlopens progs/lib/libptdl.so after it starts: the range
    `libptdl:ptdl_work` is pending (resolved from the file through the
    program's RUNPATH) until then, and its 20 calls are traced."""
    out = tmp_path / "probes.jsonl"
    r = trace("pt_dlopen", "libptdl:ptdl_work", out, 20, trap="probes", timeout=120)
    assert r.stdout.encode() == native("pt_dlopen", 20)
    lines, summary = read_trace(out)
    start = check_function_lines(lines, summary, prog_path("lib/libptdl.so"), "ptdl_work")
    assert exec_count(lines, start) == 20


def test_dlopen_probes_equal_none(tmp_path):
    probes_vs_none("pt_dlopen", "libptdl:ptdl_work", tmp_path, 20, timeout=120)


def libc_path():
    out = subprocess.run(["ldd", prog_path("trap_dyn")], capture_output=True, text=True).stdout
    m = re.search(r"libc\.so\.6 => (\S+)", out)
    assert m, "ldd %s: %s" % (prog_path("trap_dyn"), out)
    return m.group(1)


def exec_chain(kind, tmp_path):
    """argv running trap_dyn 50 200 through KIND: `env` or a #!/bin/sh
    wrapper that execs it (as version-manager shims do)."""
    if kind == "env":
        return [shutil.which("env"), prog_path("trap_dyn"), 50, 200]
    wrap = tmp_path / "wrap.sh"
    wrap.write_text('#!/bin/sh\nexec %s "$@"\n' % prog_path("trap_dyn"))
    wrap.chmod(wrap.stat().st_mode | stat.S_IXUSR)
    return [str(wrap), 50, 200]


@pytest.mark.parametrize("kind", ["env", "sh"])
def test_exec_chain_libc_range(kind, tmp_path):
    """`--range libc:strtol -- env trap_dyn 50 200` (and through a shell
    script): libc is not mapped when gebpf starts the chain; the range
    resolves when it is, across the exec, and trap_dyn's two atol calls
    (glibc's headers turn atol into strtol) (and
    any the chain makes) are traced as with --trap none."""
    argv = exec_chain(kind, tmp_path)
    res = {}
    for trap in NAMES:
        out = tmp_path / ("%s.jsonl" % trap)
        cmd = [gebpf_path(), "trace", "-v", "--range", "libc:strtol", "-o", str(out),
               "--trap", trap, "--"] + [str(a) for a in argv]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=180,
                           env={k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"})
        assert r.returncode == 0, "%s: exit %d: %s" % (" ".join(cmd), r.returncode, r.stderr[-2000:])
        assert r.stdout.encode() == native("trap_dyn", 50, 200)
        res[trap] = out
    lines, summary = read_trace(res["probes"])
    start = check_function_lines(lines, summary, libc_path(), "strtol", any_base=True)
    assert exec_count(lines, start) >= 2, "trap_dyn calls strtol twice (atol)"
    same_file(res["probes"], res["none"], "%s chain, libc:strtol" % kind, NAMES)


# ------------------------------------------------------------ attach mode and crash safety

def pt_hot_traced():
    p = lackey.Program(prog_path("pt_hot"))
    return sorted(p.insns(*p.span(["traced"])))


def check_hot_runs(out, least):
    """The trace at out of pt_hot's traced (attached mid-run): in vt order, more
    than least invocations, each the whole function (the first may start inside
    it, the last may end mid-call)."""
    lines, summary = read_trace(out)
    check_vt_order(lines)
    pcs = pt_hot_traced()
    runs = invocations(lines, pcs[0]).get(0, [])
    assert len(runs) > least, "only %d entries traced in 1 s (summary %s)" % (len(runs), summary)
    for k, run in enumerate(runs):
        seq = [int(x[1], 16) for x in run if x[0] == "exec"]
        ok = seq == pcs
        if k == 0 and seq[0] != pcs[0]:
            ok = seq == pcs[len(pcs) - len(seq):]   # attached while inside traced
        if k == len(runs) - 1:
            ok = ok or seq == pcs[:len(seq)]         # the duration may end mid-call
        assert ok, "invocation %d: %s" % (k, [hex(x) for x in seq])

def test_attach_hot_program(tmp_path):
    """Attach to pt_hot (thousands of entries a second) for 1 s: every
    invocation traced is traced's straight-line sequence, and the program
    ends with its native checksum.  pt_hot runs until the test tells it to
    stop (SIGUSR1, after the trace), so a loaded machine cannot make it end
    before the trace begins; the checksum is then that of a native run of
    as many calls."""
    fill = "100000"
    p = subprocess.Popen([prog_path("pt_hot"), "-1", fill], stdout=subprocess.PIPE)
    try:
        time.sleep(0.1)
        out = tmp_path / "attach.jsonl"
        r = subprocess.run([gebpf_path(), "trace", "-p", str(p.pid), "--range", "traced",
                            "--trap", "probes", "--duration", "1", "-o", str(out)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert p.poll() is None, "pt_hot ended while traced: %s" % p.returncode
        p.send_signal(signal.SIGUSR1)
        got, _ = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    first, _, rest = got.partition(b"\n")
    assert p.returncode == 0 and first.startswith(b"calls "), (p.returncode, got)
    want = subprocess.run([prog_path("pt_hot"), first.split()[1].decode(), fill],
                          capture_output=True, timeout=120, check=True).stdout
    assert rest == want, (got, want)
    check_hot_runs(out, 10)


URG_COUNTER = r"""
import signal, sys, time
n = [0]
signal.signal(signal.SIGURG, lambda s, f: n.__setitem__(0, n[0] + 1))
print("ready", flush=True)
end = time.monotonic() + float(sys.argv[1])
loops = 0
while time.monotonic() < end:
    b = [bytes(k % 300 + 1) for k in range(200)]
    loops += 1
print("sigurg %d loops %d" % (n[0], loops), flush=True)
"""


@pytest.mark.serial   # (python3's 4 s must outlive the attach: 2-4 s at load 40)
@pytest.mark.parametrize("trap", ("probes", "patch"))
def test_no_stop_signal_after_the_detach(trap, tmp_path):
    """The uprobes go after the detach (their removal waits for the
    kernel's grace periods: the program runs meanwhile), disarmed at the
    teardown: Debian's python3, counting the SIGURGs it gets (the probe
    trap's stop signal), malloc-heavy for 1 s after a 1 s trace of
    libc:malloc, must get none.  (It checks the order of the end, not the
    disarm alone: built without the disarm, it passed too, the removal
    following the detach too closely for a hit in between.)"""
    p = subprocess.Popen(["/usr/bin/python3", "-c", URG_COUNTER, "4"], stdout=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        r = subprocess.run([gebpf_path(), "trace", "-v", "-p", str(p.pid), "--range", "libc:malloc",
                            "--trap", trap, "--duration", "1", "-o", str(tmp_path / "t.jsonl")],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert "probes detached" in r.stderr, r.stderr
        out, _ = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0 and out.startswith("sigurg 0 "), out


def tracefs_uprobes():
    for d in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
        path = os.path.join(d, "uprobe_events")
        if os.path.exists(path):
            with open(path) as f:
                return path, f.read()
    return None, ""


def bpftool(*args):
    tool = shutil.which("bpftool") or "/usr/sbin/bpftool"
    r = subprocess.run([tool, "-j"] + list(args), capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, "bpftool %s: %s" % (" ".join(args), r.stderr)
    return json.loads(r.stdout or "[]")


def perf_fds(pid):
    """How many uprobe descriptors PID holds: perf events (a uprobe attached
    through the perf uprobe PMU is one) or BPF links (uprobe_multi links,
    Linux 6.10+; gebpf's other programs here are not links)."""
    n = 0
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                n += os.readlink("/proc/%d/fd/%s" % (pid, fd)) in ("anon_inode:[perf_event]",
                                                                  "anon_inode:bpf_link")
            except OSError:
                pass
    except OSError:
        pass
    return n


def held_bpf_progs(pid):
    """IDs of the BPF programs PID holds through program or link fds."""
    ids = set()
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return ids
    for fd in fds:
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)) not in ("anon_inode:bpf-prog",
                                                                 "anon_inode:bpf_link"):
                continue
            with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
                m = re.search(r"^prog_id:\s*(\d+)", f.read(), re.M)
            if m:
                ids.add(int(m.group(1)))
        except OSError:
            pass
    return ids


def children_of(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def tracer_of(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            return int(re.search(r"^TracerPid:\s*(\d+)", f.read(), re.M).group(1))
    except (OSError, AttributeError):
        return 0


HOT_ARGS = ["5000", "100000"]   # ~0.3 s natively, 5000 entries


def one_crash_run(seed, outdir, hot):
    """Start HOT (pt_hot), attach gebpf --trap probes, SIGKILL gebpf after a
    random delay; returns ((attached, perf-event fds, BPF program ids) when
    gebpf was killed, the program's exit status, its output)."""
    rnd = Campaign.rng(seed, "probes")
    p = subprocess.Popen([hot] + HOT_ARGS, stdout=subprocess.PIPE)
    g = None
    try:
        time.sleep(rnd.uniform(0.0, 0.05))
        g = subprocess.Popen([gebpf_path(), "trace", "-p", str(p.pid), "--range", "traced",
                              "--trap", "probes", "-o", os.path.join(outdir, "%d.jsonl" % seed)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if Campaign.phase(seed, ("setup", "run")) == "run":
            # (while attached: wait for the attach, however long it takes)
            end = time.monotonic() + 30
            while not tracer_of(p.pid) and p.poll() is None and time.monotonic() < end:
                time.sleep(0.002)
            time.sleep(rnd.uniform(0.0, 0.3))
        else:
            time.sleep(rnd.uniform(0.0, 0.8))
        # gebpf traces from a worker process (user/common/guard.h): the
        # tracer is gebpf itself or its worker; the kill is gebpf's.
        tracer = tracer_of(p.pid)
        attached = tracer in (g.pid,) + tuple(children_of(g.pid))
        held = (attached, perf_fds(tracer) if attached else 0,
                held_bpf_progs(tracer) if attached else set())
        g.send_signal(signal.SIGKILL)
        g.wait(timeout=30)
        out, _ = p.communicate(timeout=120)
        return held, p.returncode, out
    finally:
        for proc in (g, p):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.campaign
def test_sigkill_leaves_target_running(campaign, tmp_path):
    """Crash safety: 50 times (a campaign: campaign.py), SIGKILL gebpf at a
    random moment of an attach-mode probe-trap trace of pt_hot (before,
    during and after it places its uprobes): pt_hot must finish with its
    native checksum every time, and no uprobe or BPF program of gebpf may
    remain.  (Its own copy of pt_hot: the uprobes looked for after the
    campaign are those on that file, whatever runs beside it.)"""
    hot = private_prog(tmp_path, "pt_hot")
    want = subprocess.run([hot] + HOT_ARGS, capture_output=True, timeout=60,
                          check=True).stdout
    c = campaign(50)
    results = c.map(lambda s: one_crash_run(s, str(tmp_path), hot), workers=4)
    runs = [r for _, r in results]
    c.check({seed: "pt_hot exit %d, output %r (native %r)" % (rc, out, want)
             for seed, (_, rc, out) in results if rc != 0 or out != want})
    traced = sum(1 for (att, _, _), _, _ in runs if att)
    probed = sum(1 for (att, fds, _), _, _ in runs if att and fds)
    assert traced >= 2 * len(runs) // 5 and probed >= len(runs) // 5, (
        "too few runs killed mid-trace to prove anything: %d attached, %d with uprobes "
        "(perf events or links) open" % (traced, probed))

    hot = os.path.realpath(hot)
    path, events = tracefs_uprobes()
    assert hot not in events, "uprobes left in %s:\n%s" % (path, events)
    left = [e for e in bpftool("perf") if hot in str(e.get("filename", ""))]
    assert not left, "perf uprobes on pt_hot still open: %s" % left
    held = set().union(*(ids for (_, _, ids), _, _ in runs))
    alive = None
    # Programs are freed asynchronously once the last fd closes, after RCU
    # (tasks trace) grace periods: 3 s was not enough once under -n 2 load.
    for _ in range(150):
        alive = held & {p["id"] for p in bpftool("prog", "show")}
        if not alive:
            break
        time.sleep(0.1)
    assert not alive, "BPF programs of SIGKILLed gebpf runs still loaded: %s" % sorted(alive)


# ------------------------------------------------------------ entries uprobes cannot run

@pytest.mark.parametrize("kind", ["vex", "evex"])
def test_no_uprobe_on_a_vex_instruction(kind, tmp_path):
    """uprobe_vex: ranges whose entry is a VEX (AVX2 vmovdqu) or EVEX
    (AVX-512 vmovdqu64) store.  Linux's uprobes take the opcode byte after
    the prefix for a one-byte opcode (0x7f: jg) and emulate that instead of
    the store (docs/bpf.md "What a uprobe runs"): under a uprobe the program
    stored nothing and printed another checksum.  The probe trap now refuses
    the entry in one line naming it and the page trap traces the range: the
    native output under every trap, and --trap none's trace."""
    args = [20] + (["evex"] if kind == "evex" else [])
    r = subprocess.run([prog_path("uprobe_vex")] + [str(a) for a in args], capture_output=True,
                       timeout=60)
    if r.returncode == 2:
        pytest.skip("no %s on this CPU" % ("AVX-512" if kind == "evex" else "AVX2"))
    want = r.stdout
    rng = "traced_" + kind
    outs = {}
    for trap in ("probes", "none", "patch"):
        outs[trap] = tmp_path / ("%s.jsonl" % trap)
        g = subprocess.run([gebpf_path(), "trace", "-v", "--trap", trap, "--range", rng, "-o",
                            str(outs[trap]), "--", prog_path("uprobe_vex")] + [str(a) for a in args],
                           capture_output=True, timeout=120)
        assert g.returncode == 0, g.stderr.decode()[-2000:]
        assert g.stdout == want, "--trap %s: the program printed %r, natively %r" % (
            trap, g.stdout, want)
        if trap == "probes":
            err = g.stderr.decode()
            assert "is VEX/EVEX-encoded" in err and "using the page trap" in err, err[-2000:]
    same_file(outs["probes"], outs["none"], "uprobe_vex --range %s" % rng, ("probes", "none"))
    lines, summary = read_trace(outs["none"])
    assert summary["insns"] == 2 * 20, summary   # (the store and the ret, 20 calls)

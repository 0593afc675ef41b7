"""Synchronous signals and children started from inside the range (issue 14,
items 1 and 2), under every entry trap (docs/trace.md "Entry traps").

1. An instruction that raises a synchronous exception delivered as a signal
   gets its exec line and the lines of the accesses it completed before the
   fault, but no line for the access that faulted; when the handler returns
   to it, it runs again and is logged again.  tests/progs/sync_sigs.c holds
   one function per exception (ud2/SIGILL, int3/SIGTRAP, a write to a
   read-only page, movsq and push whose read completes before the write
   faults, a read past the end of a file mapping/SIGBUS, div by a zero in
   memory/SIGFPE, a misaligned movaps and a user-mode hlt/#GP), each with one
   instruction before the faulting one; sf_X_at is a symbol starting AT the
   faulting instruction (with the probe trap, a probe entry that faults).
   The expected lines are written out below from the instructions'
   semantics, not taken from gebpf; data addresses come from the program's
   own "addr NAME 0x..." lines.
2. tests/progs/fork_range.c: `traced_fork` calls fork, vfork or posix_spawn
   (outside the range) and continues in the range; the `test %eax,%eax`
   right after each call must be in the parent's trace with every trap.
"""
import collections
import re
import subprocess

import pytest

import lackey
from conftest import check_vt_order, prog_path, read_trace, stable_env
from test_pagetrap import same_file, trace

pytestmark = pytest.mark.usefixtures("probes_ready")

STACK = None   # an access to the stack (ret): address checked by comparison, not written here

# case -> instructions of sf_CASE (objdump order), how many come before the
# faulting one, and one round's instructions: (index, [(type, size, address
# key)]).  A faulting execution lists only the accesses it completed.
CASES = {
    "ill": (["lea", "ud2", "add", "ret"], 1,
            [(0, []), (1, []), (2, []), (3, [("read", 8, STACK)])]),
    "trap": (["lea", "int3", "add", "ret"], 1,
             [(0, []), (1, []), (2, []), (3, [("read", 8, STACK)])]),
    "segv": (["lea", "mov", "add", "ret"], 1,
             [(0, []), (1, []), (1, [("write", 8, "ro")]), (2, []), (3, [("read", 8, STACK)])]),
    "movs": (["xor", "movsq", "ret"], 1,
             [(0, []), (1, [("read", 8, "src")]),
              (1, [("read", 8, "src"), ("write", 8, "dst")]), (2, [("read", 8, STACK)])]),
    "push": (["mov", "mov", "push", "mov", "xor", "ret"], 2,
             [(0, []), (1, []), (2, [("read", 8, "src")]),
              (2, [("read", 8, "src"), ("write", 8, "top-8")]), (3, []), (4, []),
              (5, [("read", 8, STACK)])]),
    "bus": (["xor", "mov", "ret"], 1,
            [(0, []), (1, []), (1, [("read", 8, "past")]), (2, [("read", 8, STACK)])]),
    "fpe": (["mov", "xor", "div", "ret"], 2,
            [(0, []), (1, []), (2, [("read", 8, "divisor")]), (2, [("read", 8, "divisor")]),
             (3, [("read", 8, STACK)])]),
    "gp": (["xor", "movaps", "ret"], 1,
           [(0, []), (1, []), (1, [("read", 16, "buf")]), (2, [("read", 8, STACK)])]),
    "hlt": (["lea", "hlt", "add", "ret"], 1,
            [(0, []), (1, []), (2, []), (3, [("read", 8, STACK)])]),
}
ALL = ["ill", "segv", "movs", "push", "bus", "fpe", "gp", "hlt"]   # `sync_sigs all`, in order
ROUNDS = 2
NOT_PROBEABLE = ("hlt", "trap")   # uprobes refuse these instructions (Operation not supported)
TRAPS = ("none", "pages", "probes", "patch", "default")   # "default": no --trap


def program():
    return lackey.Program(prog_path("sync_sigs"))


def pcs_of(case):
    """The pcs of sf_CASE's instructions, checked against CASES."""
    p = program()
    table = p.insns(*p.span(["sf_" + case]))
    pcs = sorted(table)
    want = CASES[case][0]
    texts = [table[pc] for pc in pcs]
    assert len(pcs) == len(want) and all(t.startswith(w) for t, w in zip(texts, want)), \
        "sf_%s is %s, want %s" % (case, texts, want)
    return pcs


def span(*syms):
    return program().span(list(syms))


def hexrange(lo, hi):
    return "%#x-%#x" % (lo, hi)


def rounds_of(stdout):
    """The program's output -> [(case, {address key: address})] in order."""
    out = []
    for line in stdout.splitlines():
        m = re.fullmatch(r"(\w+) round \d+", line)
        if m:
            out.append((m.group(1), {}))
            continue
        m = re.fullmatch(r"addr (\w+) (0x[0-9a-f]+)", line)
        if m:
            out[-1][1][m.group(1)] = int(m.group(2), 16)
            if m.group(1) == "top":
                out[-1][1]["top-8"] = int(m.group(2), 16) - 8
    return out


def expected(stdout, lo, hi):
    """The lines the range [lo, hi] must give for the run that printed
    STDOUT: (type, pc, address or None for the stack, size) per line."""
    want = []
    for case, addrs in rounds_of(stdout):
        pcs = pcs_of(case)
        for idx, accesses in CASES[case][2]:
            pc = pcs[idx]
            if not lo <= pc <= hi:
                continue
            want.append(("exec", hex(pc), None, None))
            for t, size, key in accesses:
                want.append((t, hex(pc), None if key is STACK else hex(addrs[key]), size))
    return want


def check_expected(lines, stdout, lo, hi, what):
    want = expected(stdout, lo, hi)
    got = [(ln["t"], ln["pc"], ln.get("addr"), ln.get("size")) for ln in lines]
    masked = [g if i >= len(want) or want[i][2] is not None else (g[0], g[1], None, g[3])
              for i, g in enumerate(got)]
    if masked != want:
        n = next((i for i, (a, b) in enumerate(zip(masked, want)) if a != b),
                 min(len(masked), len(want)))
        pytest.fail("%s: line %d differs (%d lines, want %d):\n  got:  %s\n  want: %s\n"
                    "  before it: %s" % (what, n + 1, len(masked), len(want),
                                         masked[n] if n < len(masked) else "<end>",
                                         want[n] if n < len(want) else "<end>",
                                         want[max(0, n - 3):n]))


def check_run(r, what):
    assert "UNEXPECTED" not in r.stdout, "%s: a signal was not what the program expected:\n%s" \
        % (what, r.stdout)
    assert r.stdout.count("result ") == r.stdout.count(" round "), \
        "%s: a round did not finish:\n%s" % (what, r.stdout)


def run(args, rng, out, trap):
    r = trace("sync_sigs", rng, out, *args, trap=trap)
    check_run(r, "sync_sigs %s --trap %s" % (" ".join(args), trap))
    lines, summary = read_trace(out)
    check_vt_order(lines)
    assert summary["dropped"] == 0
    return r, lines


def sub_trace(lines, lo, hi):
    """The lines a range [lo, hi] inside a traced range gives: those of its
    instructions, vt renumbered (--trap none steps everything: the trace of
    a sub-range is the filter of the trace of the range)."""
    out, vt = [], -1
    for ln in lines:
        if not lo <= int(ln["pc"], 16) <= hi:
            continue
        if ln["t"] == "exec":
            vt += 1
        out.append(dict(ln, vt=vt))
    return out


@pytest.mark.parametrize("args", [["all"], ["trap"]], ids=["all", "trap"])
def test_sync_sigs_natively(args):
    """Without gebpf: every signal is the one expected (signal, si_addr) and
    every round finishes, exit 0."""
    r = subprocess.run([prog_path("sync_sigs")] + args + [str(ROUNDS)], capture_output=True,
                       text=True, timeout=30, env=stable_env())
    assert r.returncode == 0, "sync_sigs %s exits %d natively:\n%s" % (args, r.returncode, r.stdout)
    check_run(r, "sync_sigs %s natively" % args[0])


# ------------------------------------------------------------ (1) every exception but int3

@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """`sync_sigs all` with --trap none, the range spanning every sf_X."""
    out = tmp_path_factory.mktemp("sync") / "none.jsonl"
    lo, hi = span(*["sf_" + c for c in CASES])
    r, lines = run(["all", str(ROUNDS)], hexrange(lo, hi), out, "none")
    return out, r.stdout, lines, (lo, hi)


@pytest.mark.parametrize("trap", TRAPS)
def test_faulting_instructions_in_the_middle(trap, reference, tmp_path):
    """The range holds all the functions: each faulting instruction is
    reached from the one before it; exact lines, and the same bytes as
    --trap none."""
    ref, ref_stdout, ref_lines, (lo, hi) = reference
    if trap == "none":
        check_expected(ref_lines, ref_stdout, lo, hi, "sync_sigs all --trap none")
        return
    out = tmp_path / ("%s.jsonl" % trap)
    r, lines = run(["all", str(ROUNDS)], hexrange(lo, hi), out, trap)
    assert r.stdout == ref_stdout, "printed differently under --trap %s" % trap
    check_expected(lines, r.stdout, lo, hi, "sync_sigs all --trap %s" % trap)
    same_file(out, ref, "sync_sigs all", (trap, "none"))


@pytest.mark.parametrize("trap", ("pages", "probes", "patch", "default"))
@pytest.mark.parametrize("case", ALL)
def test_faulting_instruction_first_in_range(case, trap, reference, tmp_path):
    """The range sf_CASE_at starts AT the faulting instruction (a probe
    entry that faults): exact lines, and the lines --trap none gives for the
    same sub-range."""
    _, ref_stdout, ref_lines, _ = reference
    lo, hi = span("sf_%s_at" % case)
    assert lo == pcs_of(case)[CASES[case][1]]
    out = tmp_path / "t.jsonl"
    r, lines = run(["all", str(ROUNDS)], hexrange(lo, hi), out, trap)
    assert r.stdout == ref_stdout
    if trap == "probes":
        # the kernel refuses a uprobe on hlt (and int3): gebpf says so and uses the page trap
        fell_back = "using the page trap" in r.stderr
        assert fell_back == (case in NOT_PROBEABLE), "sf_%s_at: %s" % (
            case, "fell back to the page trap" if fell_back else "was probed")
    check_expected(lines, r.stdout, lo, hi, "sync_sigs all --range sf_%s_at --trap %s"
                   % (case, trap))
    assert lines == sub_trace(ref_lines, lo, hi), \
        "sf_%s_at --trap %s differs from --trap none's lines for that range" % (case, trap)


def test_sub_range_of_step_all_is_its_filter(reference, tmp_path):
    """What test_faulting_instruction_first_in_range compares with: a real
    --trap none run of one sub-range gives the filter of the whole one."""
    _, ref_stdout, ref_lines, _ = reference
    lo, hi = span("sf_fpe_at")
    r, lines = run(["all", str(ROUNDS)], hexrange(lo, hi), tmp_path / "t.jsonl", "none")
    assert r.stdout == ref_stdout
    assert lines == sub_trace(ref_lines, lo, hi)


# ------------------------------------------------------------ (1) a fault at the end of a long stretch

SPIN_ROUNDS, SPIN_N = 30, 20000


@pytest.mark.parametrize("trap", ("pages", "probes", "patch", "default"))
def test_fault_after_a_long_stretch(trap, tmp_path):
    """tests/progs/spin_fault.c: 60,000 in-range instructions, then a write
    to a read-only page, 30 times.  The patch trap drains the cache's ring
    while the stretch runs, so it is often reading records when the mov's
    record arrives (written before the mov runs): the faulting execution
    must still give no write line (here 5 to 17 of 30 rounds got one before
    the drain held the ring's last record back).  --exec off: each round is
    the re-run's write and the ret's read, in order."""
    p = lackey.Program(prog_path("spin_fault"))
    lo, hi = p.span(["sp_run"])
    write_pc = next(pc for pc, text in p.insns(lo, hi).items() if text.startswith("mov") and "(%rsi)" in text)
    out = tmp_path / "t.jsonl"
    r = trace("spin_fault", "sp_run", out, SPIN_ROUNDS, SPIN_N, trap=trap, extra=("--exec", "off"))
    check_run(r, "spin_fault --trap %s" % trap)
    assert "faults %d" % SPIN_ROUNDS in r.stdout, r.stdout
    ro = int(re.search(r"addr ro (0x[0-9a-f]+)", r.stdout).group(1), 16)
    lines, summary = read_trace(out)
    assert summary["dropped"] == 0
    vts = [ln["vt"] for ln in lines]
    assert vts == sorted(vts), "vt goes back"   # (check_vt_order needs exec lines)
    got = [(ln["t"], int(ln["pc"], 16), ln["size"]) + ((int(ln["addr"], 16),) if ln["t"] == "write" else ())
           for ln in lines]
    want = [("write", write_pc, 8, ro), ("read", write_pc + 3, 8)] * SPIN_ROUNDS
    n = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    assert got == want, "spin_fault --trap %s: line %d of %d (want %d): got %s, want %s" % (
        trap, n + 1, len(got), len(want), got[n] if n < len(got) else "<end>",
        want[n] if n < len(want) else "<end>")


# ------------------------------------------------------------ (1) int3

INT3_NONE = pytest.mark.xfail(strict=True, reason=(
    "known limitation (docs/trace.md): under --trap none the SIGTRAP handler is single-stepped "
    "while SIGTRAP is blocked in it; the kernel's step trap (force_sig_fault) then resets the "
    "program's SIGTRAP action to SIG_DFL, and the second int3 kills the program (gebpf: "
    "'killed by SIGTRAP during the trace').  The probe and page traps run the handler natively"))


@pytest.mark.parametrize("trap", [pytest.param("none", marks=INT3_NONE), "pages", "probes", "patch",
                                  "default"])
@pytest.mark.parametrize("sym", ["sf_trap", "sf_trap_at"])
def test_int3(sym, trap, tmp_path):
    """int3 raises SIGTRAP after it ran (RIP past it): one exec line per
    execution, the handler returns after it; two rounds.  (--trap probes on
    sf_trap_at falls back to the page trap: int3 cannot be probed.)"""
    lo, hi = span(sym)
    out = tmp_path / "t.jsonl"
    r, lines = run(["trap", str(ROUNDS)], hexrange(lo, hi), out, trap)
    assert r.stdout.count("trap: signal 5") == ROUNDS, r.stdout
    check_expected(lines, r.stdout, lo, hi, "sync_sigs trap --range %s --trap %s" % (sym, trap))


@pytest.mark.parametrize("sym", ["sf_trap", "sf_trap_at"])
def test_int3_same_bytes_with_both_traps(sym, tmp_path):
    lo, hi = span(sym)
    a, b = tmp_path / "probes.jsonl", tmp_path / "pages.jsonl"
    run(["trap", str(ROUNDS)], hexrange(lo, hi), a, "probes")
    run(["trap", str(ROUNDS)], hexrange(lo, hi), b, "pages")
    same_file(a, b, "sync_sigs trap --range %s" % sym, ("probes", "pages"))


# ------------------------------------------------------------ (1) lackey as an oracle

LACKEY_CANNOT = {
    "segv": "valgrind restarts the interrupted superblock: lackey logs neither the lea before "
            "the faulting mov nor its faulting execution, only the re-run",
    "movs": "lackey logs the movsq once (with its write) and loses the xor before it",
    "push": "under valgrind the re-run push is logged writing 8 bytes below top-8, and the "
            "program's own check of the pushed value fails (exit 1)",
    "bus": "lackey loses the faulting execution of the mov (logs only the re-run)",
    "fpe": "valgrind's SIGFPE for the div is not the hardware's (the program's own check of "
           "the signal and si_addr fails, exit 1)",
    "hlt": "valgrind does not run a user-mode hlt as the hardware does (exit 1, no "
           "instruction of sf_hlt logged)",
}


@pytest.mark.parametrize("case", ["ill", "trap", "gp"] + sorted(LACKEY_CANNOT))
def test_matches_lackey(case, valgrind, tmp_path):
    """Lackey (normalised as test_exact.py does) where valgrind delivers the
    fault as the hardware does."""
    if case in LACKEY_CANNOT:
        pytest.skip("lackey is no oracle for %s: %s" % (case, LACKEY_CANNOT[case]))
    path = prog_path("sync_sigs")
    res = lackey.oracle(path, (case, str(ROUNDS)), "sf_" + case)
    assert res["returncode"] == 0, "sync_sigs %s exits %d under valgrind" % (case, res["returncode"])
    assert b"UNEXPECTED" not in res["stdout"]
    out = tmp_path / "t.jsonl"
    _, lines = run([case, str(ROUNDS)], hexrange(res["start"], res["end"]), out, "pages")
    diff = lackey.first_difference(
        lackey.normalise(lackey.group(lines), res["program"]),
        lackey.normalise(lackey.group(res["lines"]), res["program"]))
    assert diff is None, "sync_sigs %s: %s" % (case, diff)


# ------------------------------------------------------------ (2) fork, vfork, posix_spawn

KINDS = {"0": ("fork", 3, "fork child"), "1": ("vfork", 5, None), "2": ("spawn", 7, "spawned child")}
FORK_ARGS = "000000001111111122222222"


def fork_calls():
    """traced_fork's calls in order (fork, vfork, spawn_child, fork_child,
    vfork_child): [(pc of the call, pc of the next instruction)]."""
    p = lackey.Program(prog_path("fork_range"))
    table = p.insns(*p.span(["traced_fork"]))
    pcs = sorted(table)
    calls = [(pc, pcs[i + 1]) for i, pc in enumerate(pcs) if table[pc].startswith("call")]
    assert len(calls) == 5, table
    for _, nxt in calls[:3]:
        assert table[nxt].startswith("test"), table[nxt]
    return calls


def check_fork_output(stdout, what):
    want = []
    for k in FORK_ARGS:
        name, status, child_says = KINDS[k]
        if child_says:
            want.append(child_says)
        want.append("%s: child exit %d" % (name, status))
    assert stdout.splitlines() == want, "%s printed:\n%s" % (what, stdout)


MODES = {
    "sigchld-blocked": ["block"],   # nothing asynchronous reaches the parent
    "sigchld": [],                  # each child's exit sends SIGCHLD, maybe while the parent is in range
}


def check_fork_counts(out, what):
    """After each call the parent's next instruction (test %eax,%eax) is in
    the trace once per call; the children's in-range calls to fork_child and
    vfork_child are not (children are not traced)."""
    lines, summary = read_trace(out)
    check_vt_order(lines)
    assert summary["dropped"] == 0
    execs = collections.Counter(ln["pc"] for ln in lines if ln["t"] == "exec")
    calls = fork_calls()
    n = collections.Counter(FORK_ARGS)
    for (call, nxt), k in zip(calls, "012"):
        assert execs[hex(call)] == execs[hex(nxt)] == n[k], \
            "%s: %s's call at %#x ran %d times, the test after it %d, want %d" % (
                what, KINDS[k][0], call, execs[hex(call)], execs[hex(nxt)], n[k])
    for call, _ in calls[3:]:
        assert execs[hex(call)] == 0, "%s: a child's in-range call at %#x is in the trace" % (
            what, call)


_FORK_REF = {}


@pytest.fixture
def fork_reference(tmp_path_factory):
    def get(mode):
        if mode not in _FORK_REF:
            out = tmp_path_factory.mktemp("fork") / "none.jsonl"
            r = trace("fork_range", "traced_fork", out, FORK_ARGS, *MODES[mode], trap="none")
            check_fork_output(r.stdout, "fork_range %s --trap none" % mode)
            _FORK_REF[mode] = out
        return _FORK_REF[mode]
    return get


@pytest.mark.parametrize("mode", MODES)
def test_fork_range_natively(mode):
    r = subprocess.run([prog_path("fork_range"), FORK_ARGS] + MODES[mode], capture_output=True,
                       text=True, timeout=30, env=stable_env())
    assert r.returncode == 0, "fork_range %s exits %d natively" % (mode, r.returncode)
    check_fork_output(r.stdout, "fork_range %s natively" % mode)


@pytest.mark.parametrize("mode", MODES)
def test_fork_range_step_all_lines(mode, fork_reference):
    """--trap none, the reference: every call and the test after it."""
    check_fork_counts(fork_reference(mode), "fork_range %s --trap none" % mode)


@pytest.mark.parametrize("trap", ("pages", "probes", "patch", "default"))
@pytest.mark.parametrize("mode", MODES)
def test_fork_range_same_bytes(mode, trap, fork_reference, tmp_path):
    """fork, vfork, posix_spawn (8 of each) from inside the range: the
    parent's trace is --trap none's, byte for byte; each child exits with its
    own status and prints what it should."""
    out = tmp_path / ("%s.jsonl" % trap)
    what = "fork_range %s --trap %s" % (mode, trap)
    r = trace("fork_range", "traced_fork", out, FORK_ARGS, *MODES[mode], trap=trap)
    check_fork_output(r.stdout, what)
    check_fork_counts(out, what)
    same_file(out, fork_reference(mode), what, (trap, "none"))


# ------------------------------------------------------------ asynchronous SIGCHLD in the range

ASYNC_N = 10000
# A SIGCHLD sent by another process (default action: ignore) that reaches
# the owner while it is single-stepped: injected with the step, it is
# dropped and the instruction runs (ptrace/step.h gb_step_ran); this lost
# one exec line per signal under every trap before.
@pytest.mark.parametrize("kids", [4, 0],
                         ids=["4-sigchld", "no-signal"])
@pytest.mark.parametrize("trap", TRAPS)
def test_async_sigchld_loses_nothing(trap, kids, tmp_path):
    """async_sigchld: KIDS children exit while the parent loops in `spin`
    (1 + 1 + 3N + 1 instructions, a straight loop): every one of them is in
    the trace, in order."""
    out = tmp_path / "t.jsonl"
    r = trace("async_sigchld", "spin", out, kids, ASYNC_N, trap=trap)
    assert r.stdout == "spin %d children %d\n" % (ASYNC_N, kids), r.stdout
    lines, summary = read_trace(out)
    check_vt_order(lines)
    p = lackey.Program(prog_path("async_sigchld"))
    pcs = [hex(pc) for pc in sorted(p.insns(*p.span(["spin"])))]
    assert len(pcs) == 6, pcs
    want = pcs[:2] + pcs[2:5] * ASYNC_N + pcs[5:]
    got = [ln["pc"] for ln in lines if ln["t"] == "exec"]
    n = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    assert got == want, "--trap %s, %d children: %d exec lines, want %d; first difference at " \
        "vt %d: %s, want %s" % (trap, kids, len(got), len(want), n,
                                got[n] if n < len(got) else "<end>",
                                want[n] if n < len(want) else "<end>")

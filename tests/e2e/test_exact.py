"""Exactness: `gebpf trace` against the lackey oracle, program by program.

For every program in conftest.PROGS, `gebpf trace --range R -o out.jsonl --
PROG` must give, line for line, the trace that lackey's output converts to
(tests/e2e/lackey.py; the normalisations are listed there and in
docs/testing.md).  The two-thread program is compared per invocation of the
traced function, as a multiset (lackey prints no thread ids).
"""
import collections

import pytest

import lackey
from conftest import (PROGS, check_vt_order, prog_path, range_arg, read_trace,
                      run_gebpf)

SINGLE = sorted(n for n, s in PROGS.items() if not s.get("threads"))
THREADED = sorted(n for n, s in PROGS.items() if s.get("threads"))


def trace(name, out, *extra):
    r = run_gebpf(["trace", "--range", range_arg(name), "-o", str(out)] + list(extra)
                  + ["--", prog_path(name)])
    assert r.returncode == 0, "gebpf trace %s: exit %d: %s" % (name, r.returncode, r.stderr)
    return r


def handlers_of(name, res):
    return [res["program"].span([h]) for h in PROGS[name].get("handlers", [])]


def compare_single(name, lines, res):
    """gebpf lines vs the oracle, line for line after normalisation."""
    mine, problems = lackey.fold_rep_lods(lackey.group(lines), res["rep_lods"], check=True)
    assert not problems, "\n".join(problems)
    theirs, _ = lackey.fold_rep_lods(lackey.group(res["lines"]), res["rep_lods"], check=False)
    hs = handlers_of(name, res)
    diff = lackey.first_difference(lackey.normalise(mine, res["program"], hs),
                                   lackey.normalise(theirs, res["program"], hs))
    assert diff is None, "%s: gebpf differs from lackey: %s" % (name, diff)


def invocations(groups, entry):
    """Per vcpu, split the instruction groups at each entry to the function."""
    per = collections.defaultdict(list)
    for g in groups:
        head = g[0] or g[1][0]
        if int(head["pc"], 16) == entry or not per[head["vcpu"]]:
            per[head["vcpu"]].append([])
        per[head["vcpu"]][-1].append(g)
    return per


def invocation_multiset(groups, res):
    entry = res["start"]
    per = invocations(groups, entry)
    bag = collections.Counter()
    for runs in per.values():
        for run in runs:
            bag[tuple(lackey.normalise(run, res["program"], vcpu=False, vt=False))] += 1
    return per, bag


@pytest.mark.parametrize("name", SINGLE)
def test_matches_lackey(name, trace_ready, oracle, tmp_path):
    res = oracle(name)
    want = PROGS[name].get("exit", 0)
    assert res["returncode"] == want, "%s exits %d under valgrind" % (name, res["returncode"])
    assert res["summary"]["insns"] > 0, "lackey saw no instruction in range of %s" % name
    out = tmp_path / "out.jsonl"
    r = trace(name, out)
    assert r.stdout.encode() == res["stdout"], "%s printed differently under gebpf" % name
    lines, summary = read_trace(out)
    assert summary["dropped"] == 0
    assert (summary["start"], summary["end"]) == (res["summary"]["start"], res["summary"]["end"])
    assert all(ln["vcpu"] == 0 for ln in lines), "single-thread program with vcpu != 0"
    check_vt_order(lines)
    compare_single(name, lines, res)


@pytest.mark.parametrize("name", THREADED)
def test_threads_match_lackey(name, trace_ready, oracle, tmp_path):
    res = oracle(name)
    assert res["returncode"] == 0
    out = tmp_path / "out.jsonl"
    r = trace(name, out)
    assert r.stdout.encode() == res["stdout"], "%s printed differently under gebpf" % name
    lines, summary = read_trace(out)
    check_vt_order(lines)
    assert summary["insns"] == res["summary"]["insns"], (summary, res["summary"])
    assert summary["mem"] == res["summary"]["mem"], (summary, res["summary"])
    per, mine = invocation_multiset(lackey.group(lines), res)
    assert len(per) == 2, "want the traced function on 2 vcpus, got %s" % sorted(per)
    assert [len(v) for v in per.values()] == [3, 3], "invocations per vcpu"
    _, theirs = invocation_multiset(lackey.group(res["lines"]), res)
    assert sum(theirs.values()) == 6, "lackey: %d invocations, want 6" % sum(theirs.values())
    extra, missing = mine - theirs, theirs - mine
    assert not extra and not missing, (
        "invocations only in gebpf:\n%s\nonly in lackey:\n%s"
        % ("\n".join(map(str, extra)), "\n".join(map(str, missing))))


@pytest.mark.parametrize("name", SINGLE)
def test_launch_is_deterministic(name, trace_ready, tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    trace(name, a)
    trace(name, b)
    assert a.read_bytes() == b.read_bytes(), "%s: two launch runs differ" % name


def test_exec_off_matches_lackey(trace_ready, oracle, tmp_path):
    """--exec off: the same memory lines (vt still counts in-range
    instructions), no exec lines; as in the seed, insns counts exec lines
    generated, so it is 0."""
    res = oracle("atomics", exec_on=False)
    out = tmp_path / "out.jsonl"
    trace("atomics", out, "--exec", "off")
    lines, summary = read_trace(out)
    assert summary["exec"] is False
    assert not [ln for ln in lines if ln["t"] == "exec"]
    assert summary["insns"] == 0, "insns counts exec lines generated (none)"
    assert summary["mem"] == res["summary"]["mem"]
    diff = lackey.first_difference(
        lackey.normalise(lackey.group(lines), res["program"]),
        lackey.normalise(lackey.group(res["lines"]), res["program"]))
    assert diff is None, diff


def test_lackey_converter_sees_the_quirks(oracle):
    """The oracle itself: the normalisations did happen where the programs
    provoke them (a converter that silently stopped normalising would make
    every comparison fail in the same confusing way)."""
    rep = oracle("rep_string")
    by_pc = collections.Counter(ln["pc"] for ln in rep["lines"] if ln["t"] == "exec")
    prog = rep["program"]
    table = prog.insns(rep["start"], rep["end"])
    movsb = sorted(pc for pc, txt in table.items() if txt.startswith("rep movsb"))
    # counts 0, 1, 5 for DF=0 then DF=1: one exec per iteration, one for 0
    assert [by_pc[hex(pc)] for pc in movsb] == [1, 1, 5, 1, 1, 5], movsb
    atom = oracle("atomics")
    lock_add = min(pc for pc, txt in atom["program"].insns(atom["start"], atom["end"]).items()
                   if txt.startswith("lock add"))
    acc = [(ln["t"], ln["size"]) for ln in atom["lines"]
           if ln["t"] != "exec" and ln["pc"] == hex(lock_add)]
    assert acc == [("read", 8), ("write", 8)], acc
    bits = oracle("bittest")
    sizes = collections.Counter(ln["size"] for ln in bits["lines"] if ln["t"] != "exec")
    assert 1 not in sizes, "bit-test still reported as 1 byte: %s" % sizes
    simd = oracle("simd")
    reads = [ln for ln in simd["lines"] if ln["t"] == "read" and ln["size"] == 4]
    assert reads and all(simd["program"].in_image(int(ln["addr"], 16)) for ln in reads), \
        "a masked-off gather lane survived"


@pytest.mark.parametrize("name", ["signal", "tls", "recursion", "simd"])
def test_oracle_stable_under_stack_shift(name, valgrind, prog, monkeypatch):
    """The oracle against itself: a 5000-byte environment variable moves
    valgrind's stack (and signal frames); the normalised traces must not
    move, while the raw stack addresses do (so the test is not vacuous)."""
    path = prog(name)
    rng = range_arg(name).split(":")[-1]
    a = lackey.oracle(path, (), rng)
    monkeypatch.setenv("GEBPF_TEST_PADDING", "x" * 5000)
    b = lackey.oracle(path, (), rng)
    assert a["lines"] != b["lines"], "the padding did not move the stack"
    hs = handlers_of(name, a)
    norm = [lackey.normalise(lackey.group(r["lines"]), r["program"], hs) for r in (a, b)]
    diff = lackey.first_difference(*norm)
    assert diff is None, diff

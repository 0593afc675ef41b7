"""The patch trap's counting mode (docs/trace.md "Counting after the budget";
user/jit/twin.c, user/trap/patch/count.c): once --max-events lines are
written the rest of the trace is counted by the cache's counting twins, and
the summary (and a recording's meta.json) holds the counts of the same run
traced with --max-events 0.  pt_threads is deterministic in its counts: four
threads calling `traced` a fixed number of times, whatever their order."""
import json
import re

import pytest

from conftest import prog_path, run_gebpf, trace_summary

COUNTING = re.compile(r"trace: the patch trap: the budget is full at vt (\d+): counting from then "
                      r"on, no records")
REACHED = re.compile(r"--max-events \d+ reached at vt (\d+)")
COUNTED = re.compile(r"trace: the patch trap: (\d+) instructions counted by the counting twins")
CALLS, THREADS = 50000, 4  # (2M instructions: the switch comes on well before the end)


def traced(tmp_path, name, *extra, out=None):
    dest = out or tmp_path / (name + ".jsonl.zst")  # (zstd: 2.6M lines without a budget)
    r = run_gebpf(["trace", "-v", "--trap", "patch", "--range", "traced", *extra,
                   "--out" if out else "-o", dest, "--", prog_path("pt_threads"), CALLS, THREADS],
                  timeout=300)
    assert r.returncode == 0, r.stderr
    return r


def summary_of(path):
    return trace_summary(path)


@pytest.mark.parametrize("exec_on", ["on", "off"])
def test_counts_after_the_budget_are_those_of_no_budget(tmp_path, exec_on):
    """--max-events 5000: the same insns, mem and events as --max-events 0,
    every line past the 5000th dropped; -v says the counting mode came on
    and how much the twins counted."""
    r0 = traced(tmp_path, "all", "--max-events", "0", "--exec", exec_on)
    assert not COUNTING.search(r0.stderr), "counting without a budget"
    s0 = summary_of(tmp_path / "all.jsonl.zst")
    r1 = traced(tmp_path, "budget", "--max-events", "5000", "--exec", exec_on)
    s1 = summary_of(tmp_path / "budget.jsonl.zst")
    on = COUNTING.search(r1.stderr)
    assert on, r1.stderr
    # (the switch within a drain's batch of the budget's end, at any load:
    # it once waited for an idle, that a busy ring kept off to the end)
    full = REACHED.search(r1.stderr)
    assert full and int(on.group(1)) - int(full.group(1)) <= 4096, r1.stderr
    m = COUNTED.search(r1.stderr)
    assert m and int(m.group(1)) > 0, r1.stderr
    for k in ("insns", "mem", "events"):
        assert s1[k] == s0[k], (k, s0, s1)
    assert s0["dropped"] == 0
    assert s1["dropped"] == s1["events"] - 5000, s1
    assert s0["mem"] == 3 * CALLS * THREADS  # (traced: a read, a write, the ret's read)
    if exec_on == "on":
        assert s0["insns"] == 10 * CALLS * THREADS


def test_a_recordings_meta_counts_after_the_budget(tmp_path):
    """A recording directory's meta.json: read and write as without a budget."""
    d0, d1 = tmp_path / "rec0", tmp_path / "rec1"
    traced(tmp_path, "rec0", "--max-events", "0", out=d0)
    r = traced(tmp_path, "rec1", "--max-events", "3000", out=d1)
    assert COUNTING.search(r.stderr), r.stderr
    m0 = json.loads((d0 / "meta.json").read_text())["trace"]
    m1 = json.loads((d1 / "meta.json").read_text())["trace"]
    for k in ("insns", "read", "write", "events"):
        assert m1[k] == m0[k], (k, m0, m1)
    assert m1["dropped"] == m1["events"] - 3000


def test_no_counting_mode_with_max_insns(tmp_path):
    """--max-insns ends at an exact instruction: the twins stay off."""
    r = traced(tmp_path, "mi", "--max-events", "100", "--max-insns", "30000")
    assert not COUNTING.search(r.stderr), r.stderr
    assert summary_of(tmp_path / "mi.jsonl.zst")["insns"] == 30000


@pytest.mark.parametrize("case", ["segv", "fpe", "push", "ill", "rep"])
def test_faults_in_twins_count_as_recorded(tmp_path, case):
    """sync_sigs: an instruction of the range faults every round, its
    handler repairs it and it runs again.  Past the budget the twins run
    it: the faulting instruction counts with the accesses it completed
    (fpe and push: the read before the fault), the rest of its block is
    taken back (segv, fpe, push; ill: ud2 is left to the recording block),
    so the counts are those of --max-events 0.  rep: a rep movsb faults at
    its 17th byte: the 16 iterations before it count, the faulting one with
    its read, and the REP goes on from there after the handler."""
    got = {}
    for me in ("0", "10"):
        out = tmp_path / ("s%s.jsonl" % me)
        r = run_gebpf(["trace", "-v", "--trap", "patch", "--max-events", me, "--range", "sf_" + case,
                       "-o", out, "--", prog_path("sync_sigs"), case, 2000], timeout=300)
        assert r.returncode == 0, r.stderr
        got[me] = (summary_of(out), r.stderr)
    assert COUNTING.search(got["10"][1]), got["10"][1][-2000:]
    for k in ("insns", "mem", "events"):
        assert got["10"][0][k] == got["0"][0][k], (k, got["0"][0], got["10"][0])


def test_rep_strings_counted_by_the_twins(tmp_path):
    """rep_calls: REP string instructions of every kind (counts 0 and more,
    repe/repne ending early, DF=1) in a function called 20000 times.  Past
    the budget the twins run each REP natively, all its iterations at once,
    and count them (user/jit/twin_rep.c): the counts of --max-events 0, and
    the twins counted nearly all of them (a REP left to its recording block
    recorded each iteration under the lock: about half the instructions)."""
    got = {}
    for me in ("0", "300"):
        out = tmp_path / ("r%s.jsonl.zst" % me)
        r = run_gebpf(["trace", "-v", "--trap", "patch", "--max-events", me, "--range", "traced",
                       "-o", out, "--", prog_path("rep_calls")], timeout=300)
        assert r.returncode == 0, r.stderr
        got[me] = (summary_of(out), r.stderr)
    (s0, _), (s1, err) = got["0"], got["300"]
    assert COUNTING.search(err), err[-2000:]
    for k in ("insns", "mem", "events"):
        assert s1[k] == s0[k], (k, s0, s1)
    m = COUNTED.search(err)
    assert m and int(m.group(1)) > 0.95 * s0["insns"], (m and m.group(0), s0)

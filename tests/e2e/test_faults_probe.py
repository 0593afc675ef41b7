"""Page faults captured by BPF (the probe side of faults), through
`gebpf sample --faults`: tests/progs/faults_pages touches N fresh pages in
touch_pages(), once each, between two CLOCK_MONOTONIC stamps and two
getrusage() calls."""
import json

import pytest

from sample_util import func_range, need_bpf, parse_jsonl, sample

N = 300


@pytest.fixture(scope="module")
def run(gebpf, tmp_path_factory):
    need_bpf()
    import conftest
    path = conftest.prog_path("faults_pages")
    out = tmp_path_factory.mktemp("faults") / "f.jsonl"
    r = sample(["--faults", "-F", "99", "-o", str(out), "--", path, str(N)])
    assert r.returncode == 0, r.stderr
    prog = json.loads(r.stdout.strip().splitlines()[-1])
    samples, faults, summary = parse_jsonl(out.read_text(), faults=True)
    return path, prog, faults, summary


def test_n_pages_give_n_faults_at_the_touching_instructions(run):
    path, prog, faults, summary = run
    base = int(prog["base"], 16)
    lo, hi = func_range(path, "touch_pages")
    span = [f for f in faults if prog["t0"] <= f["ns"] <= prog["t1"]]
    want = {base + i * 4096 + (i % 8) * 8 for i in range(N)}
    got = [int(f["addr"], 16) for f in span]
    assert len(got) == N, "%d faults in the span, want %d" % (len(got), N)
    assert set(got) == want, "addresses differ: %s" % sorted(set(got) ^ want)[:5]
    for f in span:
        assert lo <= int(f["pc"], 16) <= hi, "fault %r not from touch_pages" % f
        assert int(f["err"], 16) & 6 == 6, "not a user-mode write: %r" % f
        assert f["tid"] == prog["pid"]
    # and nowhere else: touch_pages faults only inside the span
    assert all(prog["t0"] <= f["ns"] <= prog["t1"] for f in faults
               if lo <= int(f["pc"], 16) <= hi)


def test_fault_count_equals_rusage(run):
    path, prog, faults, summary = run
    span = [f for f in faults if prog["t0"] <= f["ns"] <= prog["t1"]]
    assert len(span) == prog["minflt"] + prog["majflt"], (len(span), prog)
    assert summary["faults_lost"] == 0


def test_faults_of_other_processes_absent(run):
    path, prog, faults, summary = run
    assert faults and all(f["tid"] == prog["pid"] for f in faults)

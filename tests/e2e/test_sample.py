"""`gebpf sample`: range filtering in the kernel, the hot/cold split,
other processes, threads, attach mode, exits and unloading, output modes."""
import json
import os
import signal
import subprocess
import time

import pytest

import conftest
from sample_util import (bpf_link_ids, bpf_prog_ids, func_range, need_bpf, parse_jsonl,
                         sample)


@pytest.fixture(scope="module")
def hotcold(gebpf):
    need_bpf()
    path = conftest.prog_path("sample_hotcold")
    return path, func_range(path, "hot"), func_range(path, "cold")


def in_range(s, r):
    return r[0] <= int(s["pc"], 16) <= r[1]


def test_range_hot_keeps_only_hot(hotcold, tmp_path):
    path, hot, cold = hotcold
    out = tmp_path / "s.jsonl"
    r = sample(["--range", "hot", "-F", "999", "-o", str(out), "--", path, "2"])
    assert r.returncode == 0, r.stderr
    samples, _, summary = parse_jsonl(out.read_text())
    assert len(samples) >= 200, summary
    assert all(in_range(s, hot) for s in samples), "a kept sample outside hot()"
    assert (summary["start"], summary["end"]) == ("%#x" % hot[0], "%#x" % hot[1])
    assert summary["filtered_range"] > 0, "cold() samples should be dropped in the kernel"


def test_no_range_splits_90_10(hotcold, tmp_path):
    path, hot, cold = hotcold
    out = tmp_path / "s.jsonl"
    r = sample(["-F", "999", "-o", str(out), "--", path, "3"])
    assert r.returncode == 0, r.stderr
    samples, _, summary = parse_jsonl(out.read_text())
    nh = sum(in_range(s, hot) for s in samples)
    nc = sum(in_range(s, cold) for s in samples)
    assert nh + nc >= 300, summary
    assert nh + nc >= 0.95 * len(samples), "most time is in hot/cold"
    pct = 100.0 * nh / (nh + nc)
    assert abs(pct - 90) <= 10, "hot %.1f%% of hot+cold samples" % pct
    assert summary["start"] is None and summary["end"] is None


def test_address_range_and_other_process_absent(hotcold, tmp_path):
    path, hot, cold = hotcold
    busy = subprocess.Popen([path, "4"], stdout=subprocess.PIPE)   # a busy neighbour
    try:
        out = tmp_path / "s.jsonl"
        r = sample(["--range", "%x-%x" % hot, "-o", str(out), "--", path, "2"])
        assert r.returncode == 0, r.stderr
        me = json.loads(r.stdout.strip().splitlines()[-1])
        samples, _, summary = parse_jsonl(out.read_text())
        assert samples and all(s["tid"] == me["pid"] for s in samples)
        assert all(in_range(s, hot) for s in samples)
        assert summary["filtered_pid"] > 0, "the neighbour's samples were not even seen"
    finally:
        busy.kill()
        busy.wait()


def test_follows_threads(hotcold, tmp_path):
    path, hot, cold = hotcold
    out = tmp_path / "s.jsonl"
    r = sample(["-o", str(out), "--", path, "2", "3"])
    assert r.returncode == 0, r.stderr
    me = json.loads(r.stdout.strip().splitlines()[-1])
    samples, _, _ = parse_jsonl(out.read_text())
    tids = {s["tid"] for s in samples}
    assert tids <= set(me["tids"]), (tids, me)
    assert len(tids) == 3, "samples from threads %s, want all of %s" % (tids, me["tids"])


def test_attach_mode_and_target_exit(hotcold, tmp_path):
    path, hot, cold = hotcold
    target = subprocess.Popen([path, "2"], stdout=subprocess.PIPE)
    try:
        time.sleep(0.2)
        out = tmp_path / "s.jsonl"
        t0 = time.monotonic()
        r = sample(["-p", str(target.pid), "--range", "hot", "-o", str(out)])
        took = time.monotonic() - t0
        assert r.returncode == 0, r.stderr
        assert took < 4, "did not stop when the target exited (%.1fs)" % took
        samples, _, summary = parse_jsonl(out.read_text())
        assert len(samples) >= 100 and all(in_range(s, hot) for s in samples)
        assert all(s["tid"] == target.pid for s in samples)
    finally:
        target.kill()
        target.wait()


def test_attach_duration_leaves_target_running(hotcold, tmp_path):
    path, hot, cold = hotcold
    target = subprocess.Popen([path, "3"], stdout=subprocess.PIPE)
    try:
        out = tmp_path / "s.jsonl"
        r = sample(["-p", str(target.pid), "--duration", "0.5", "-o", str(out)])
        assert r.returncode == 0, r.stderr
        assert target.poll() is None, "target stopped or died"
        parse_jsonl(out.read_text())
        assert target.wait(timeout=10) == 0
    finally:
        if target.poll() is None:
            target.kill()
            target.wait()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_stops_cleanly_and_unloads(hotcold, tmp_path, sig):
    path, hot, cold = hotcold
    before_p, before_l = bpf_prog_ids(), bpf_link_ids()
    out = tmp_path / "s.jsonl"
    p = subprocess.Popen([conftest.gebpf_path(), "sample", "-o", str(out), "--", path, "30"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    during = bpf_prog_ids() - before_p
    assert during, "no BPF program loaded while sampling"
    p.send_signal(sig)
    _, err = p.communicate(timeout=10)
    assert p.returncode == 0, err
    samples, _, summary = parse_jsonl(out.read_text())
    assert samples
    assert not (bpf_prog_ids(settle=True) & during), "programs left loaded"
    assert bpf_link_ids() - before_l == set(), "links left behind"


def test_unloaded_after_every_exit_path(hotcold, tmp_path):
    path, hot, cold = hotcold
    before = bpf_prog_ids()
    runs = [
        (["--", path, "0.3"], 0),                             # target exit
        (["--duration", "0.3", "--", path, "5"], 0),          # --duration
        (["--faults", "--", path, "0.2"], 0),                 # with the fault program
        (["--range", "nosuchsym", "--", path, "1"], 1),       # error after load
        (["--", "/nonexistent/cmd"], 1),                      # exec failure after load
        (["--event", "cycles", "--", path, "0.2"], None),     # PMU or not
    ]
    for args, want in runs:
        r = sample(["-o", str(tmp_path / "x.jsonl")] + args)
        if want is not None:
            assert r.returncode == want, (args, r.stderr)
        assert r.returncode == 0 or r.stderr.startswith("gebpf: "), r.stderr
        assert bpf_prog_ids(settle=True) - before == set(), "programs left after %s" % args


def test_two_samplers_at_once(hotcold, tmp_path):
    path, hot, cold = hotcold
    cmd = [conftest.gebpf_path(), "sample"]
    a = subprocess.Popen(cmd + ["-o", str(tmp_path / "a"), "--range", "hot", "--", path, "2"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    b = subprocess.Popen(cmd + ["-o", str(tmp_path / "b"), "--range", "cold", "--", path, "2"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for p in (a, b):
        assert p.wait(timeout=30) == 0, p.stderr.read()
    sa, _, _ = parse_jsonl((tmp_path / "a").read_text())
    sb, _, _ = parse_jsonl((tmp_path / "b").read_text())
    assert sa and all(in_range(s, hot) for s in sa)
    assert sb and all(in_range(s, cold) for s in sb)
    assert {s["tid"] for s in sa}.isdisjoint({s["tid"] for s in sb})


def test_report(hotcold, tmp_path):
    path, hot, cold = hotcold
    r = sample(["--report", "--", path, "2"])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    funcs = lines[lines.index("# top functions") + 2:]
    top = funcs[0].split()
    assert top[2] == "hot", r.stdout
    assert 80 <= float(top[1]) <= 100, r.stdout


def test_folded(hotcold, tmp_path):
    path, hot, cold = hotcold
    out = tmp_path / "f.txt"
    r = sample(["--folded", "-o", str(out), "--", path, "2", "2"])
    assert r.returncode == 0, r.stderr
    rows = [ln.rsplit(" ", 1) for ln in out.read_text().splitlines()]
    assert rows and all(c.isdigit() for _, c in rows)
    total = sum(int(c) for _, c in rows)
    hot_stacks = sum(int(c) for s, c in rows if s.split(";")[-1] == "hot")
    assert hot_stacks >= 0.7 * total, rows[:5]
    # the thread's stacks are rooted in start_thread, main's in main
    assert any("main;hot" in s for s, _ in rows), rows[:5]
    assert any(s.startswith("start_thread;") for s, _ in rows), rows[:5]


def test_usage_errors(gebpf):
    for args in ([], ["-p", "1", "--", "true"], ["--event", "nope", "--", "true"],
                 ["-F", "0", "--", "true"], ["--range", "1-x", "--", "true"]):
        r = sample(args)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stderr.startswith("gebpf: sample: ") and r.stderr.count("\n") == 1, r.stderr


def test_unsupported_event_is_a_clear_error(hotcold):
    path, hot, cold = hotcold
    pmu = os.path.exists("/sys/bus/event_source/devices/cpu")
    if pmu:
        pytest.skip("this machine has a hardware PMU: cycles is supported")
    r = sample(["--event", "cycles", "--", path, "0.2"])
    assert r.returncode == 1
    assert "event cycles: not supported" in r.stderr, r.stderr


def test_help_matches_docs(gebpf):
    r = sample(["--help"])
    assert r.returncode == 0
    doc = open(os.path.join(conftest.REPO, "docs", "sample.md")).read()
    assert r.stdout in doc, "docs/sample.md does not contain the --help text verbatim"

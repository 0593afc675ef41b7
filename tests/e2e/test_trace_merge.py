"""gebpf trace --faults (BPF page faults merged into the exact trace) and
--snap-at (snapshots at exact points of a trace, in the recording dir)."""
import json
import subprocess

import pytest

from conftest import check_vt_order, prog_path, read_trace, run_gebpf, trace_summary, trap_args
import lackey


def faults_trace(tmp_path, n):
    out = tmp_path / "f.jsonl"
    r = run_gebpf(["trace", "--faults", "--range", "touch_pages", "-o", out, "--",
                   prog_path("faults_pages"), n], timeout=120)
    if r.returncode != 0 and ("BPF" in r.stderr or "bpf" in r.stderr):
        pytest.skip("BPF page-fault capture unavailable here: %s" % r.stderr.strip())
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout.strip().splitlines()[-1])
    return read_trace(out), report


def test_faults_exact_placement(trace_ready, tmp_path):
    """N fresh pages touched in the range: exactly N fault lines, each right
    after the access lines of the write that faulted (same vt and pc), at
    the address written, and N equals the program's own minflt+majflt."""
    n = 24
    (lines, summary), report = faults_trace(tmp_path, n)
    check_vt_order([ln for ln in lines if ln["t"] != "fault"])
    faults = [i for i, ln in enumerate(lines) if ln["t"] == "fault"]
    assert len(faults) == n == summary["faults"]
    assert report["minflt"] + report["majflt"] == n
    base = int(report["base"], 16)
    for k, i in enumerate(faults):
        f, prev = lines[i], lines[i - 1]
        # The fault follows the write of the instruction that took it.
        assert prev["t"] == "write", (prev, f)
        assert (prev["vt"], prev["pc"], prev["addr"]) == (f["vt"], f["pc"], f["addr"])
        assert int(f["addr"], 16) == base + k * 4096 + (k % 8) * 8
        err = int(f["err"], 16)
        assert err & 0x2 and err & 0x4, "a user-mode write fault: err=%s" % f["err"]
        # And the next line belongs to the next instruction.
        assert i + 1 == len(lines) or lines[i + 1]["vt"] == f["vt"] + 1


def test_faults_belong_to_their_instruction(trace_ready, tmp_path):
    """Every fault line follows its instruction's exec/access lines, has its
    vt and pc, and hits a page that instruction accessed (mem_sizes faults
    on the first read of .data and on the copy-on-write of its first write);
    "faults" is the summary's last field and counts them."""
    out = tmp_path / "t.jsonl"
    r = run_gebpf(["trace", "--faults", "--range", "traced", "-o", out, "--",
                   prog_path("mem_sizes")])
    if r.returncode != 0 and "bpf" in r.stderr.lower():
        pytest.skip("BPF page-fault capture unavailable here: %s" % r.stderr.strip())
    assert r.returncode == 0, r.stderr
    lines, summary = read_trace(out)
    assert list(summary)[-1] == "faults"
    faults = [ln for ln in lines if ln["t"] == "fault"]
    assert summary["faults"] == len(faults) >= 1
    cur = None
    for ln in lines:
        if ln["t"] == "exec":
            cur = (ln, [])
        elif ln["t"] in ("read", "write"):
            cur[1].append(ln)
        else:
            exe, acc = cur
            assert (ln["vt"], ln["pc"]) == (exe["vt"], exe["pc"])
            pages = {int(a["addr"], 16) >> 12 for a in acc}
            assert int(ln["addr"], 16) >> 12 in pages, (ln, acc)


def test_faults_off_has_no_field(trace_ready, tmp_path):
    out = tmp_path / "t.jsonl"
    r = run_gebpf(["trace", "--range", "traced", "-o", out, "--", prog_path("mem_sizes")])
    assert r.returncode == 0, r.stderr
    summary = trace_summary(out)
    assert "faults" not in summary


def test_snap_at_vt_matches_trace(trace_ready, tmp_path):
    """--snap-at vt=N: the snapshot is taken before the instruction with vt N
    (its rip is that exec line's pc), listed in meta.json, mode 0600."""
    rec = tmp_path / "rec"
    r = run_gebpf(["trace", "--range", "hot", "--out", rec, "--snap-at", "vt=7",
                   "--snap-at", "vt=40", "--", prog_path("hot_loop")])
    assert r.returncode == 0, r.stderr
    meta = json.loads((rec / "meta.json").read_text())
    assert [s["vt"] for s in meta["snapshots"]] == [7, 40]
    lines, _ = read_trace(rec / "blobs" / "trace.jsonl.zst")
    pcs = {ln["vt"]: ln["pc"] for ln in lines if ln["t"] == "exec"}
    for s in meta["snapshots"]:
        core = rec / s["blob"]
        assert (core.stat().st_mode & 0o777) == 0o600
        assert s["pc"] == pcs[s["vt"]]
        shown = json.loads(subprocess.run([trace_ready, "show", "--json", str(core)],
                                          capture_output=True, text=True, check=True).stdout)
        assert shown["meta"]["vt"] == s["vt"]
        assert shown["regs"][0]["rip"] == pcs[s["vt"]]


def test_snap_at_pc_outside_range_is_usage_error(trace_ready, tmp_path):
    r = run_gebpf(["trace", "--range", "hot", "--out", tmp_path / "rec", "--snap-at", "pc=0x1",
                   "--", prog_path("hot_loop")])
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("gebpf: --snap-at pc=0x1: outside")


def test_snap_at_needs_out_dir(trace_ready, tmp_path):
    r = run_gebpf(["trace", "--range", "hot", "--snap-at", "vt=1", "--", prog_path("hot_loop")])
    assert r.returncode == 2 and "needs --out" in r.stderr


def test_exec_keeps_tracing_new_images(trace_ready, tmp_path):
    """exec: the range is resolved and trapped again in every new image; the
    page trap and --step-all give the same trace, with traced's 3 calls."""
    outs = []
    for mode in ([], ["--step-all"]):
        out = tmp_path / ("t%d.jsonl" % len(outs))
        r = run_gebpf(["trace", "--range", "traced", "-o", out] + mode +
                      ["--", prog_path("exec_self"), "2"])
        assert r.returncode == 0, r.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    lines, summary = read_trace(tmp_path / "t0.jsonl")
    starts = [ln for ln in lines if ln["t"] == "exec" and ln["pc"] == summary["start"]]
    assert len(starts) == 3


@pytest.mark.parametrize("kind", ["pages", "none"])
def test_exec_moving_the_range_moves_the_summary(trace_ready, tmp_path, kind):
    """exec into another program: `traced` is resolved again in the new image
    (at another address), the trace follows it, and the summary's start/end
    name the range as the trace ended with it (they named the first image's).
    (The probe trap follows the range's file, not its symbol: docs/trace.md "Range".)"""
    out = tmp_path / "t.jsonl"
    r = run_gebpf(["trace", "--range", "traced", "-o", out] + trap_args(kind) +
                  ["--", prog_path("exec_other"), prog_path("recursion")])
    assert r.returncode == 0, r.stderr
    first = lackey.Program(prog_path("exec_other")).span(["traced"])
    second = lackey.Program(prog_path("recursion")).span(["traced"])
    assert first != second
    lines, summary = read_trace(out)
    assert (int(summary["start"], 16), int(summary["end"], 16)) == second
    pcs = [int(ln["pc"], 16) for ln in lines if ln["t"] == "exec"]
    assert pcs and first[0] <= pcs[0] <= first[1]
    assert second[0] <= pcs[-1] <= second[1]


@pytest.mark.parametrize("rng", ["0-ffffffffffffffff", "0-7fffffffffff"])
def test_untrappable_range_falls_back_to_stepping(trace_ready, tmp_path, rng):
    """A range that covers every executable mapping (nothing left to inject
    mprotect through) is traced by stepping everything: one warning, exit 0,
    and the same lines as a trace with no range at all."""
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    r = run_gebpf(["trace", "--range", rng, "-o", a, "--", prog_path("mem_sizes")])
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("\n") == 1 and "single-stepping everything" in r.stderr
    r2 = run_gebpf(["trace", "-o", b, "--", prog_path("mem_sizes")])
    assert r2.returncode == 0, r2.stderr
    la, sa = read_trace(a)
    lb, sb = read_trace(b)
    assert la == lb and sa["insns"] == sb["insns"] > 0

#!/usr/bin/env python3
"""Speed of `gebpf trace`, as ratios measured in one run (issues 2 and 3).

    GEBPF_OUTPUT=.output /usr/bin/python3 bench/bench_trace.py [--reps N] [--quick] [-v]

Every variant below runs once per round, rounds repeated --reps times
(A B C ... A B C ...), so drift on a shared machine hits every variant alike;
each number is a median over the rounds and each ratio is between medians of
the same run.  The raw step cost comes from bench/rawstep (PTRACE_SINGLESTEP +
waitpid + GETREGS, tracer and tracee pinned to one CPU, as gebpf pins).

  2   full stepping: `gebpf trace --max-events 0 -o FILE -- loop ITER` (no
      range: every instruction is in range, exec + memory lines to a file),
      in-range steps/s against rawstep's steps/s on the same program.
  2r  the same with a range covering all of loop's code (the page trap is
      armed, and the whole run is inside the range).
  3a  a range never entered (`--range cold` of hotcall, CPU-bound): gebpf
      wall / native wall.
  3b  the hot-function job (hotcall: CALLS calls of a 7-instruction `hot`
      from a loop of ~4*CALLS*INNER instructions, `--range hot`): gebpf wall
      / (native wall + in-range steps x raw step cost).
  3c  the same job (scaled to --lackey-calls calls, same density): valgrind
      lackey writing its trace to a file, wall / gebpf wall.
  3d  entry+exit cost: (gebpf wall - native wall - steps x raw step cost) /
      entries, entries = exec lines at `hot`'s first instruction.
  ctx `--step-all` / page trap on a small hot-function job (and the two
      traces must be identical); `--no-pin` / pinned on the full-stepping job.

Needs root (ptrace).  valgrind is optional (3c is skipped with a note).
"""
import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile

from benchlib import (GEBPF, OUT, RAWSTEP, Runner, add_common_args, add_hotcall_args, finish, med,
                      verdict)

LOOP = os.path.join(OUT, "bench", "loop")
HOTCALL = os.path.join(OUT, "bench", "hotcall")
HOT_INSNS = 7            # instructions of hotcall's `hot`, per call


def run_lackey(run, argv):
    """valgrind lackey writing its trace to a file: (wall, bytes written)."""
    log = os.path.join(run.tmp, "lackey.txt")
    dt, _ = run.timed(["valgrind", "--tool=lackey", "--trace-mem=yes",
                       "--vex-iropt-level=0", "--log-file=" + log] + argv, "valgrind lackey")
    size = os.path.getsize(log)
    os.unlink(log)
    return dt, size


def exec_range(path):
    """START-END (hex, inclusive) of the executable PT_LOAD segments of a
    static program: a range covering all of its code."""
    from elftools.elf.elffile import ELFFile
    with open(path, "rb") as f:
        segs = [(p["p_vaddr"], p["p_vaddr"] + p["p_memsz"] - 1)
                for p in ELFFile(f).iter_segments()
                if p["p_type"] == "PT_LOAD" and p["p_flags"] & 1]
    return "%x-%x" % (min(a for a, _ in segs), max(b for _, b in segs))


def count_entries(path, pc):
    """Exec lines at pc (the range's first instruction): one per entry."""
    n = 0
    with open(path) as f:
        for line in f:
            if line.startswith('{"t":"exec"') and json.loads(line)["pc"] == pc:
                n += 1
    return n


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()




def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(ap, 5, "small sizes, 2 rounds (a smoke run)")
    ap.add_argument("--loop-iter", type=int, default=10000,
                    help="issue 2: loop iterations (7 steps each; default 10000)")
    add_hotcall_args(ap, "3b/3d", "3b/3c/ctx", "3a")
    ap.add_argument("--lackey-calls", type=int, default=1000,
                    help="3c: calls for the lackey comparison (default 1000; 10000 = the 3b job, "
                         "~200 s per lackey run here)")
    ap.add_argument("--lackey-reps", type=int, default=3, help="3c: lackey runs (default 3)")
    ap.add_argument("--stepall-calls", type=int, default=20,
                    help="ctx: calls for the --step-all comparison (default 20)")
    ap.add_argument("--stepall-reps", type=int, default=3, help="ctx: --step-all runs (default 3)")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.loop_iter, a.calls, a.cold_inner, a.cold_pairs = 2, 2000, 1000, 30000, 1
        a.lackey_calls, a.lackey_reps, a.stepall_calls, a.stepall_reps = 100, 1, 5, 1
    if a.reps < 1 or min(a.loop_iter, a.calls, a.inner, a.cold_inner, a.lackey_calls,
                         a.stepall_calls, a.cold_pairs) < 1:
        ap.error("counts must be positive")

    if os.geteuid() != 0:
        print("bench_trace: skipped: needs root (ptrace)")
        return 0
    for p in (GEBPF, RAWSTEP, LOOP, HOTCALL):
        if not os.access(p, os.X_OK):
            raise SystemExit("bench_trace: %s not built (make OUTPUT=%s bench)" % (p, OUT))
    lackey = shutil.which("valgrind") is not None

    tmp = tempfile.mkdtemp(prefix="gebpf-bench-trace-")
    run = Runner("bench_trace", tmp, a.verbose)
    loop = [LOOP, str(a.loop_iter)]
    job = [HOTCALL, str(a.calls), str(a.inner)]
    cpu_job = [HOTCALL, str(a.calls), str(a.cold_inner)]
    small = [HOTCALL, str(a.lackey_calls), str(a.inner)]
    tiny = [HOTCALL, str(a.stepall_calls), str(a.inner)]
    code_range = exec_range(LOOP)
    # t: times (medians printed), r: one ratio per round (their median printed).
    t = {k: [] for k in ("raw_cost", "raw_rate", "full_rate", "range_rate", "full_s", "nopin_s", "cold_native",
                         "cold_gebpf", "hot_native", "hot_gebpf", "model", "small_gebpf",
                         "lackey", "lackey_bytes", "tiny_trap", "tiny_all")}
    r = {k: [] for k in ("2", "2r", "3a", "3b", "3c", "3d", "all", "pin")}
    warn = []
    hot = None                      # first round's summary of the hot job
    entries = None
    identical = None
    try:
        for rnd in range(a.reps):
            steps, secs = run.rawstep(loop)
            raw_cost = secs / steps
            t["raw_cost"].append(raw_cost)
            t["raw_rate"].append(steps / secs)
            dt, s = run.gebpf([], loop)
            t["full_s"].append(dt)
            t["full_rate"].append(s["insns"] / dt)
            r["2"].append(s["insns"] / dt * raw_cost)
            if abs(s["insns"] - steps) > 2:
                warn.append("gebpf traced %d instructions of loop, rawstep stepped %d" %
                            (s["insns"], steps))
            dt, s = run.gebpf(["--range", code_range], loop)
            t["range_rate"].append(s["insns"] / dt)
            r["2r"].append(s["insns"] / dt * raw_cost)
            if abs(s["insns"] - steps) > 2:
                warn.append("gebpf --range %s traced %d instructions of loop, rawstep stepped %d" %
                            (code_range, s["insns"], steps))
            nopin, _ = run.gebpf(["--no-pin"], loop)
            t["nopin_s"].append(nopin)
            r["pin"].append(nopin / dt)

            for _ in range(a.cold_pairs):
                cn = run.native(cpu_job)
                cg, s = run.gebpf(["--range", "cold"], cpu_job)
                t["cold_native"].append(cn)
                t["cold_gebpf"].append(cg)
                r["3a"].append(cg / cn)
                if s["insns"] != 0:
                    warn.append("--range cold traced %d instructions, expected 0" % s["insns"])

            hn = run.native(job)
            if hot is None:
                keep = os.path.join(tmp, "hot.jsonl")
                hg, hot = run.gebpf(["--range", "hot"], job, keep=keep)
                entries = count_entries(keep, hot["start"])
                os.unlink(keep)
                s = hot
            else:
                hg, s = run.gebpf(["--range", "hot"], job)
            if s["insns"] != HOT_INSNS * a.calls:
                warn.append("--range hot traced %d instructions, expected %d" %
                            (s["insns"], HOT_INSNS * a.calls))
            model = hn + s["insns"] * raw_cost
            t["hot_native"].append(hn)
            t["hot_gebpf"].append(hg)
            t["model"].append(model)
            r["3b"].append(hg / model)
            r["3d"].append((hg - model) / entries)

            if lackey and rnd < a.lackey_reps:
                sg = run.gebpf(["--range", "hot"], small)[0]
                lk, size = run_lackey(run, small)
                t["small_gebpf"].append(sg)
                t["lackey"].append(lk)
                t["lackey_bytes"].append(size)
                r["3c"].append(lk / sg)

            if rnd < a.stepall_reps:
                pa, pb = os.path.join(tmp, "trap.jsonl"), os.path.join(tmp, "all.jsonl")
                tt = run.gebpf(["--range", "hot"], tiny, keep=pa)[0]
                ta = run.gebpf(["--range", "hot", "--step-all"], tiny, keep=pb)[0]
                t["tiny_trap"].append(tt)
                t["tiny_all"].append(ta)
                r["all"].append(ta / tt)
                same = sha256(pa) == sha256(pb)
                identical = same if identical is None else identical and same
                os.unlink(pa)
                os.unlink(pb)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    T = {k: med(v) for k, v in t.items() if v}
    R = {k: med(v) for k, v in r.items() if v}
    print("== bench_trace: %d interleaved rounds; times are medians, each ratio the median of "
          "per-round ratios ==" % a.reps)
    print("   raw step (bench/rawstep, pinned like gebpf): %.1f us = %.0f steps/s" %
          (T["raw_cost"] * 1e6, T["raw_rate"]))
    fmt = "%-3s %-38s %14s %21s %9s %8s %s"
    print(fmt % ("", "measure", "gebpf", "baseline", "ratio", "target", ""))
    print(fmt % ("2", "full stepping, steps/s (loop %d)" % a.loop_iter, "%.0f/s" % T["full_rate"],
                 "%.0f/s rawstep" % T["raw_rate"], "%.3f" % R["2"], ">= 0.9",
                 verdict(R["2"], 0.9, True)))
    print(fmt % ("2r", "same, --range %s" % code_range, "%.0f/s" % T["range_rate"],
                 "%.0f/s rawstep" % T["raw_rate"], "%.3f" % R["2r"], ">= 0.9",
                 verdict(R["2r"], 0.9, True)))
    print(fmt % ("3a", "range never entered, wall (%dx%d)" % (a.calls, a.cold_inner),
                 "%.3f s" % T["cold_gebpf"], "%.3f s native" % T["cold_native"], "%.3f" % R["3a"],
                 "<= 1.05", verdict(R["3a"], 1.05, False)))
    print(fmt % ("3b", "hot function, wall (%d calls)" % a.calls, "%.3f s" % T["hot_gebpf"],
                 "%.3f s model" % T["model"], "%.3f" % R["3b"], "<= 1.2",
                 verdict(R["3b"], 1.2, False)))
    if "3c" in R:
        print(fmt % ("3c", "vs lackey, wall (%d calls)" % a.lackey_calls, "%.3f s" % T["small_gebpf"],
                     "%.3f s lackey" % T["lackey"], "%.1fx" % R["3c"], ">= 10x",
                     verdict(R["3c"], 10, True)))
    else:
        print("3c  vs lackey: skipped: valgrind not installed")
    print(fmt % ("3d", "entry+exit cost per entry", "%.1f us" % (R["3d"] * 1e6),
                 "%.1f us/step" % (T["raw_cost"] * 1e6), "%.1f st" % (R["3d"] / T["raw_cost"]),
                 "", "(context: in raw steps)"))
    print(fmt % ("ctx", "--step-all / trap, wall (%d calls)" % a.stepall_calls,
                 "%.3f s" % T["tiny_trap"], "%.3f s step-all" % T["tiny_all"], "%.1fx" % R["all"],
                 "", "traces %s" % ("identical" if identical else "DIFFER")))
    print(fmt % ("ctx", "--no-pin / pinned, wall (loop %d)" % a.loop_iter, "%.3f s" % T["full_s"],
                 "%.3f s no-pin" % T["nopin_s"], "%.3f" % R["pin"], "", ""))
    print("    3b model = native %.4f s + %d in-range steps x raw step; 3d entries = %d exec lines "
          "at %s; hot job ~%.2g native insns" % (T["hot_native"], hot["insns"], entries, hot["start"],
                                                 a.calls * (4 * a.inner + 4 + HOT_INSNS)))
    if "lackey_bytes" in T:
        print("    lackey writes %.0f MB per run (--trace-mem=yes --vex-iropt-level=0 --log-file)" %
              (T["lackey_bytes"] / 1e6))
    if entries != a.calls:
        warn.append("%d entries counted, expected %d" % (entries, a.calls))
    if identical is False:
        warn.append("--step-all and page-trap traces differ")
    return finish(warn)


if __name__ == "__main__":
    sys.exit(main())

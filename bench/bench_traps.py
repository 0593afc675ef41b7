#!/usr/bin/env python3
"""Every entry trap on the jobs that judge a trap with no stop (issue 19), as
ratios measured in one run.

    GEBPF_OUTPUT=.output /usr/bin/python3 bench/bench_traps.py [--reps N] [--quick] [-v]

The traps are those this gebpf takes (benchlib.available_traps: the --trap
names of `gebpf trace --help` and benchlib.TRAPS; a refused one is dropped
with gebpf's reason), each with gebpf's default engine (the translating one).
Rows, per trap:

  qsort   in-range instructions/s on bench/qsortjob N, --range cmp_int (8
          instructions a call, entered from libc's qsort), against the QEMU
          TCG plugin (gebpf's, .output/gebpf-qemu.so) on qsortjob --qemu-n: both
          write the trace to a file, startup included; ratio trap / qemu.
  short   the same on bench/shortcall (`fnv`, 40 instructions a call, 200k
          calls), --range fnv; QEMU runs the whole job.
          gebpf traces each job for --duration --secs (or to its end), every
          trap the same time; the rate is in-range instructions / gebpf's wall.
  entry   entry+exit cost per entry in raw steps: bench/hotcall with
          --calls/5 and --calls calls of the 7-instruction `hot`, ((gebpf
          wall - native wall) of the larger job - the same of the smaller) /
          (entries of the larger - of the smaller) / raw step (bench/rawstep,
          least of three a round).  The difference cancels gebpf's fixed
          set-up and teardown; `hot`'s 7 instructions are in the cost
          (translated, a few ns).  --trap none has no entries (it single-steps
          the whole 1e8-instruction job): no row.
  python  /usr/bin/python3 bench/pyloop.py (lists of strings joined into
          ~1.2 kB strings: malloc), attached with `-p PID --range libc:malloc
          --duration --attach-secs`, the trace written to a file: the loop
          rate pyloop itself reports while gebpf is attached (set-up and
          teardown included) / its rate in the --attach-secs seconds before.

Rounds are interleaved (every row once a round, --reps rounds); each printed
number is a median over rounds, each ratio the median of per-round ratios.
Targets (issue 19, for its new trap): qsort and short >= 1.0x QEMU, entry
<= 0.1 raw steps, python >= 0.8; printed as ok/MISS for every trap.
Needs root (ptrace, uprobes, BPF).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from benchlib import (GEBPF, OUT, RAWSTEP, Runner, add_common_args, available_traps, finish,
                      last_line, med, verdict)
from bench_engines import PLUGIN, QEMU, QSORT, qemu_plugin
from bench_probe import PYLOOP, PYTHON, loops_between

HOTCALL = os.path.join(OUT, "bench", "hotcall")
LOOP = os.path.join(OUT, "bench", "loop")
SHORT = os.path.join(OUT, "bench", "shortcall")
HOT_INSNS = 7                 # hotcall's `hot`, per call
FNV_INSNS = 40                # shortcall's `fnv`, per call
SHORT_CALLS = 200000


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(ap, 3, "small sizes, 1 round (a smoke run)")
    ap.add_argument("--secs", type=float, default=2,
                    help="qsort/short: gebpf's --duration (default 2)")
    ap.add_argument("--qsort-n", type=int, default=1000000, help="qsort: gebpf's job (default 1e6)")
    ap.add_argument("--qemu-n", type=int, default=100000, help="qsort: QEMU's job (default 1e5)")
    ap.add_argument("--calls", type=int, default=10000,
                    help="entry: calls of hot in the larger job (default 10000)")
    ap.add_argument("--inner", type=int, default=2500,
                    help="entry: loop iterations between calls (default 2500)")
    ap.add_argument("--attach-secs", type=float, default=5, help="python: --duration (default 5)")
    ap.add_argument("--rows", default="qsort,short,entry,python",
                    help="the rows to measure, comma-separated (default all: qsort,short,entry,python)")
    a = ap.parse_args()
    rows = set(a.rows.split(","))
    if not rows or rows - {"qsort", "short", "entry", "python"}:
        ap.error("--rows: a comma-separated list of qsort, short, entry, python")
    if a.quick:
        a.reps, a.secs, a.qemu_n, a.calls, a.attach_secs = 1, 0.5, 10000, 2000, 1
    if min(a.reps, a.qsort_n, a.qemu_n, a.calls, a.inner) < 1 or a.secs <= 0 or a.attach_secs <= 0:
        ap.error("counts must be positive")
    if os.geteuid() != 0:
        print("bench_traps: skipped: needs root (ptrace, uprobes, BPF)")
        return 0
    for p in (GEBPF, RAWSTEP, LOOP, HOTCALL, QSORT, SHORT, PYTHON):
        if not os.access(p, os.X_OK):
            raise SystemExit("bench_traps: %s not built (make OUTPUT=%s bench)" % (p, OUT))

    traps, notes = available_traps("fnv", [SHORT, "10"])
    warn = []
    qemu = shutil.which(QEMU) and os.path.exists(PLUGIN)
    if not qemu:
        notes.append("qemu: skipped: %s or %s missing (qemu-user; make builds the plugin)"
                     % (QEMU, PLUGIN))
    tmp = tempfile.mkdtemp(prefix="gebpf-bench-traps-")
    run = Runner("bench_traps", tmp, a.verbose)
    jobs = {"qsort": {"argv": [QSORT, str(a.qsort_n)], "range": "cmp_int",
                      "qemu": [QSORT, str(a.qemu_n)], "total": None},
            "short": {"argv": [SHORT, str(SHORT_CALLS)], "range": "fnv",
                      "qemu": [SHORT, str(SHORT_CALLS)], "total": FNV_INSNS * SHORT_CALLS}}
    jobs = {k: v for k, v in jobs.items() if k in rows}
    span = {}
    t, r = {}, {}                # medians of t printed; ratios: medians of per-round r

    def add(d, k, v):
        d.setdefault(k, []).append(v)

    def rate(job, trap):
        spec = jobs[job]
        wall, s = run.gebpf(["--trap", trap, "--range", spec["range"], "--duration", str(a.secs)],
                            spec["argv"])
        span[job] = (s["start"], s["end"])
        if spec["total"] and s["insns"] > spec["total"]:
            warn.append("%s --trap %s: %d in-range instructions, more than the job's %d"
                        % (job, trap, s["insns"], spec["total"]))
        return s["insns"] / wall

    try:
        for job in jobs:              # the range's span, for QEMU
            s = run.gebpf(["--range", jobs[job]["range"], "--max-insns", "1"],
                          [jobs[job]["argv"][0], "1"])[1]
            span[job] = (s["start"], s["end"])
        for rnd in range(a.reps):
            for job, spec in jobs.items():
                q = None
                if qemu:
                    path = os.path.join(tmp, "qemu.jsonl")
                    wall, _ = run.timed([QEMU, "-plugin", qemu_plugin(span[job][0], span[job][1], path)]
                                        + spec["qemu"], "qemu " + job)
                    q = last_line(path)["insns"] / wall
                    os.unlink(path)
                    add(t, (job, "qemu"), q)
                for trap in traps:
                    g = rate(job, trap)
                    add(t, (job, trap), g)
                    if q:
                        add(r, (job, trap), g / q)
            # entry+exit: the raw step unit, then the two hotcall sizes
            raw = min(run.raw_cost([LOOP, "2000"]) for _ in range(3)) if "entry" in rows else 0
            add(t, "raw", raw)
            small = [HOTCALL, str(max(1, a.calls // 5)), str(a.inner)]
            large = [HOTCALL, str(a.calls), str(a.inner)]
            ns, nl = (run.native(small), run.native(large)) if "entry" in rows else (0, 0)
            for trap in traps:
                if trap == "none" or "entry" not in rows:
                    continue
                ws, ss = run.gebpf_stats(["--trap", trap, "--range", "hot"], small)
                wl, sl = run.gebpf_stats(["--trap", trap, "--range", "hot"], large)
                for st, argv in ((ss, small), (sl, large)):
                    if st["in_range"] != HOT_INSNS * int(argv[1]):
                        warn.append("entry --trap %s: %d in-range instructions, expected %d"
                                    % (trap, st["in_range"], HOT_INSNS * int(argv[1])))
                de = sl["entries"] - ss["entries"]
                if de <= 0:
                    warn.append("entry --trap %s: entries %d then %d" % (trap, ss["entries"],
                                                                        sl["entries"]))
                    continue
                d = ((wl - nl) - (ws - ns)) / de
                add(r, ("entry", trap), d / raw)
                add(t, ("entry", trap), d)
            # python attached
            for trap in traps if "python" in rows else ():
                before, during, summary = attach_python(run, trap, a.attach_secs)
                add(t, ("py_before", trap), before)
                add(t, ("py_during", trap), during)
                add(r, ("python", trap), during / before)
                if summary["insns"] == 0 and trap != "none":
                    warn.append("python --trap %s: no malloc instruction traced" % trap)
            print("   round %d done" % (rnd + 1), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    T = {k: med(v) for k, v in t.items()}
    R = {k: med(v) for k, v in r.items()}
    print("== bench_traps: %d interleaved rounds, traps %s (default engine); times are medians, "
          "each ratio the median of per-round ratios; load average %s ==" %
          (a.reps, ", ".join(traps), " ".join(open("/proc/loadavg").read().split()[:3])))
    fmt = "%-7s %-7s %16s %20s %8s %8s %s"
    print(fmt % ("row", "trap", "gebpf", "baseline", "ratio", "target", ""))
    for job in jobs:
        for trap in traps:
            base = ("%.0f/s qemu" % T[(job, "qemu")]) if qemu else "-"
            ratio = R.get((job, trap))
            print(fmt % (job, trap, "%.0f insns/s" % T[(job, trap)], base,
                         "%.3f" % ratio if ratio is not None else "-", ">= 1",
                         verdict(ratio, 1, True) if ratio is not None else ""))
    for trap in traps:
        if ("entry", trap) in R:
            print(fmt % ("entry", trap, "%.1f us" % (T[("entry", trap)] * 1e6),
                         "%.1f us/raw step" % (T["raw"] * 1e6), "%.2f st" % R[("entry", trap)],
                         "<= 0.1", verdict(R[("entry", trap)], 0.1, False)))
    for trap in traps if "python" in rows else ():
        print(fmt % ("python", trap, "%.0f loops/s" % T[("py_during", trap)],
                     "%.0f/s untraced" % T[("py_before", trap)], "%.3f" % R[("python", trap)],
                     ">= 0.8", verdict(R[("python", trap)], 0.8, True)))
    print("   qsort: gebpf qsortjob %d for --duration %g, qemu qsortjob %d; short: shortcall %d (%d "
          "insns a call), gebpf for --duration %g; entry: hotcall %d and %d calls x %d iterations; "
          "python: %g s attached" % (a.qsort_n, a.secs, a.qemu_n, SHORT_CALLS, FNV_INSNS, a.secs,
                                     max(1, a.calls // 5), a.calls, a.inner, a.attach_secs))
    print("   the page trap (and none) single-step main's set-up loops, which share the range's "
          "page in both jobs: few or no in-range instructions within --duration")
    for n in notes:
        print("   note: " + n)
    return finish(warn)


def attach_python(run, trap, secs):
    """pyloop (endless) natively for 1 + secs s, then `gebpf trace --trap
    TRAP -p PID --range libc:malloc --duration secs -o FILE`.  Returns
    (loops/s in the secs before the attach, loops/s during it, summary)."""
    p = subprocess.Popen([PYTHON, PYLOOP, "0", "0.05"], stdout=subprocess.PIPE, text=True)
    reports = []

    def reader():
        for line in p.stdout:
            m, n = line.split()
            reports.append((float(m), int(n)))
    th = threading.Thread(target=reader, daemon=True)
    th.start()
    path = os.path.join(run.tmp, "py.jsonl")
    try:
        time.sleep(1.0 + secs)
        t0 = time.monotonic()
        wall, _ = run.timed([GEBPF, "trace", "--trap", trap, "-p", str(p.pid), "--range",
                             "libc:malloc", "--duration", str(secs), "--max-events", "0",
                             "-o", path], "gebpf trace --trap %s -p python" % trap)
        t1 = time.monotonic()
        time.sleep(0.3)
        summary = last_line(path)
        os.unlink(path)
    finally:
        p.kill()
        p.wait()
        th.join(timeout=5)
    before = loops_between(reports, t0 - secs, t0) / secs
    during = loops_between(reports, t0, t1) / (t1 - t0)
    return before, during, summary


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""What `gebpf trace --values` costs (issue 35's benchmark).

    GEBPF_OUTPUT=.output /usr/bin/python3 bench/bench_values.py [--reps N] [--quick] [-v]

Three jobs, each traced over one range, --max-insns N in-range instructions
(the step engine takes a single-step per instruction: ~13-40 us each on this
VM, a few us on bare metal, so the rates are per raw step as much as per
second), every line written (--max-events 0) to a file:

  loop   bench/loop ITER, --range hot (7 instructions a loop, 1 read + 1 write)
  qsort  bench/qsortjob N, --range cmp_int (libc's qsort calling the comparator)
  hash   bench/shortcall N, --range fnv (a 40-instruction hash, 200k calls)

Rows (in-range instructions per second, median over --reps interleaved rounds):

  step    --engine step --trap pages, without values
  step+v  the same with --values (values read with ptrace around each step)
  jit     --engine jit --trap probes, without values
  jit+v   --values alone: its default, the translating engine taking the
          values in its code cache, entered through the probe trap (every
          entry of these jobs can give its values)
  fast    the default without values (the patch trap's code cache, which
          takes no values): what --values gives up

Ratios (medians of per-round ratios of wall times): values/plain for each
engine with its trap (target <= 1.5), fast/jit+v.  The byte counts of one
trace of each show what the value fields add.

QEMU 10 (scripts/qemu10, docs/qemu.md "QEMU 10"; skipped with the reason
when .output/qemu10 and gebpf-qemu10.so are not built): `gebpf qemu` on the
same jobs, whole (QEMU has no --max-insns), with and without --values:
qemu values/plain, and gebpf --values (its default: jit+v) on the same whole
jobs, the two rates compared (target: gebpf with values ahead).  Both rates
include the launch; gebpf's also the range's set-up.
"""
import argparse
import os
import sys
import tempfile

from benchlib import GEBPF, OUT, Runner, add_common_args, last_line, med, verdict

LOOP = os.path.join(OUT, "bench", "loop")
QSORT = os.path.join(OUT, "bench", "qsortjob")
SHORT = os.path.join(OUT, "bench", "shortcall")
QEMU10 = os.path.join(OUT, "qemu10", "bin", "qemu-x86_64")
PLUGIN10 = os.path.join(OUT, "gebpf-qemu10.so")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(ap, 3, "small jobs, one round")
    ap.add_argument("--insns", type=int, default=100000, help="--max-insns per trace (100000)")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.insns = 1, 5000
    for p in (GEBPF, LOOP, QSORT, SHORT):
        if not os.access(p, os.X_OK):
            sys.exit("bench_values: %s missing: make bench" % p)
    jobs = {
        "loop": ([LOOP, "100000000"], "hot"),
        # (a small array: the page trap single-steps qsortjob's main, which
        # shares cmp_int's page, while it fills the array)
        "qsort": ([QSORT, "3000"], "cmp_int"),
        "hash": ([SHORT, "200000"], "fnv"),
    }
    rows = {
        "step": ["--engine", "step", "--trap", "pages"],
        "step+v": ["--engine", "step", "--trap", "pages", "--values"],
        "jit": ["--engine", "jit", "--trap", "probes"],
        "jit+v": ["--values"],
        "fast": [],
    }
    pairs = (("step+v", "step"), ("jit+v", "jit"))
    with tempfile.TemporaryDirectory(prefix="bench-values-") as tmp:
        run = Runner("bench_values", tmp, a.verbose)
        walls = {(j, r): [] for j in jobs for r in rows}
        for _ in range(a.reps):
            for job, (argv, rng) in jobs.items():
                for row, opts in rows.items():
                    wall, s = run.gebpf(opts + ["--range", rng, "--max-insns", str(a.insns)], argv)
                    if s["insns"] != a.insns:
                        sys.exit("bench_values: %s %s traced %d instructions, not %d"
                                 % (job, row, s["insns"], a.insns))
                    walls[(job, row)].append(wall)
        sizes = {}
        for job, (argv, rng) in jobs.items():
            for row in ("jit", "jit+v"):
                path = os.path.join(tmp, "%s-%s.jsonl" % (job, row))
                run.gebpf(rows[row] + ["--range", rng, "--max-insns", str(a.insns)], argv, keep=path)
                sizes[(job, row)] = os.path.getsize(path)
    print("bench_values: %d in-range instructions per trace, %d round%s (medians)"
          % (a.insns, a.reps, "" if a.reps == 1 else "s"))
    print("  %-6s" % "job" + "".join(" %11s" % (r + " i/s") for r in rows) +
          "  %13s %13s %11s  %s" % ("step v/plain", "jit v/plain", "fast/jit+v",
                                   "bytes/insn plain -> values"))
    ok = True
    for job in jobs:
        rate = {r: a.insns / med(walls[(job, r)]) for r in rows}
        cols = ""
        for v, p in pairs:
            ratio = med([x / y for x, y in zip(walls[(job, v)], walls[(job, p)])])
            verd = verdict(ratio, 1.5, False)
            ok &= verd == "ok"
            cols += " %11.2fx %s" % (ratio, verd)
        fast = med([v / f for v, f in zip(walls[(job, "jit+v")], walls[(job, "fast")])])
        print("  %-6s" % job + "".join(" %11.0f" % rate[r] for r in rows) + cols +
              " %10.1fx  %6.1f -> %.1f" % (fast, sizes[(job, "jit")] / a.insns,
                                           sizes[(job, "jit+v")] / a.insns))
    print("  target: values/plain <= 1.5 for each engine (the same engine and trap; the value "
          "fields and their capture)")
    if not (os.access(QEMU10, os.X_OK) and os.path.exists(PLUGIN10)):
        print("  qemu10 with values: skipped: %s or %s not built (make qemu10, docs/qemu.md)"
              % (QEMU10, PLUGIN10))
        return 0 if ok else 1
    qjobs = {
        "loop": ([LOOP, "50000" if a.quick else "1000000"], "hot"),
        "qsort": ([QSORT, "2000" if a.quick else "10000"], "cmp_int"),
        "hash": ([SHORT, "5000" if a.quick else "100000"], "fnv"),
    }
    with tempfile.TemporaryDirectory(prefix="bench-values-q-") as tmp:
        run = Runner("bench_values", tmp, a.verbose)
        out = os.path.join(tmp, "q.jsonl")
        qrate = {}
        for job, (argv, rng) in qjobs.items():
            for row, knob in (("plain", ""), ("values", ",values=on")):
                rates = []
                for _ in range(a.reps):
                    # (QEMU 10 and its plugin as `gebpf qemu --values` runs them:
                    # ASLR off, docs/qemu.md; values off for the plain row)
                    cmd = ["setarch", "-R", QEMU10, "-plugin", "%s,range=%s,max_events=0,out=%s%s"
                           % (PLUGIN10, rng, out, knob)] + argv
                    wall, _ = run.timed(cmd, "qemu10 %s %s" % (job, row))
                    rates.append(last_line(out)["insns"] / wall)
                qrate[(job, row)] = med(rates)
            rates = []
            for _ in range(a.reps):
                wall, summ = run.gebpf(["--values", "--range", rng], argv)
                rates.append(summ["insns"] / wall)
            qrate[(job, "gebpf")] = med(rates)
    print("  %-6s %14s %14s  %12s %14s  %s" % ("job", "qemu10 insn/s", "+values insn/s",
                                              "values cost", "gebpf+v insn/s",
                                              "gebpf values / qemu10 values (rate)"))
    for job in jobs:
        gv = qrate[(job, "gebpf")]
        r = gv / qrate[(job, "values")]
        print("  %-6s %14.0f %14.0f  %10.2fx %14.0f  %8.3f %s" % (
            job, qrate[(job, "plain")], qrate[(job, "values")],
            qrate[(job, "plain")] / qrate[(job, "values")], gv, r, verdict(r, 1.0, True)))
    print("  target: gebpf with values (jit+v) ahead of QEMU with values (>= 1)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

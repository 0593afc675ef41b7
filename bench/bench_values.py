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

  plain   --engine step --trap pages (an engine and trap --values uses; its
          default is the probe trap where every entry can give its values)
  values  the same with --values
  fast    the default (the patch trap's code cache), without values: what
          --values gives up today (the translating engine takes no values yet)

Ratios (medians of per-round ratios): values/plain wall (target <= 1.5),
fast/values rate.  The byte counts of one trace of each show what the value
fields add.

QEMU 10 (scripts/qemu10, docs/qemu.md "QEMU 10"; skipped with the reason
when .output/qemu10 and gebpf-qemu10.so are not built): `gebpf qemu` on the
same jobs, whole (QEMU has no --max-insns; the job sizes are smaller, rates
are compared), with and without --values: qemu values/plain, and gebpf's
values rate against QEMU's values rate (target: gebpf with values ahead).
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
        "plain": ["--engine", "step", "--trap", "pages"],
        "values": ["--values", "--trap", "pages"],
        "fast": [],
    }
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
            for row in ("plain", "values"):
                path = os.path.join(tmp, "%s-%s.jsonl" % (job, row))
                run.gebpf(rows[row] + ["--range", rng, "--max-insns", str(a.insns)], argv, keep=path)
                sizes[(job, row)] = os.path.getsize(path)
    print("bench_values: %d in-range instructions per trace, %d round%s (medians)"
          % (a.insns, a.reps, "" if a.reps == 1 else "s"))
    print("  %-6s %14s %14s %14s  %12s %12s  %s" % ("job", "plain insn/s", "values insn/s",
                                                   "fast insn/s", "values/plain", "fast/values",
                                                   "bytes/insn plain -> values"))
    ok = True
    for job in jobs:
        rate = {r: a.insns / med(walls[(job, r)]) for r in rows}
        ratio = med([v / p for v, p in zip(walls[(job, "values")], walls[(job, "plain")])])
        fast = med([v / f for v, f in zip(walls[(job, "values")], walls[(job, "fast")])])
        v = verdict(ratio, 1.5, False)
        ok &= v == "ok"
        print("  %-6s %14.0f %14.0f %14.0f  %10.2fx %s %10.1fx  %6.1f -> %.1f" % (
            job, rate["plain"], rate["values"], rate["fast"], ratio, v, fast,
            sizes[(job, "plain")] / a.insns, sizes[(job, "values")] / a.insns))
    print("  target: values/plain <= 1.5 (the same engine and trap; the value fields and the "
          "ptrace reads they take)")
    if not (os.access(QEMU10, os.X_OK) and os.path.exists(PLUGIN10)):
        print("  qemu10 with values: skipped: %s or %s not built (make qemu10, docs/qemu.md)"
              % (QEMU10, PLUGIN10))
        return 0 if ok else 1
    qjobs = {
        "loop": ([LOOP, "50000" if a.quick else "1000000"], "hot"),
        "qsort": ([QSORT, "2000" if a.quick else "30000"], "cmp_int"),
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
    print("  %-6s %14s %14s  %12s  %s" % ("job", "qemu10 insn/s", "+values insn/s", "values cost",
                                         "gebpf values / qemu10 values (rate)"))
    for job in jobs:
        gv = a.insns / med(walls[(job, "values")])
        r = gv / qrate[(job, "values")]
        print("  %-6s %14.0f %14.0f  %10.2fx  %8.4f %s" % (
            job, qrate[(job, "plain")], qrate[(job, "values")],
            qrate[(job, "plain")] / qrate[(job, "values")], r, verdict(r, 1.0, True)))
    print("  target: gebpf with values ahead of QEMU with values (>= 1): gebpf takes values "
          "by single-stepping until the translating engine takes them")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

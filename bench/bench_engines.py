#!/usr/bin/env python3
"""In-range instructions per second of gebpf's engines beside lackey and a
QEMU TCG plugin (issue 13's benchmark table).

    GEBPF_OUTPUT=.output /usr/bin/python3 bench/bench_engines.py [--reps N] [--quick] [-v]

Two jobs, each traced over one range with every tool writing a trace file:

  loop   bench/loop ITER, --range hot (7 instructions a loop, 1 read + 1 write)
  qsort  bench/qsortjob N: libc's qsort of N ints, --range cmp_int (the
         comparator: 8 instructions a call, 2 reads, entered from qsort)

Rows (each a rate: in-range instructions / wall seconds of the whole run,
startup included; the job sizes differ per row so that each run takes about
a second or more, rates are what is compared):

  step    gebpf trace --engine step (no option while gebpf has no --engine),
          --max-insns caps the work (the loop: 1e6 iterations; qsort: 1e6 ints)
  jit     gebpf trace --engine jit: the loop with a larger cap; qsort the
          QEMU row's job whole (qsortjob --qemu-n, no cap), so that both
          rates cover the same work, start-up included (a cap ends the trace
          early and the rest of a 1e6-int qsort runs natively, which the
          rate would count as tracing time); skipped with a note while
          `gebpf trace --help` lists no --engine jit
  lackey  valgrind --tool=lackey --trace-mem=yes --vex-iropt-level=0 writing
          its log to a file (whole program traced: lackey has no range);
          in-range count taken from the log
  qemu    qemu-x86_64 -plugin .output/gebpf-qemu.so (gebpf's plugin, user/qemu/: the same JSONL lines
          for the range); skipped with the reason when the plugin is not built
          (make builds it; it needs qemu-plugin.h, see
          scripts/qemu-plugin-h; max_events=0 so that it writes every line)

Rounds are interleaved (every row once a round, --reps rounds); each rate is
the median over rounds, each ratio the median of the per-round ratios.  Checks: gebpf's and the plugin's in-range counts
equal the job's (loop) or each other (qsort, same N), lackey's count matches,
and the plugin's trace of a small loop job equals gebpf's byte for byte
except the stack address of `ret` (QEMU's guest stack is elsewhere).
Targets (issue 13): jit >= 100x step, jit >= lackey, moonshot jit >= qemu.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from benchlib import GEBPF, OUT, Runner, add_common_args, last_line, med, verdict

LOOP = os.path.join(OUT, "bench", "loop")
QSORT = os.path.join(OUT, "bench", "qsortjob")
PLUGIN = os.path.join(OUT, "gebpf-qemu.so")
QEMU = "qemu-x86_64"


def qemu_plugin(lo, hi, out):
    """The -plugin argument: gebpf's plugin on [lo, hi] (hex strings or
    ints), every line written (no budget) to out."""
    hx = lambda v: v if isinstance(v, str) else "%#x" % v
    return "%s,start=%s,end=%s,max_events=0,out=%s" % (PLUGIN, hx(lo), hx(hi), out)
ROWS = ("step", "jit", "lackey", "qemu")


def trace_help():
    r = subprocess.run([GEBPF, "trace", "--help"], capture_output=True, text=True, timeout=30)
    return r.stdout + r.stderr


def engine_opts(help_text, name):
    """gebpf options selecting engine NAME, or None when it has none."""
    lines = [ln for ln in help_text.splitlines() if "--engine" in ln]
    if not lines:
        return [] if name == "step" else None
    return ["--engine", name] if any(re.search(r"\b%s\b" % name, ln) for ln in lines) else None


def lackey_count(log, lo, hi):
    """Instructions in [lo, hi] in a lackey log."""
    n = 0
    with open(log, "rb") as f:
        for line in f:
            if line.startswith(b"I ") and lo <= int(line[3:].split(b",")[0], 16) <= hi:
                n += 1
    return n


def mask_stack(path):
    out = []
    with open(path) as f:
        for ln in f:
            o = json.loads(ln)
            if "addr" in o and int(o["addr"], 16) >= 1 << 32:
                o["addr"] = "stack"
            out.append(o)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(ap, 3, "small sizes, 1 round (a smoke run)")
    ap.add_argument("--step-insns", type=int, default=30000, help="step: --max-insns (default 30000)")
    ap.add_argument("--jit-insns", type=int, default=5000000,
                    help="jit: --max-insns on the loop (default 5e6)")
    ap.add_argument("--jit-qsort-insns", type=int, default=0,
                    help="jit: --max-insns on qsort --qsort-n (default 0: the QEMU row's "
                         "job, qsort --qemu-n, whole)")
    ap.add_argument("--loop-iter", type=int, default=1000000, help="step/jit loop job (default 1e6)")
    ap.add_argument("--qsort-n", type=int, default=1000000, help="step/jit qsort job (default 1e6)")
    ap.add_argument("--lackey-loop", type=int, default=200000, help="lackey loop job (default 2e5)")
    ap.add_argument("--lackey-n", type=int, default=5000, help="lackey qsort job (default 5000)")
    ap.add_argument("--qemu-loop", type=int, default=1000000, help="qemu loop job (default 1e6)")
    ap.add_argument("--qemu-n", type=int, default=100000, help="qemu qsort job (default 1e5)")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.step_insns, a.jit_insns = 1, 3000, 300000
        a.lackey_loop, a.lackey_n, a.qemu_loop, a.qemu_n = 20000, 500, 100000, 10000
    if os.geteuid() != 0:
        print("bench_engines: skipped: needs root (ptrace, uprobes, BPF)")
        return 0
    for p in (GEBPF, LOOP, QSORT):
        if not os.access(p, os.X_OK):
            raise SystemExit("bench_engines: %s not built (make OUTPUT=%s bench)" % (p, OUT))

    help_text = trace_help()
    notes, warn = [], []
    opts = {"step": engine_opts(help_text, "step"), "jit": engine_opts(help_text, "jit")}
    rows = ["step"]
    if opts["jit"] is None:
        notes.append("jit: skipped: `gebpf trace --help` lists no --engine jit")
    else:
        rows.append("jit")
    if shutil.which("valgrind"):
        rows.append("lackey")
    else:
        notes.append("lackey: skipped: valgrind not installed (scripts/deps)")
    if not shutil.which(QEMU):
        notes.append("qemu: skipped: %s not installed (qemu-user, scripts/deps)" % QEMU)
    elif not os.path.exists(PLUGIN):
        notes.append("qemu: skipped: %s not built: it needs QEMU's qemu-plugin.h, which no Debian "
                     "binary package ships; `make bench` fetches it from Debian's qemu source "
                     "package (scripts/qemu-plugin-h), which failed or was not run" % PLUGIN)
    else:
        rows.append("qemu")

    tmp = tempfile.mkdtemp(prefix="gebpf-bench-engines-")
    run = Runner("bench_engines", tmp, a.verbose)
    jobs = {
        "loop": {"bin": LOOP, "range": "hot",
                 "args": {"step": a.loop_iter, "jit": a.loop_iter, "lackey": a.lackey_loop,
                          "qemu": a.qemu_loop}},
        "qsort": {"bin": QSORT, "range": "cmp_int",
                  "args": {"step": a.qsort_n,
                           "jit": a.qsort_n if a.jit_qsort_insns else a.qemu_n,
                           "lackey": a.lackey_n,
                           "qemu": a.qemu_n}},
    }
    rates = {(j, r): [] for j in jobs for r in rows}
    span = {}
    counts = {}

    def gebpf_row(job, row, cap):
        spec = jobs[job]
        path = os.path.join(tmp, "%s-%s.jsonl" % (job, row))
        capopt = ["--max-insns", str(cap)] if cap else []
        wall, summary = run.gebpf(opts[row] + ["--range", spec["range"]] + capopt,
                                  [spec["bin"], str(spec["args"][row])], keep=path)
        os.unlink(path)
        span[job] = (int(summary["start"], 16), int(summary["end"], 16))
        if not cap:
            counts.setdefault((job, row, spec["args"][row]), set()).add(summary["insns"])
        elif summary["insns"] != cap:
            warn.append("%s %s: %d in-range instructions, expected the cap %d"
                        % (job, row, summary["insns"], cap))
        return summary["insns"] / wall

    try:
        # the plugin's lines against gebpf's on a small loop job
        if "qemu" in rows:
            g, q = os.path.join(tmp, "check-g.jsonl"), os.path.join(tmp, "check-q.jsonl")
            _, s = run.gebpf(opts["step"] + ["--range", "hot"], [LOOP, "300"], keep=g)
            run.timed([QEMU, "-plugin", qemu_plugin(s["start"], s["end"], q), LOOP, "300"], "qemu check")
            if mask_stack(g) != mask_stack(q):
                warn.append("the QEMU plugin's trace of `loop 300` differs from gebpf's "
                            "(beyond the stack address): %s %s" % (g, q))
        if "qemu" in rows and "lackey" in rows:
            path = os.path.join(tmp, "qemu.jsonl")
            s = run.gebpf(opts["step"] + ["--range", "cmp_int", "--max-insns", "1"],
                          [QSORT, "1"], keep=path)[1]
            run.timed([QEMU, "-plugin", qemu_plugin(s["start"], s["end"], path), QSORT,
                       str(a.lackey_n)], "qemu")
            counts[("qsort", "qemu", a.lackey_n)] = {last_line(path)["insns"]}
        for rnd in range(a.reps):
            for job, spec in jobs.items():
                rates[(job, "step")].append(gebpf_row(job, "step", a.step_insns))
                if "jit" in rows:
                    rates[(job, "jit")].append(gebpf_row(
                        job, "jit", a.jit_insns if job == "loop" else a.jit_qsort_insns))
                lo, hi = span[job]
                if "lackey" in rows:
                    log = os.path.join(tmp, "lackey.log")
                    n = spec["args"]["lackey"]
                    wall, _ = run.timed(["valgrind", "--tool=lackey", "--trace-mem=yes",
                                         "--vex-iropt-level=0", "--log-file=" + log,
                                         spec["bin"], str(n)], "valgrind lackey")
                    cnt = lackey_count(log, lo, hi)
                    os.unlink(log)
                    counts.setdefault((job, "lackey", n), set()).add(cnt)
                    rates[(job, "lackey")].append(cnt / wall)
                if "qemu" in rows:
                    path = os.path.join(tmp, "qemu.jsonl")
                    n = spec["args"]["qemu"]
                    wall, _ = run.timed([QEMU, "-plugin", qemu_plugin(lo, hi, path), spec["bin"],
                                         str(n)], "qemu")
                    cnt = last_line(path)["insns"]
                    os.unlink(path)
                    counts.setdefault((job, "qemu", n), set()).add(cnt)
                    rates[(job, "qemu")].append(cnt / wall)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    for (job, row, n), cs in sorted(counts.items()):
        if len(cs) != 1:
            warn.append("%s %s: in-range counts vary between rounds: %s" % (job, row, sorted(cs)))
        if job == "loop" and 7 * n + 4 not in cs:
            warn.append("loop %s (%d iterations): %s in-range instructions, expected %d"
                        % (row, n, sorted(cs), 7 * n + 4))
    lk, qe = counts.get(("qsort", "lackey", a.lackey_n)), counts.get(("qsort", "qemu", a.lackey_n))
    if lk and qe and lk != qe:
        warn.append("qsort %d: lackey counts %s, qemu %s" % (a.lackey_n, lk, qe))
    jq, qq = counts.get(("qsort", "jit", a.qemu_n)), counts.get(("qsort", "qemu", a.qemu_n))
    if jq and qq and jq != qq:
        warn.append("qsort %d: gebpf jit counts %s, qemu %s" % (a.qemu_n, jq, qq))

    print("bench_engines: in-range instructions per second (median of %d rounds; load average %s)"
          % (a.reps, " ".join(open("/proc/loadavg").read().split()[:3])))
    print("  %-6s %-7s %14s   %s" % ("job", "tool", "insns/s", "job size"))
    for job, spec in jobs.items():
        for row in rows:
            size = spec["args"][row]
            cap = {"step": a.step_insns,
                   "jit": a.jit_insns if job == "loop" else a.jit_qsort_insns}.get(row)
            what = ("%s %d, --max-insns %d" % (job, size, cap)) if cap else "%s %d" % (job, size)
            print("  %-6s %-7s %14.0f   %s" % (job, row, med(rates[(job, row)]), what))
    print("  ratios:")
    print("  %-6s %-12s %12s %8s %s" % ("job", "ratio", "value", "target", ""))
    for job in jobs:
        r = {row: rates[(job, row)] for row in rows}
        pairs = [("jit/step", "jit", "step", 100), ("jit/lackey", "jit", "lackey", 1),
                 ("jit/qemu", "jit", "qemu", 1), ("lackey/step", "lackey", "step", None),
                 ("qemu/step", "qemu", "step", None)]
        for name, x, y, target in pairs:
            if x in r and y in r:
                # the median of per-round ratios: a slow round slows both sides
                ratio = med([p / q for p, q in zip(r[x], r[y])])
                tgt = ("%d" % target) if target else "-"
                v = verdict(ratio, target, True) if target else ""
                print("  %-6s %-12s %12.2f %8s %s" % (job, name, ratio, tgt, v))
    for n in notes:
        print("  note: " + n)
    for w in warn:
        print("WARNING: " + w)
    return 1 if warn else 0


if __name__ == "__main__":
    sys.exit(main())

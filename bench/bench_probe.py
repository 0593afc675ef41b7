#!/usr/bin/env python3
"""Cost of `gebpf trace`'s entry traps, probe trap beside page trap, as
ratios measured in one run (issue 9).

    GEBPF_OUTPUT=.output /usr/bin/python3 bench/bench_probe.py [--reps N] [--quick] [-v]

Every variant runs once per round, rounds repeated --reps times, so drift on
a shared machine hits every variant alike; times are medians over the rounds
and each ratio is the median of per-round ratios.  The raw step cost comes
from bench/rawstep (pinned like gebpf): the least of three short runs a round; steps, in-range
instructions and entries from `gebpf trace -v`'s closing stderr line.

  a  range never entered (`--range cold` of hotcall, CPU-bound): gebpf wall
     / native wall, --cold-pairs times a round.
  b  hot-function job (hotcall: CALLS calls of the 7-instruction `hot`):
     gebpf wall / (native wall + in-range instructions x raw step).
  d  entry+exit cost per entry on the same runs: (gebpf wall - native wall -
     in-range instructions x raw step) / entries, in us and in raw steps.
  e  neighbour job (bench/neighbour: `hot` shares its page with `busy`, 1e6
     calls, ~1e8 instructions), `--range hot`: wall / (native wall +
     in-range x raw step + entries x entry cost of d, same round and trap).
     The page trap single-steps busy, so its row uses a smaller job
     (--nb-page-calls), which the probe trap also runs for the comparison.
  f  Debian's /usr/bin/python3 running bench/pyloop.py, `--range
     libc:malloc`: attached (`-p PID --duration S`), the attach's wall /
     (loops done meanwhile x native loop time + in-range x raw step + entries
     x entry cost); launched through `env`: wall / (native wall + in-range x
     raw step + entries x entry cost).  Probe trap only: the page trap would
     single-step every libc function sharing malloc's pages.

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

from benchlib import (GEBPF, OUT, RAWSTEP, Runner, add_common_args, add_hotcall_args, finish, med,
                      verdict)

BENCH = os.path.dirname(os.path.abspath(__file__))
LOOP = os.path.join(OUT, "bench", "loop")
HOTCALL = os.path.join(OUT, "bench", "hotcall")
NEIGHBOUR = os.path.join(OUT, "bench", "neighbour")
PYTHON = "/usr/bin/python3"
PYLOOP = os.path.join(BENCH, "pyloop.py")
HOT_INSNS = 7            # instructions of `hot` (hotcall and neighbour), per call
BUSY_INSNS = 102         # instructions of neighbour's `busy`, per call
TRAPS = ("probes", "pages")


def done_line(out):
    """(loops, seconds) of pyloop's closing "done LOOPS SECONDS" line."""
    for line in out.splitlines():
        if line.startswith("done "):
            _, n, secs = line.split()
            return int(n), float(secs)
    raise SystemExit("bench_probe: pyloop printed no done line")


def attach_python(run, secs):
    """Start pyloop (endless), let it run natively 1 s, then `gebpf trace -p
    PID --range libc:malloc --duration secs`.  Returns (wall of the attach,
    loops pyloop reported during it, stats)."""
    p = subprocess.Popen([PYTHON, PYLOOP, "0", "0.05"], stdout=subprocess.PIPE, text=True)
    reports = []                               # (monotonic, loops), pyloop's own clock

    def reader():
        for line in p.stdout:
            t, n = line.split()
            reports.append((float(t), int(n)))
    th = threading.Thread(target=reader, daemon=True)
    th.start()
    try:
        time.sleep(1.0)
        t0 = time.monotonic()
        wall, stats = run.gebpf_stats(["-p", str(p.pid), "--range", "libc:malloc",
                                       "--duration", str(secs)], None)
        t1 = t0 + wall
        time.sleep(0.3)
    finally:
        p.kill()
        p.wait()
        th.join(timeout=5)
    return wall, loops_between(reports, t0, t1), stats


def loops_between(reports, t0, t1):
    """Loops done between t0 and t1, interpolated from (time, loops) reports."""
    def at(t):
        prev = None
        for r in reports:
            if r[0] >= t:
                if prev is None:
                    return r[1]
                return prev[1] + (r[1] - prev[1]) * (t - prev[0]) / (r[0] - prev[0])
            prev = r
        raise SystemExit("bench_probe: pyloop stopped reporting before the attach ended")
    return at(t1) - at(t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(ap, 3, "small sizes, 1 round (a smoke run)")
    add_hotcall_args(ap, "a/b/d", "b/d", "a")
    ap.add_argument("--nb-calls", type=int, default=10000,
                    help="e: calls of hot in the neighbour job (default 10000)")
    ap.add_argument("--nb-per", type=int, default=100,
                    help="e: calls of busy per call of hot (default 100)")
    ap.add_argument("--nb-page-calls", type=int, default=200,
                    help="e: calls of hot in the smaller job both traps run (default 200)")
    ap.add_argument("--page-reps", type=int, default=1,
                    help="e: rounds that run the page trap's neighbour job (default 1)")
    ap.add_argument("--py-loops", type=int, default=15000,
                    help="f: loops of the launched python run (default 15000)")
    ap.add_argument("--attach-secs", type=int, default=5, help="f: --duration of the attach")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.calls, a.cold_inner, a.nb_calls, a.nb_page_calls = 1, 1000, 20000, 1000, 10
        a.cold_pairs = 1
        a.py_loops, a.attach_secs = 1000, 2
    if min(a.reps, a.cold_pairs, a.calls, a.inner, a.cold_inner, a.nb_calls, a.nb_per, a.nb_page_calls,
           a.py_loops, a.attach_secs) < 1:
        ap.error("counts must be positive")

    if os.geteuid() != 0:
        print("bench_probe: skipped: needs root (ptrace, uprobes, BPF)")
        return 0
    for p in (GEBPF, RAWSTEP, LOOP, HOTCALL, NEIGHBOUR, PYTHON):
        if not os.access(p, os.X_OK):
            raise SystemExit("bench_probe: %s not built (make OUTPUT=%s bench)" % (p, OUT))

    tmp = tempfile.mkdtemp(prefix="gebpf-bench-probe-")
    run = Runner("bench_probe", tmp, a.verbose)
    cold_job = [HOTCALL, str(a.calls), str(a.cold_inner)]
    hot_job = [HOTCALL, str(a.calls), str(a.inner)]
    nb_job = [NEIGHBOUR, str(a.nb_calls), str(a.nb_per)]
    nb_small = [NEIGHBOUR, str(a.nb_page_calls), str(a.nb_per)]
    py_job = ["env", PYTHON, PYLOOP, str(a.py_loops)]
    # t: numbers (medians printed); r: per-round ratios (medians printed);
    # s: the last stats line of each variant (counts for the model lines).
    t, r, s = {}, {}, {}
    warn = []
    clamped = []

    def add(d, k, v):
        d.setdefault(k, []).append(v)

    def traced(key, opts, argv, in_range=None, entries=None):
        wall, st = run.gebpf_stats(opts, argv)
        s[key] = st
        if in_range is not None and st["in_range"] != in_range:
            warn.append("%s: %d in-range instructions, expected %d" % (key, st["in_range"], in_range))
        if entries is not None and st["entries"] != entries:
            warn.append("%s: %d entries, expected %d" % (key, st["entries"], entries))
        return wall, st

    try:
        for rnd in range(a.reps):
            # the raw step cost: the least of three short runs a round (here,
            # before b and before e): a load spike only ever adds to a
            # measurement, and an inflated unit makes every model too kind
            raws = [run.raw_cost([LOOP, "2000"])]
            # (a) never entered: --cold-pairs (native, probes, pages) triples
            for _ in range(a.cold_pairs):
                cn = run.native(cold_job)
                add(t, "a_native", cn)
                for trap in TRAPS:
                    cg, _ = traced("a_" + trap, ["--trap", trap, "--range", "cold"], cold_job, 0, 0)
                    add(t, "a_" + trap, cg)
                    add(r, "a_" + trap, cg / cn)
            # (b)/(d) hot function
            raws.append(run.raw_cost([LOOP, "2000"]))
            hn = run.native(hot_job)
            add(t, "b_native", hn)
            cost, hot_runs = {}, {}
            for trap in TRAPS:
                hg, st = traced("b_" + trap, ["--trap", trap, "--range", "hot"], hot_job,
                                HOT_INSNS * a.calls, a.calls)
                hot_runs[trap] = (hg, st)
                add(t, "b_" + trap, hg)
            raws.append(run.raw_cost([LOOP, "2000"]))
            raw = min(raws)
            add(t, "raw", raw)
            # (b)/(d) on the runs made above, with this round's unit
            for trap in TRAPS:
                hg, st = hot_runs[trap]
                model = hn + st["in_range"] * raw
                d = (hg - model) / st["entries"]
                # the models below take no negative cost (noise), only 0
                cost[trap] = max(d, 0.0)
                if d < 0:
                    clamped.append("round %d: d(%s) = %.1f us < 0, 0 used in its models" %
                                   (rnd + 1, trap, d * 1e6))
                add(t, "b_model_" + trap, model)
                add(r, "b_" + trap, hg / model)
                add(r, "d_" + trap, d)
                add(r, "d_steps_" + trap, d / raw)
            # (e) neighbour, full size: probe trap
            nn = run.native(nb_job)
            eg, st = traced("e_probes", ["--trap", "probes", "--range", "hot"], nb_job,
                            HOT_INSNS * a.nb_calls, a.nb_calls)
            model = nn + st["in_range"] * raw + st["entries"] * cost["probes"]
            add(t, "e_native", nn)
            add(t, "e_probes", eg)
            add(t, "e_model_probes", model)
            add(r, "e_probes", eg / model)
            # (e) neighbour, small size: both traps
            if rnd < a.page_reps:
                ns = run.native(nb_small)
                add(t, "es_native", ns)
                for trap in TRAPS:
                    sg, st = traced("es_" + trap, ["--trap", trap, "--range", "hot"], nb_small,
                                    HOT_INSNS * a.nb_page_calls)
                    model = ns + st["in_range"] * raw + st["entries"] * cost[trap]
                    add(t, "es_" + trap, sg)
                    add(t, "es_model_" + trap, model)
                    add(r, "es_" + trap, sg / model)
            # (f) python, launched through env
            pn, out = run.timed(py_job, "env python3 pyloop")
            loops, secs = done_line(out)
            loop_time = secs / loops
            add(t, "f_native", pn)
            add(t, "f_loop", loop_time)
            pg, st = traced("f_launch", ["--range", "libc:malloc"], py_job)
            model = pn + st["in_range"] * raw + st["entries"] * cost["probes"]
            add(t, "f_launch", pg)
            add(t, "f_model_launch", model)
            add(r, "f_launch", pg / model)
            # (f) python, attached
            aw, done, st = attach_python(run, a.attach_secs)
            s["f_attach"] = st
            model = done * loop_time + st["in_range"] * raw + st["entries"] * cost["probes"]
            add(t, "f_attach", aw)
            add(t, "f_attach_loops", done)
            add(t, "f_model_attach", model)
            add(r, "f_attach", aw / model)
            print("   round %d done" % (rnd + 1), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    T = {k: med(v) for k, v in t.items()}
    R = {k: med(v) for k, v in r.items()}
    raw = T["raw"]
    print("== bench_probe: %d interleaved rounds; times are medians, each ratio the median of "
          "per-round ratios ==" % a.reps)
    print("   raw step (bench/rawstep, pinned like gebpf; least of 3 a round): %.1f us" % (raw * 1e6))
    fmt = "%-2s %-44s %-7s %11s %19s %8s %8s %s"
    print(fmt % ("", "measure", "trap", "gebpf", "baseline", "ratio", "target", ""))

    def row(tag, what, trap, g, base, ratio, target):
        print(fmt % (tag, what, trap, g, base, "%.3f" % ratio,
                     "<= %g" % target if target else "",
                     verdict(ratio, target, False) if target else ""))

    for trap in TRAPS:
        row("a", "never entered, wall (hotcall %d %d)" % (a.calls, a.cold_inner), trap,
            "%.3f s" % T["a_" + trap], "%.3f s native" % T["a_native"], R["a_" + trap], 1.05)
    for trap in TRAPS:
        row("b", "hot function, wall (hotcall %d %d)" % (a.calls, a.inner), trap,
            "%.3f s" % T["b_" + trap], "%.3f s model" % T["b_model_" + trap], R["b_" + trap],
            1.4 if trap == "probes" else None)
    for trap in TRAPS:
        print(fmt % ("d", "entry+exit cost per entry (same runs)", trap,
                     "%.1f us" % (R["d_" + trap] * 1e6), "%.1f us/step" % (raw * 1e6),
                     "%.2f st" % R["d_steps_" + trap], "<= 3" if trap == "probes" else "",
                     verdict(R["d_steps_probes"], 3, False) if trap == "probes" else ""))
    row("e", "neighbour, wall (neighbour %d %d)" % (a.nb_calls, a.nb_per), "probes",
        "%.3f s" % T["e_probes"], "%.3f s model" % T["e_model_probes"], R["e_probes"], 1.2)
    for trap in TRAPS:
        row("e", "neighbour, wall (neighbour %d %d)" % (a.nb_page_calls, a.nb_per), trap,
            "%.3f s" % T["es_" + trap], "%.3f s model" % T["es_model_" + trap], R["es_" + trap],
            None)
    row("f", "python attached %d s, libc:malloc" % a.attach_secs, "probes",
        "%.3f s" % T["f_attach"], "%.3f s model" % T["f_model_attach"], R["f_attach"], 1.2)
    row("f", "python via env, %d loops, libc:malloc" % a.py_loops, "probes",
        "%.3f s" % T["f_launch"], "%.3f s model" % T["f_model_launch"], R["f_launch"], 1.2)

    print("   rows without a target are context: the page trap's figure, and the smaller neighbour "
          "job (gebpf's fixed start-up cost, not in the model, weighs on it)")
    print("   models (counts from gebpf -v of the last round; times medians):")
    for trap in TRAPS:
        st = s["b_" + trap]
        print("   b/d %-6s: native %.4f s + %d in-range x %.1f us; %d single-steps, %d entries" %
              (trap, T["b_native"], st["in_range"], raw * 1e6, st["steps"], st["entries"]))
    st = s["e_probes"]
    print("   e   probes: native %.4f s + %d in-range x raw + %d entries x d(probes); "
          "%d single-steps; job ~%.3g insns, %d busy calls" %
          (T["e_native"], st["in_range"], st["entries"], st["steps"],
           a.nb_calls * (HOT_INSNS + 6 + a.nb_per * (BUSY_INSNS + 3)), a.nb_calls * a.nb_per))
    for trap in TRAPS:
        st = s["es_" + trap]
        print("   e   %-6s (small job, %d round(s)): native %.4f s + %d in-range x raw + %d entries "
              "x d(%s); %d single-steps" % (trap, len(t["es_" + trap]), T["es_native"],
                                           st["in_range"], st["entries"], trap, st["steps"]))
    st = s["f_launch"]
    print("   f   launched: native %.3f s + %d in-range x raw + %d entries x d(probes); "
          "%d single-steps" % (T["f_native"], st["in_range"], st["entries"], st["steps"]))
    st = s["f_attach"]
    print("   f   attached: %.0f loops x %.2f us native loop time + %d in-range x raw + %d entries "
          "x d(probes); %d single-steps" % (T["f_attach_loops"], T["f_loop"] * 1e6,
                                             st["in_range"], st["entries"], st["steps"]))
    for c in clamped:
        print("   note: " + c)
    return finish(warn)


if __name__ == "__main__":
    sys.exit(main())

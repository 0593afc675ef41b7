#!/usr/bin/env python3
"""The translator's stop-free mode, in one process (issue 19; user/jit,
docs/trace.md "A trap without stops (in progress)").

    GEBPF_OUTPUT=.output /usr/bin/python3 bench/bench_nostop.py [--reps N] [--calls N] [--quick]

Runs $GEBPF_OUTPUT/bench/jit_nostop (bench/jit_nostop.c): a 35-instruction
FNV-1a hash patched at its entry by the patch planner's plan, called CALLS
times the ordinary way, through the cache, while a consumer thread drains
and decodes every record; the same calls natively; and 20000 calls with no
consumer (one pass of the ring): the translated code's own cost.  Every
record is checked (exit 1 when one is missing).  The solo run is repeated
with the entry block's owner check, in each form this CPU runs (rdfsbase
where it has FSGSBASE, the TCB at fs:0 anywhere): its cost per call.  No tracer is involved:
the trap that will patch a real target does not exist yet.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    benchlib.add_common_args(ap, 5, "small sizes: checks the harness")
    ap.add_argument("--calls", type=int, default=200000, help="calls (default 200000)")
    a = ap.parse_args()
    calls, reps = (20000, 2) if a.quick else (a.calls, a.reps)
    prog = os.path.join(benchlib.OUT, "bench", "jit_nostop")
    if not os.path.exists(prog):
        raise SystemExit("bench_nostop: %s missing (make bench builds it)" % prog)
    run = benchlib.Runner("bench_nostop", None, a.verbose)

    def measure(check):
        _, out = run.timed([prog, str(calls), str(reps), check], "jit_nostop " + check)
        v = {}
        for line in out.split("\n"):
            for kv in line.split():
                k, _, x = kv.partition("=")
                if k != "check":
                    v[k] = float(x)
        return v

    v = measure("none")
    # The owner check (user/jit/owner.c) in each form this CPU runs: rdfsbase
    # needs FSGSBASE (AT_HWCAP2 bit 1, /proc/cpuinfo's fsgsbase), fs:0 runs
    # anywhere.
    with open("/proc/cpuinfo") as f:
        fsgsbase = any(l.startswith("flags") and " fsgsbase" in l for l in f)
    checked = [(c, measure(c)) for c in (("rdfsbase", "fs0") if fsgsbase else ("fs0",))]
    print("== the stop-free mode in-process: fnv (%d instructions a call), %d calls, median of %d"
          % (v["insns_per_call"], calls, reps))
    print("%-58s %14s" % ("", "value"))
    rows = [
        ("native: instructions/s", "%.0fM" % (v["native_insns_per_s"] / 1e6)),
        ("translated, consumer draining: in-range instructions/s", "%.3gM" % (v["jit_insns_per_s"] / 1e6)),
        ("translated, consumer draining: ns per call (native %.1f)" % v["per_call_ns_native"],
         "%.1f" % v["per_call_ns_jit"]),
        ("translated, consumer draining: overhead ns per call", "%.1f" % v["overhead_ns_per_call"]),
        ("translated, no consumer (%d calls): in-range instructions/s" % v["solo_calls"],
         "%.3gM" % (v["solo_jit_insns_per_s"] / 1e6)),
        ("translated, no consumer: overhead ns per call", "%.1f" % v["solo_overhead_ns_per_call"]),
    ]
    for c, w in checked:
        rows.append(("with the owner check (%s): overhead ns per call, no consumer" % c,
                     "%.1f (%+.1f)" % (w["solo_overhead_ns_per_call"],
                                       w["solo_overhead_ns_per_call"] -
                                       v["solo_overhead_ns_per_call"])))
    if not fsgsbase:
        rows.append(("with the owner check (rdfsbase)", "no FSGSBASE"))
    for name, val in rows:
        print("%-58s %14s" % (name, val))
    print("(every record of every call checked; the entry, the lock, the ret's lookup and the "
          "ring's passes are in the cost)")
    return benchlib.finish([])


if __name__ == "__main__":
    sys.exit(main())

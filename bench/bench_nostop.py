#!/usr/bin/env python3
"""The translator's stop-free mode, in one process (issue 19; user/jit,
docs/trace.md "A trap without stops (in progress)").

    GEBPF_OUTPUT=.output /usr/bin/python3 bench/bench_nostop.py [--reps N] [--calls N] [--quick]

Runs $GEBPF_OUTPUT/bench/jit_nostop (bench/jit_nostop.c): a 35-instruction
FNV-1a hash patched at its entry by the patch planner's plan, called CALLS
times the ordinary way, through the cache, while a consumer thread drains
and decodes every record; the same calls natively; and 20000 calls with no
consumer (one pass of the ring): the translated code's own cost.  Every
record is checked (exit 1 when one is missing).  No tracer is involved:
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
    _, out = run.timed([prog, str(calls), str(reps)], "jit_nostop")
    v = {}
    for line in out.split("\n"):
        for kv in line.split():
            k, _, x = kv.partition("=")
            v[k] = float(x)
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
    for name, val in rows:
        print("%-58s %14s" % (name, val))
    print("(every record of every call checked; the entry, the lock, the ret's lookup and the "
          "ring's passes are in the cost)")
    return benchlib.finish([])


if __name__ == "__main__":
    sys.exit(main())

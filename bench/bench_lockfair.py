#!/usr/bin/env python3
"""How the patch trap's lock shares the range among threads (issue 19;
docs/trace.md "A trap without stops": the lock).

    GEBPF_OUTPUT=.output /usr/bin/python3 bench/bench_lockfair.py [--reps N] [--quick] [--calls N]
        [--threads N] [--gebpf PATH ...]

Traces tests/progs/pt_threads CALLS THREADS (THREADS threads released
together by a barrier, each calling the 10-instruction `traced` CALLS times)
with `--trap patch --range traced --max-events 0`, the trace written to a file, and reads
the order of the calls in it (vt order: the exec line of `traced`'s first
instruction, with its vcpu).  Rows, medians over --reps runs:

  run      the longest run of consecutive calls by one thread (1 is strict
           turn-taking; a lock that lets the releaser take it again gives
           runs of hundreds)
  mean     the mean run length
  behind   when the first thread has made all its calls, the fewest calls
           another thread has made, as a fraction of CALLS (1.0: all
           threads progress together)
  wall     gebpf's wall time (start, trace, end)

Each --gebpf (default: $GEBPF_OUTPUT/gebpf) is measured in turn, the runs
interleaved; a run whose trace lacks calls (records dropped) is said and
not counted.  Needs root (ptrace, uprobes).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import GEBPF, OUT, add_common_args, med  # noqa: E402

PROG = os.path.join(OUT, "progs", "pt_threads")


def calls_in(path):
    """The vcpu of each call of `traced`, in trace order."""
    entry, order = None, []
    with open(path) as f:
        for line in f:
            if not line.startswith('{"t":"exec"'):
                continue
            rec = json.loads(line)
            if entry is None:
                entry = rec["pc"]
            if rec["pc"] == entry:
                order.append(rec["vcpu"])
    return order


def measure(order, calls):
    runs, cur, prev = [], 0, None
    for v in order:
        if v == prev:
            cur += 1
        else:
            if prev is not None:
                runs.append(cur)
            cur, prev = 1, v
    if prev is not None:
        runs.append(cur)
    done, behind = {}, None
    for v in order:
        done[v] = done.get(v, 0) + 1
        if done[v] == calls and behind is None:
            others = [n for k, n in done.items() if k != v]
            others += [0] * (len(set(order)) - 1 - len(others))
            behind = min(others) / calls if others else 1.0
    return max(runs), sum(runs) / len(runs), behind


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(ap, 3, "20000 calls, 1 round (a smoke run)")
    ap.add_argument("--calls", type=int, default=100000)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--gebpf", action="append", help="gebpf binaries to compare")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.calls = 1, 20000
    if os.geteuid() != 0:
        print("bench_lockfair: skipped: needs root (ptrace, uprobes)")
        return 0
    bins = a.gebpf or [GEBPF]
    res, short = {b: [] for b in bins}, {}
    with tempfile.TemporaryDirectory(prefix="gebpf-lockfair-") as tmp:
        out = os.path.join(tmp, "trace")
        for _ in range(a.reps):
            for b in bins:
                t0 = time.monotonic()
                p = subprocess.run([b, "trace", "--trap", "patch", "--range", "traced", "--max-events", "0", "-o", out,
                                    "--", PROG, str(a.calls), str(a.threads)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                if p.returncode:
                    raise SystemExit("bench_lockfair: %s: exit %d: %s" % (b, p.returncode, p.stderr))
                wall = time.monotonic() - t0
                order = calls_in(out)
                if len(order) != a.calls * a.threads:   # (records dropped: the ring's writer gave up)
                    short[b] = short.get(b, 0) + 1
                    print("   %s: %d calls in the trace, not %d: not counted"
                          % (b, len(order), a.calls * a.threads))
                    continue
                res[b].append(measure(order, a.calls) + (wall,))
    print("== bench_lockfair: pt_threads %d calls x %d threads under --trap patch, median of %d; "
          "load average %s ==" % (a.calls, a.threads, a.reps,
                                  " ".join("%.2f" % x for x in os.getloadavg())))
    print("%-40s %8s %8s %8s %8s" % ("gebpf", "run", "mean", "behind", "wall s"))
    for b in bins:
        r = res[b]
        if not r:
            print("%-40s no complete trace" % b[-40:])
            continue
        print("%-40s %8d %8.2f %8.3f %8.2f" % (b[-40:], med([x[0] for x in r]), med([x[1] for x in r]),
                                                med([x[2] for x in r]), med([x[3] for x in r])))
    return 0


if __name__ == "__main__":
    sys.exit(main())

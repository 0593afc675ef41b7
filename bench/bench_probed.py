#!/usr/bin/env python3
"""The patch trap's entries that keep a uprobe (docs/trace.md "The patch
trap", "Entries that keep a uprobe"): a probed entry redirected by the BPF
program against the same entry stopped for gebpf.

    GEBPF_OUTPUT=.output /usr/bin/python3 bench/bench_probed.py [--reps N] [--calls N] [--quick] [-v]

bench/probedcall CALLS (`work`: push, call leaf, pop; --range work-work_ret,
whose last byte is the pop at the return site, so that entry keeps a uprobe,
entered once a call, and the start is patched: 2 entries a call), traced
with --trap patch the default way and with GEBPF_PROBETRAP_NOREDIRECT=1 (the
stop: the kernel runs the instruction out of line, gebpf writes its lines).
Rows, per way:

  insns/s  in-range instructions / gebpf's wall, CALLS calls.
  entry    cost per call in raw steps (both entries with their exits):
           ((gebpf wall - native wall) at CALLS - the same at CALLS/5) /
           (the calls between) / raw step (bench/rawstep over bench/loop,
           least of three a round), bench_traps.py's method.

Where the kernel does not let the uprobe program write ip, both ways are
the stop: the first row says which way gebpf took (its -v line).  Rounds
are interleaved; medians.  Needs root (ptrace, uprobes, BPF).
"""
import argparse
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (GEBPF, OUT, Runner, add_common_args, finish, med,  # noqa: E402
                      trace_stats)

PROG = os.path.join(OUT, "bench", "probedcall")
LOOP = os.path.join(OUT, "bench", "loop")
SENT = re.compile(r"(\d+) entries through its \d+ uprobes .*, (\d+) sent straight")
WAYS = (("redirect", None), ("stop", "1"))


def traced(run, tmp, argv, noredirect):
    """(wall, stats, stops, sent) of gebpf trace -v --trap patch over argv."""
    path, errp = os.path.join(tmp, "t.jsonl"), os.path.join(tmp, "t.err")
    sym = {l.split()[2]: int(l.split()[0], 16) for l in os.popen("nm " + PROG) if
           len(l.split()) == 3}
    rng = "%#x-%#x" % (sym["work"], sym["work_ret"])
    if noredirect:
        os.environ["GEBPF_PROBETRAP_NOREDIRECT"] = noredirect
    try:
        wall, _ = run.timed([GEBPF, "trace", "-v", "--trap", "patch", "--range", rng,
                             "--max-events", "0", "-o", path, "--"] + argv,
                            "gebpf trace", stderr_path=errp)
    finally:
        os.environ.pop("GEBPF_PROBETRAP_NOREDIRECT", None)
    stats = trace_stats(errp)
    m = SENT.search(open(errp, errors="replace").read())
    os.unlink(path)
    os.unlink(errp)
    return wall, stats, int(m.group(1)) if m else -1, int(m.group(2)) if m else -1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(ap, 3, "10000 calls, 1 round: checks the harness")
    ap.add_argument("--calls", type=int, default=100000, help="calls (default 100000)")
    a = ap.parse_args()
    calls, reps = (10000, 1) if a.quick else (a.calls, a.reps)
    for p in (PROG, LOOP):
        if not os.path.exists(p):
            raise SystemExit("bench_probed: %s not built (make bench)" % p)
    tmp = tempfile.mkdtemp(prefix="gebpf-bench-probed-")
    run = Runner("bench_probed", tmp, a.verbose)
    t, warn, taken = {}, [], {}
    try:
        for _ in range(reps):
            raw = min(run.raw_cost([LOOP, "2000"]) for _ in range(3))
            t.setdefault("raw", []).append(raw)
            small, large = [PROG, str(max(1, calls // 5))], [PROG, str(calls)]
            ns, nl = run.native(small), run.native(large)
            for way, env in WAYS:
                ws, ss, _, _ = traced(run, tmp, small, env)
                wl, sl, stops, sent = traced(run, tmp, large, env)
                taken[way] = "redirected (no stop)" if sent > 0 and stops == 0 else \
                    "stopped" if stops > 0 and sent == 0 else "stops %d, sent %d" % (stops, sent)
                if sl["in_range"] != 3 * calls:
                    warn.append("%s: %d in-range instructions, expected %d"
                                % (way, sl["in_range"], 3 * calls))
                t.setdefault(("insns", way), []).append(sl["in_range"] / wl)
                d = ((wl - nl) - (ws - ns)) / (calls - max(1, calls // 5))
                t.setdefault(("entry", way), []).append(d / raw)
                t.setdefault(("entry_us", way), []).append(d * 1e6)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    T = {k: med(v) for k, v in t.items()}
    print("== bench_probed: %d rounds, %d calls (2 entries each: the start patched, the return "
          "site on a uprobe); raw step %.2f us; load average %s ==" % (
              reps, calls, T["raw"] * 1e6, " ".join(open("/proc/loadavg").read().split()[:3])))
    print("%-9s %-22s %14s %24s" % ("way", "gebpf took", "insns/s", "per call (raw steps)"))
    for way, _ in WAYS:
        print("%-9s %-22s %14.0f %14.2f us (%5.2f)" % (way, taken[way], T[("insns", way)],
                                                     T[("entry_us", way)], T[("entry", way)]))
    if taken["redirect"] != "redirected (no stop)":
        print("(this kernel does not let the uprobe program write ip: both ways are the stop)")
    return finish(warn)


if __name__ == "__main__":
    sys.exit(main())

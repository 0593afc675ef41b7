#!/usr/bin/env python3
"""The program's speed once the trace's budget is full (issue 32; docs/trace.md
"Counting after the budget").

    GEBPF_OUTPUT=.output /usr/bin/python3 bench/bench_budget.py [--reps N] [--quick] [-v]
        [--seconds S] [--skip S] [--threads N] [--no-go]

Tracees: bench/budgetjob.c (THREADS threads calling `hot`, a 16-byte FNV-1a
hash: 100 instructions and 17 accesses a call) and, when Debian's golang-go
is installed, the same in Go, bench/budgetgo.go, built here (GOMAXPROCS
THREADS goroutines calling `main.hot`: 151 and 33; Go
preempts them with SIGURG every 10 ms, which lands in the cache).  Each runs
SECONDS (default 4) and counts the calls made after SKIP (default 2: the
default budget of 1,000,000 lines is full long before; a traced run whose -v
does not say the counting mode came on is said and not counted).  Rows, medians over
--reps interleaved rounds:

  native      the calls per second untraced, per wall second and per CPU
              second of the program's threads (this 2-core VM is shared: the
              CPU-second rate is the program's own speed, the wall rate also
              pays for the other load)
  traced      the same under `gebpf trace --range hot` (the patch trap, the
              default --max-events): after the budget, the counting twins
  recording   context: the same with GEBPF_PATCH_NOCOUNT=1 (no twins: every
              instruction recorded under the lock and counted by gebpf, as
              before issue 32), one round

  ratio traced/native, target >= 0.80 (per CPU second; the wall ratio is
  printed beside it).

Exactness: `budgetjob THREADS -CALLS` (a fixed number of calls) traced into
a recording with the default budget has the counts of its meta.json (insns,
read, write, events) of the same run with --max-events 0; a mismatch is a
WARNING (exit 1).  The Go program's counts are printed (against the ones its
code implies) for both, not checked: the recording path loses a few records
of it with or without the budget (docs/benchmarks.md).  Needs root.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import GEBPF, OUT, add_common_args, finish, med, verdict  # noqa: E402

JOB = os.path.join(OUT, "bench", "budgetjob")
GO_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "budgetgo.go")
RATE = re.compile(r"calls (\d+) seconds ([\d.]+) cpu ([\d.]+)")
TARGET = 0.80


def run(cmd, env=None, verbose=False, may_fail=False):
    """(calls/wall s, calls/CPU s, stderr) of one run of a tracee (may_fail:
    None when it did not finish, its own lines on stderr said)."""
    if verbose:
        print("  $ " + " ".join(cmd), file=sys.stderr, flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                       timeout=300)
    m = RATE.search(p.stdout)
    if may_fail and not m:
        own = [x for x in p.stderr.splitlines() if not x.startswith(("gebpf:", "libbpf:"))]
        print("   %s: no result (exit %d): %s" % (os.path.basename(cmd[-4]), p.returncode,
                                                  " | ".join(own[:12])))
        return None
    if p.returncode or not m:
        raise SystemExit("bench_budget: %s: exit %d: %s %s" % (" ".join(cmd), p.returncode,
                                                              p.stdout[-300:], p.stderr[-500:]))
    calls, wall, cpu = int(m.group(1)), float(m.group(2)), float(m.group(3))
    return calls / wall, calls / cpu if cpu > 0 else 0.0, p.stderr


def build_go(tmp):
    if not shutil.which("go"):
        return None
    env = dict(os.environ, HOME=tmp, GOCACHE=os.path.join(tmp, "gocache"),
               GOPATH=os.path.join(tmp, "gopath"), GO111MODULE="off", CGO_ENABLED="0")
    exe = os.path.join(tmp, "budgetgo")
    p = subprocess.run(["go", "build", "-o", exe, GO_SRC], env=env, capture_output=True, text=True)
    if p.returncode:
        print("   (the Go program does not build: %s)" % p.stderr.strip()[-200:])
        return None
    return exe


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(ap, 5, "1 round of 2 s (a smoke run)")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--skip", type=float, default=2.0)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--calls", type=int, default=20000, help="per thread, the exactness runs")
    ap.add_argument("--no-go", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.seconds, a.skip, a.calls = 1, 2.5, 1.5, 10000
    if os.geteuid() != 0:
        print("bench_budget: skipped: needs root (ptrace, uprobes)")
        return 0
    warn = []
    with tempfile.TemporaryDirectory(prefix="gebpf-budget-") as tmp:
        out = os.path.join(tmp, "t.jsonl")
        jobs = [("C", JOB, "hot")]
        go = None if a.no_go else build_go(tmp)
        if go:
            jobs.append(("Go", go, "main.hot"))
        elif not a.no_go:
            print("   (no Go toolchain: `apt-get install golang-go` adds the Go rows)")
        args = [str(a.threads), str(a.seconds), str(a.skip)]
        rows = {}
        for _ in range(a.reps):
            for name, exe, rng in jobs:
                n = run([exe] + args, verbose=a.verbose)
                t = run([GEBPF, "trace", "-v", "--range", rng, "-o", out, "--", exe] + args,
                        verbose=a.verbose, may_fail=True)
                rows.setdefault(name, {"native": [], "traced": []})
                rows[name]["native"].append(n[:2])
                if t is None:
                    warn.append("%s: a traced run did not finish" % name)
                    continue
                if "counting from then on" not in t[2] or "counted by the counting twins" not in t[2]:
                    print("   %s: the budget was not full before the end: not counted" % name)
                    continue
                rows[name]["traced"].append(t[:2])
        for name, exe, rng in jobs:
            env = dict(os.environ, GEBPF_PATCH_NOCOUNT="1")
            r = run([GEBPF, "trace", "--range", rng, "-o", out, "--", exe] + args, env=env,
                    verbose=a.verbose, may_fail=True)
            rows[name]["recording"] = [r[:2]] if r else []
        print("== bench_budget: %d threads calling a 16-byte hash, the calls after %.1f of %.1f s, "
              "median of %d; load average %s ==" % (a.threads, a.skip, a.seconds, a.reps,
                                                    " ".join("%.2f" % x for x in os.getloadavg())))
        print("%-4s %-10s %14s %14s %10s %10s %8s %s" % ("job", "run", "Mcalls/wall s",
                                                          "Mcalls/CPU s", "wall x", "CPU x",
                                                          "target", "verdict"))
        for name, _, _ in jobs:
            nw, nc = med([x[0] for x in rows[name]["native"]]), med([x[1] for x in rows[name]["native"]])
            print("%-4s %-10s %14.2f %14.2f" % (name, "native", nw / 1e6, nc / 1e6))
            for kind in ("traced", "recording"):
                if not rows[name][kind]:
                    warn.append("%s: no traced run reached its budget" % name)
                    continue
                w, c = med([x[0] for x in rows[name][kind]]), med([x[1] for x in rows[name][kind]])
                line = "%-4s %-10s %14.4f %14.4f %10.4f %10.4f" % (name, kind, w / 1e6, c / 1e6, w / nw,
                                                                  c / nc)
                if kind == "traced":
                    line += " %8s %s" % (">=%.2f" % TARGET, verdict(c / nc, TARGET, True))
                print(line)
        # exactness: the deterministic runs, their counts with and without the
        # budget (a recording's meta.json: its trace is zstd)
        for name, exe, rng in jobs:
            fixed = [exe, str(a.threads), "-%d" % a.calls]
            got = {}
            for me in ("0", None):
                rec = os.path.join(tmp, "rec-%s-%s" % (name, me or "default"))
                cmd = [GEBPF, "trace", "--range", rng, "--out", rec]
                cmd += ["--max-events", me] if me else []
                if a.verbose:
                    print("  $ " + " ".join(cmd + ["--"] + fixed), file=sys.stderr, flush=True)
                p = subprocess.run(cmd + ["--"] + fixed, capture_output=True, text=True, timeout=900)
                if p.returncode:
                    raise SystemExit("bench_budget: %s: %s" % (" ".join(cmd), p.stderr[-300:]))
                for x in p.stderr.splitlines():
                    if "ring dropped" in x:
                        print("   %s: %s" % (name, x))
                with open(os.path.join(rec, "meta.json")) as f:
                    got[me] = json.load(f)["trace"]
                shutil.rmtree(rec)
            s0, s1 = got["0"], got[None]
            same = all(s0[k] == s1[k] for k in ("insns", "read", "write", "events"))
            per = {"C": (100, 17), "Go": (151, 33)}[name]  # (instructions, accesses) a call
            want = (per[0] * a.threads * a.calls, per[1] * a.threads * a.calls)
            print("%-4s exact: --max-events 0: insns %d mem %d events %d; default budget: insns %d "
                  "mem %d events %d dropped %d; the code's: insns %d mem %d: %s"
                  % (name, s0["insns"], s0["read"] + s0["write"], s0["events"], s1["insns"],
                     s1["read"] + s1["write"], s1["events"], s1["dropped"], want[0], want[1],
                     "same" if same else "DIFFERENT"))
            if name == "C" and (not same or (s0["insns"], s0["read"] + s0["write"]) != want):
                warn.append("C: the counts after the budget are not those of --max-events 0")
    return finish(warn)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""gebpf's own drain and write throughput under the patch trap (issue 19's
python row depends on it), in trace lines per second.

    GEBPF_OUTPUT=.output /usr/bin/python3 bench/bench_drain.py [--reps N] [--secs S] [--quick] [-v]

bench/shortcall with 2e9 calls runs natively (it never ends within the
bench); `gebpf trace --trap patch -p PID --range fnv --duration S
--max-events 0 -o FILE` attaches to it.  fnv (40 instructions, 7 reads a
call) makes records far faster than gebpf turns them into lines, so its
thread waits on the full ring and what gebpf writes per second is gebpf's
own throughput: the ring drained, each record decoded, its lines made
(exec, read, write) and written.  FILE is on /tmp (the disk's file system,
where bench_traps' python row writes) and on /dev/shm (tmpfs), interleaved,
--reps rounds, medians; and on /tmp once more as `-o /dev/stdout` with the
shell's stdout redirected to it ("/tmp fd"): a descriptor gebpf was given,
which it writes buffered, where a file it opens itself gets its whole 4 KiB
blocks with O_DIRECT (docs/trace-format.md "Writing").  Printed per output:

  lines/s       lines written / gebpf's wall time (set-up and teardown in)
  lines/cpu-s   lines written / gebpf's own CPU time (user + system of gebpf
                and its worker, every thread, from getrusage; the target is
                reaped later and not in it): what the machine's load does
                not change
  ns/line       the same as CPU nanoseconds per line
  share         lines/cpu-s over lines/s: gebpf's CPU per wall second
                (1.0: one core busy)

The ratios printed are the /tmp file's lines/cpu-s over /dev/shm's (the
cost of the disk's file system) and over "/tmp fd"'s (direct over buffered
writes), and the same of lines/s, measured in the same rounds.
Needs root (ptrace).
"""
import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from benchlib import GEBPF, OUT, Runner, add_common_args, finish, last_line, med

SHORT = os.path.join(OUT, "bench", "shortcall")


def cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def one(run, path, secs, given_fd=False):
    """(lines, wall, cpu) of one attach writing to path (given_fd: through
    `-o /dev/stdout`, the shell's stdout redirected to path)."""
    p = subprocess.Popen([SHORT, "2000000000"], stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        c0 = cpu_children()
        cmd = [GEBPF, "trace", "--trap", "patch", "-p", str(p.pid), "--range", "fnv",
               "--duration", str(secs), "--max-events", "0", "-o"]
        if given_fd:
            cmd = ["sh", "-c", 'exec "$@" /dev/stdout > "$GB_DRAIN_OUT"', "sh"] + cmd
            os.environ["GB_DRAIN_OUT"] = path
        else:
            cmd.append(path)
        wall, _ = run.timed(cmd, "gebpf trace --trap patch -p shortcall")
        cpu = cpu_children() - c0
        lines = last_line(path)["events"]
        os.unlink(path)
    finally:
        p.kill()
        p.wait()
    return lines, wall, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(ap, 3, "1 round of 1 s (a smoke run)")
    ap.add_argument("--secs", type=float, default=3, help="gebpf's --duration (default 3)")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.secs = 1, 1
    if a.reps < 1 or a.secs <= 0:
        ap.error("--reps and --secs must be positive")
    if os.geteuid() != 0:
        print("bench_drain: skipped: needs root (ptrace)")
        return 0
    for x in (GEBPF, SHORT):
        if not os.access(x, os.X_OK):
            raise SystemExit("bench_drain: %s not built (make OUTPUT=%s bench)" % (x, OUT))
    dirs = {"/tmp": tempfile.mkdtemp(prefix="gebpf-bench-drain-")}
    dirs["/tmp fd"] = dirs["/tmp"]
    if os.path.isdir("/dev/shm"):
        dirs["/dev/shm"] = tempfile.mkdtemp(prefix="gebpf-bench-drain-", dir="/dev/shm")
    run = Runner("bench_drain", dirs["/tmp"], a.verbose)
    res = {k: [] for k in dirs}
    warn = []
    try:
        for rnd in range(a.reps):
            for k, d in dirs.items():
                lines, wall, cpu = one(run, os.path.join(d, "drain.jsonl"), a.secs, k == "/tmp fd")
                if lines == 0:
                    warn.append("%s: no line written" % k)
                res[k].append((lines, wall, cpu))
            print("   round %d done" % (rnd + 1), file=sys.stderr, flush=True)
    finally:
        for d in dirs.values():
            shutil.rmtree(d, ignore_errors=True)
    print("== bench_drain: gebpf --trap patch -p shortcall --range fnv --duration %g, %d rounds, "
          "medians; load average %s ==" % (a.secs, a.reps,
                                           " ".join(open("/proc/loadavg").read().split()[:3])))
    fmt = "%-9s %12s %14s %12s %8s %10s"
    print(fmt % ("output", "lines/s", "lines/cpu-s", "cpu ns/line", "share", "lines"))
    per_cpu = {}
    for k, rs in res.items():
        per_cpu[k] = [n / c for n, w, c in rs if c > 0]
        print(fmt % (k, "%.0f" % med([n / w for n, w, c in rs]), "%.0f" % med(per_cpu[k]),
                     "%.0f" % (1e9 / med(per_cpu[k])), "%.2f" % med([c / w for n, w, c in rs]),
                     "%.0f" % med([n for n, w, c in rs])))
    per_wall = {k: [n / w for n, w, c in rs] for k, rs in res.items()}
    for other in ("/dev/shm", "/tmp fd"):
        if other in per_cpu:
            print("   ratio /tmp / %s: lines per cpu-s %.3f, lines/s %.3f" % (
                other, med([x / y for x, y in zip(per_cpu["/tmp"], per_cpu[other])]),
                med([x / y for x, y in zip(per_wall["/tmp"], per_wall[other])])))
    return finish(warn)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Two (or more) gebpf binaries, or any commands, timed interleaved.

    /usr/bin/python3 bench/ab.py [--reps N] 'CMD A' 'CMD B' ...

Runs A B ... A B ... N times (default 11), each as its own process, and
prints per command the median, minimum and maximum wall time and the median
user and system CPU time of the process and its waited-for children
(wait4).  A file named after -o in a command is removed before each of its
runs (so no run pays for truncating the last one's).  On a VM whose speed
moves 2x within minutes, only such interleaved runs compare two builds: a
change is real when its medians move together run after run.

    make OUTPUT=.output-b .output-b/gebpf     # the other build
    /usr/bin/python3 bench/ab.py --reps 15 \\
        '.output-b/gebpf trace --range fnv --max-events 0 -o /dev/shm/t.jsonl -- .output/bench/shortcall 200000' \\
        '.output/gebpf trace --range fnv --max-events 0 -o /dev/shm/t.jsonl -- .output/bench/shortcall 200000'
"""
import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time


def run_once(argv):
    if "-o" in argv[:-1]:
        out = argv[argv.index("-o") + 1]
        if os.path.isfile(out):
            os.unlink(out)
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    return time.monotonic() - t0, ru.ru_utime, ru.ru_stime, os.waitstatus_to_exitcode(status)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("cmds", nargs="+", help="commands, each one quoted argument")
    a = ap.parse_args()
    cmds = [shlex.split(c) for c in a.cmds]
    res = [[] for _ in cmds]
    for _ in range(a.reps):
        for i, argv in enumerate(cmds):
            res[i].append(run_once(argv))
    bad = 0
    for argv, rs in zip(cmds, res):
        wall = [r[0] for r in rs]
        rcs = sorted({r[3] for r in rs})
        bad += rcs != [0]
        print("wall %.3f med %.3f min %.3f max | user %.3f sys %.3f (med)%s  %s" % (
            statistics.median(wall), min(wall), max(wall),
            statistics.median(r[1] for r in rs), statistics.median(r[2] for r in rs),
            "" if rcs == [0] else "  exit %s" % rcs, " ".join(argv)[:100]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

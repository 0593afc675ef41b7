#!/usr/bin/env python3
"""Snapshot of a live process: `gebpf snap -p` against gdb's `gcore` on a
process with 1 GiB of touched (non-zero) memory (tests/progs/snap_mem stall).
The process measures its own longest stall (a thread that wakes every 1 ms
reports the longest time beyond that between two wake-ups), so the freeze is
seen from the inside.  One untimed gebpf run first (the VM's first write of
fresh page-cache memory is slow for whoever comes first), then the runs
alternate in ABBA order (gebpf gcore, gcore gebpf, ...); medians are printed:
  stall: gebpf's <= 50 ms and <= 1/20 of gcore's   (issue 10)
  wall:  gebpf's <= gcore's                         (issue 10)
  size:  allocated/resident <= 1.01                 (issue 4)
Needs root (ptrace).  Env: GEBPF_OUTPUT (default <repo>/.output), BENCH_MIB,
BENCH_RUNS (default 3), BENCH_DIR (where the files go, default the repo)."""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT = os.path.abspath(os.environ.get("GEBPF_OUTPUT", os.path.join(REPO, ".output")))
MIB = int(os.environ.get("BENCH_MIB", "1024"))
RUNS = int(os.environ.get("BENCH_RUNS", "3"))


def rss_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class Target:
    def __init__(self):
        self.p = subprocess.Popen([os.path.join(OUTPUT, "progs", "snap_mem"), "stall", str(MIB)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        if not line.startswith("ready"):
            raise RuntimeError("snap_mem: %r" % line)

    def stall_ms(self):
        """Longest stall since the last call, in ms."""
        self.p.stdin.write("\n")
        self.p.stdin.flush()
        word, us = self.p.stdout.readline().split()
        assert word == "stall_us"
        return int(us) / 1000.0

    def end(self):
        self.p.kill()
        self.p.wait()


def timed(cmd):
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.monotonic() - t0
    if r.returncode:
        raise RuntimeError("%s failed: %s" % (cmd[0], r.stderr.strip()[-300:]))
    return dt


def row(what, mine, base, ratio, target, ok):
    print("%-12s %12s %12s %8s  %-28s %s" % (what, mine, base, ratio, target, "ok" if ok else "MISS"))


def main():
    if os.geteuid() != 0:
        print("bench_snap: skipped: needs root (ptrace)")
        return 0
    gcore = shutil.which("gcore")
    gebpf = os.path.join(OUTPUT, "gebpf")
    t = Target()
    stall = {"gebpf": [], "gcore": []}
    wall = {"gebpf": [], "gcore": []}
    sizes = []
    try:
        rss = rss_bytes(t.p.pid)
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR", REPO)) as d:
            def run_gebpf(i):
                out = os.path.join(d, "b%d.core" % i)
                wall["gebpf"].append(timed([gebpf, "snap", "-p", str(t.p.pid), "-o", out]))
                sizes.append(os.stat(out).st_blocks * 512 / rss)

            def run_gcore(i):
                wall["gcore"].append(timed([gcore, "-o", os.path.join(d, "g"), str(t.p.pid)]))

            timed([gebpf, "snap", "-p", str(t.p.pid), "-o", os.path.join(d, "warm.core")])
            os.unlink(os.path.join(d, "warm.core"))
            for i in range(RUNS):
                order = [("gebpf", run_gebpf), ("gcore", run_gcore)]
                if i % 2:
                    order.reverse()
                for name, run in order:
                    if name == "gcore" and not gcore:
                        continue
                    time.sleep(0.5)
                    t.stall_ms()
                    run(i)
                    time.sleep(0.2)
                    stall[name].append(t.stall_ms())
                    for f in os.listdir(d):
                        os.unlink(os.path.join(d, f))
    finally:
        t.end()
    print("snap -p of %.0f MiB resident, %d runs each, medians (stall in ms as the process saw it)"
          % (rss / 2**20, RUNS))
    print("%-12s %12s %12s %8s  %-28s" % ("measure", "gebpf", "gcore", "ratio", "target"))
    sg = statistics.median(stall["gebpf"])
    wg = statistics.median(wall["gebpf"])
    if gcore:
        sc = statistics.median(stall["gcore"])
        wc = statistics.median(wall["gcore"])
        row("stall ms", "%.1f" % sg, "%.1f" % sc, "%.3f" % (sg / sc), "<= 50 ms and <= 0.050",
            sg <= 50 and sg / sc <= 0.05)
        row("wall s", "%.2f" % wg, "%.2f" % wc, "%.2f" % (wg / wc), "<= 1.00", wg <= wc)
    else:
        print("(gdb's gcore not installed: gebpf's numbers alone)")
        row("stall ms", "%.1f" % sg, "-", "-", "<= 50 ms", sg <= 50)
        row("wall s", "%.2f" % wg, "-", "-", "-", True)
    row("size", "%.4f" % statistics.median(sizes), "-", "-", "allocated/resident <= 1.01",
        statistics.median(sizes) <= 1.01)
    print("raw: gebpf stall %s wall %s; gcore stall %s wall %s" % (
        ["%.1f" % x for x in stall["gebpf"]], ["%.2f" % x for x in wall["gebpf"]],
        ["%.1f" % x for x in stall["gcore"]], ["%.2f" % x for x in wall["gcore"]]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Snapshot capture rate and size: `gebpf snap -p` of a process with 1 GiB of
touched (non-zero) memory.  Prints the medians of RUNS runs: MB/s of resident
memory for the whole command (attach, capture, write, fsync, rename, detach),
and the file's allocated size against the resident size.
Targets (issue 4): >= 1000 MB/s, size <= resident + 1%.
Needs root (ptrace).  Env: GEBPF_OUTPUT (default <repo>/.output), BENCH_MIB."""
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT = os.path.abspath(os.environ.get("GEBPF_OUTPUT", os.path.join(REPO, ".output")))
MIB = int(os.environ.get("BENCH_MIB", "1024"))
RUNS = 3


def rss_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def main():
    if os.geteuid() != 0:
        print("bench_snap: skipped: needs root (ptrace)")
        return 0
    gebpf = os.path.join(OUTPUT, "gebpf")
    target = subprocess.Popen(
        [sys.executable, "-c",
         "import time; b = bytearray(b'\\x5a') * (%d << 20); print('ready', flush=True); time.sleep(600)" % MIB],
        stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout.readline().startswith("ready")
        rss = rss_bytes(target.pid)
        rates, ratios = [], []
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR", REPO)) as d:
            for i in range(RUNS):
                out = os.path.join(d, "b%d.core" % i)
                t0 = time.monotonic()
                r = subprocess.run([gebpf, "snap", "-p", str(target.pid), "-o", out],
                                   capture_output=True, text=True)
                dt = time.monotonic() - t0
                if r.returncode:
                    print("bench_snap: gebpf snap failed: %s" % r.stderr.strip())
                    return 1
                st = os.stat(out)
                rates.append(rss / dt / 1e6)
                ratios.append(st.st_blocks * 512 / rss)
                os.unlink(out)
        print("snap capture: resident %.0f MiB, median %.0f MB/s (target >= 1000; ratio %.2f)"
              % (rss / 2**20, statistics.median(rates), statistics.median(rates) / 1000))
        print("snap size: median allocated/resident %.4f (target <= 1.01)" % statistics.median(ratios))
    finally:
        target.kill()
        target.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())

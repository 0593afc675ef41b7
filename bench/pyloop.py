"""Workload for bench_probe.py (f): a loop building lists of strings, which
reports its own throughput.

    /usr/bin/python3 bench/pyloop.py N [INTERVAL]

Runs N loops (0: until killed).  Each loop builds a list of 40 short strings
and joins them into one string of ~1.2 kB, which CPython allocates with
malloc (objects over 512 bytes bypass its small-object allocator).  Every
INTERVAL seconds (default 0.1) it prints "MONOTONIC LOOPS" (its own
CLOCK_MONOTONIC time, loops done so far) and flushes; at the end it prints
"done LOOPS SECONDS"."""
import sys
import time


def main():
    n = int(sys.argv[1])
    interval = float(sys.argv[2]) if len(sys.argv) > 2 else 0.1
    t0 = time.monotonic()
    nxt = t0 + interval
    loops = 0
    while n == 0 or loops < n:
        parts = [str(loops + i) * 8 for i in range(40)]
        s = "-".join(parts)
        if len(s) < 100:
            raise SystemExit("pyloop: short string")
        loops += 1
        if loops & 63 == 0:
            now = time.monotonic()
            if now >= nxt:
                print("%.6f %d" % (now, loops), flush=True)
                nxt = now + interval
    print("done %d %.6f" % (loops, time.monotonic() - t0), flush=True)


if __name__ == "__main__":
    main()

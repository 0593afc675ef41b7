"""Workload for bench_strfns.py: a Python loop heavy in libc's memcpy and
memmove, which reports its own throughput.

    /usr/bin/python3 bench/pymemcpy.py N [INTERVAL]

Runs N loops (0: until killed).  A loop joins 64 byte strings of 1-4 KiB
into one (each part copied by memcpy), slices it into 64 pieces (a copy
each), grows and shifts a bytearray (memmove), and dumps and loads a small
JSON document.  Every INTERVAL seconds (default 0.1) it prints "MONOTONIC
LOOPS" (its own CLOCK_MONOTONIC time, loops done so far) and flushes; at
the end "done LOOPS SECONDS"."""
import json
import sys
import time

PARTS = [bytes([i % 251]) * (1024 + 48 * i) for i in range(64)]
DOC = {"name": "bench", "items": [{"k": i, "v": "x" * (i % 40)} for i in range(60)]}


def one(loops):
    s = b"".join(PARTS)
    step = len(s) // 64
    pieces = [s[k * step:(k + 1) * step] for k in range(64)]
    ba = bytearray(pieces[loops % 64])
    ba[0:0] = pieces[(loops + 1) % 64][:512]   # (an insert: memmove of the rest)
    del ba[:256]
    doc = json.loads(json.dumps(DOC))
    if len(doc["items"]) != 60 or len(ba) < 256:
        raise SystemExit("pymemcpy: wrong result")


def main():
    n = int(sys.argv[1])
    interval = float(sys.argv[2]) if len(sys.argv) > 2 else 0.1
    t0 = time.monotonic()
    nxt = t0 + interval
    loops = 0
    while n == 0 or loops < n:
        one(loops)
        loops += 1
        if loops & 7 == 0:
            now = time.monotonic()
            if now >= nxt:
                print("%.6f %d" % (now, loops), flush=True)
                nxt = now + interval
    print("done %d %.6f" % (loops, time.monotonic() - t0), flush=True)


if __name__ == "__main__":
    main()

"""svc_python: a Python service for tests/e2e/test_services.py (docs/testing.md
"Services"): 4 threading.Threads checksum ROUNDS rounds each with zlib.crc32
(libz's crc32_z: the range; the GIL is let go around it for buffers of 5 KiB
and more, so the 4 threads run it at once), sleeping 2 ms between rounds until stdin ends
(then flat out: the same work); the main thread prints a heartbeat once a
second; at the end a checksum that depends only on ROUNDS.  Debian's python3 (3.11 in bookworm, 3.9 in the
bullseye chroot of test_services.py: nothing newer is used).

    python3 svc_python.py [ROUNDS]    ready PID / beat N DONE/TOTAL / checksum HEX
"""
import hashlib
import os
import sys
import threading
import time
import zlib

WORKERS = 4
BUF_SIZE = 8 * 1024
CALLS = 8           # crc32 calls a round
MASK = (1 << 64) - 1
hurry = threading.Event()       # stdin has ended: the workers no longer sleep


def read_stdin():
    # os.read: no buffered reader's lock, which a daemon thread still
    # holding it at the interpreter's exit would make fatal
    try:
        while os.read(0, 512):
            pass
    except OSError:
        pass
    hurry.set()


def usage():
    sys.stderr.write("usage: svc_python.py [ROUNDS]\n")
    sys.exit(2)


def work(w, rounds, done, res):
    h = 0
    base = memoryview(hashlib.shake_128(b"%d" % w).digest(2 * BUF_SIZE))
    for r in range(rounds):
        buf = base[(r * 7919) % BUF_SIZE:][:BUF_SIZE]    # depends on (w, r) only
        for c in range(CALLS):
            h = zlib.crc32(buf[c:], h)
        done[w] += 1
        if not hurry.is_set():
            time.sleep(0.002)
    res[w] = h


def main():
    try:
        rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    except ValueError:
        usage()
    if rounds < 1:
        usage()
    threading.Thread(target=read_stdin, daemon=True).start()
    done, res = [0] * WORKERS, [None] * WORKERS
    ts = [threading.Thread(target=work, args=(w, rounds, done, res)) for w in range(WORKERS)]
    for t in ts:
        t.start()
    print("ready %d" % os.getpid(), flush=True)
    start, n = time.monotonic(), 1
    while any(t.is_alive() for t in ts):
        left = start + n - time.monotonic()
        if left <= 0:
            print("beat %d %d/%d" % (n, sum(done), rounds * WORKERS), flush=True)
            n += 1
        else:
            time.sleep(min(left, 0.05))
    c = 0xcbf29ce484222325
    for h in res:
        c = ((c ^ h) * 0x100000001b3) & MASK
    print("checksum %016x" % c, flush=True)


if __name__ == "__main__":
    main()

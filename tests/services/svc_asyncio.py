"""svc_asyncio: a Python asyncio service for tests/e2e/test_services.py
(docs/testing.md "Services"): 4 tasks checksum ROUNDS rounds each with
zlib.crc32 (libz's crc32_z), sleeping 2 ms between rounds until stdin ends
(then only yielding: the same work); stdin is watched by the event loop
itself (add_reader: its epoll), a heartbeat task prints once a second; at
the end a checksum that depends only on ROUNDS.  asyncio keeps the pid its
loop runs under: a resumed one needs `gebpf resume --new-pidns`.

    python3 svc_asyncio.py [ROUNDS]    ready PID / beat N DONE/TOTAL / checksum HEX
"""
import asyncio
import hashlib
import os
import sys
import zlib

WORKERS = 4
BUF_SIZE = 8 * 1024
CALLS = 8           # crc32 calls a round
MASK = (1 << 64) - 1


async def work(w, rounds, done, hurry):
    h = 0
    base = memoryview(hashlib.shake_128(b"%d" % w).digest(2 * BUF_SIZE))
    for r in range(rounds):
        buf = base[(r * 7919) % BUF_SIZE:][:BUF_SIZE]    # depends on (w, r) only
        for c in range(CALLS):
            h = zlib.crc32(buf[c:], h)
        done[w] += 1
        await asyncio.sleep(0 if hurry.is_set() else 0.002)
    return h


async def beats(rounds, done):
    loop = asyncio.get_running_loop()
    start, n = loop.time(), 1
    while True:
        await asyncio.sleep(max(0.0, start + n - loop.time()))
        print("beat %d %d/%d" % (n, sum(done), rounds * WORKERS), flush=True)
        n += 1


async def main(rounds):
    loop = asyncio.get_running_loop()
    hurry = asyncio.Event()

    def on_stdin():
        try:
            data = os.read(0, 512)
        except OSError:
            data = b""
        if not data:
            loop.remove_reader(0)
            hurry.set()
    try:
        loop.add_reader(0, on_stdin)
    except (OSError, ValueError, PermissionError):
        hurry.set()     # (a stdin the loop cannot watch: a file, /dev/null)
    done = [0] * WORKERS
    tasks = [asyncio.create_task(work(w, rounds, done, hurry)) for w in range(WORKERS)]
    await asyncio.sleep(0)
    print("ready %d" % os.getpid(), flush=True)
    beat = asyncio.create_task(beats(rounds, done))
    res = await asyncio.gather(*tasks)
    beat.cancel()
    c = 0xcbf29ce484222325
    for h in res:
        c = ((c ^ h) * 0x100000001b3) & MASK
    print("checksum %016x" % c, flush=True)


if __name__ == "__main__":
    try:
        n = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    except ValueError:
        n = 0
    if n < 1:
        sys.stderr.write("usage: svc_asyncio.py [ROUNDS]\n")
        sys.exit(2)
    asyncio.run(main(n))

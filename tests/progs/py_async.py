"""An asyncio event loop of four tasks hashing, for resume tests: prints
"ready PID" when the tasks run, then their four digests (which do not depend
on timing) and "pid N", its os.getpid() at the end.  asyncio's loop keeps the
pid it ran under and refuses to run in another ("no running event loop"): a
resume must keep the pid (gebpf resume --new-pidns).

    python3 py_async.py [ROUNDS]   (default 40000 updates per task)
"""
import asyncio
import hashlib
import os
import sys

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 40000


async def work(n):
    h = hashlib.sha256()
    for i in range(rounds):
        h.update(b"%d:%d" % (n, i))
        if i % 500 == 0:
            await asyncio.sleep(0.001)
    return h.hexdigest()[:16]


async def main():
    tasks = [asyncio.create_task(work(n)) for n in range(4)]
    await asyncio.sleep(0)
    print("ready", os.getpid(), flush=True)
    print(" ".join(await asyncio.gather(*tasks)))
    print("pid", os.getpid())

asyncio.run(main())

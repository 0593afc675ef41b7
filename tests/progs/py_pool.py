"""A ThreadPoolExecutor of four threads hashing, for resume tests: prints
"ready PID" when the pool has work, then the eight digests, which do not
depend on timing.

    python3 py_pool.py [ROUNDS]   (default 60000 updates per task)
"""
import concurrent.futures
import hashlib
import os
import sys

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 60000


def work(n):
    h = hashlib.sha256()
    for i in range(rounds):
        h.update(b"%d:%d" % (n, i))
    return h.hexdigest()[:16]


with concurrent.futures.ThreadPoolExecutor(4) as ex:
    futs = [ex.submit(work, n) for n in range(8)]
    print("ready", os.getpid(), flush=True)
    print(" ".join(f.result() for f in futs))

"""CPU-bound Python for `gebpf sample` tests and benchmarks: SHA-256 of
20 MiB (in libcrypto, through _hashlib) and a sum of squares (in the
interpreter), for SECONDS (default 3) of wall time.

    python3 py_hot.py [SECONDS]
"""
import hashlib
import sys
import time

secs = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
t = time.time()
data = b"x" * (1 << 20)
while time.time() - t < secs:
    h = hashlib.sha256()
    for i in range(20):
        h.update(data)
    s = sum(i * i for i in range(200000))

"""kmatrix's Python program (check "python", docs/kmatrix.md): Debian 12's
/usr/bin/python3.11 runs it under `gebpf sample`, whose stacks must show its
functions among the interpreter's native frames.

    python3.11 kmpy.py <FIFO

Until its stdin ends (the smoke suite holds the fifo open until gebpf is
done: gebpf names the code objects of the samples it reads by reading them
from the process, which must still be there, and a slow guest may take
seconds to attach), work() calls sort(), which has the C sort call key()
for each element (a Python frame below native ones: list.sort, then
_PyEval_EvalFrameDefault again), and digest(), which hashes 64 KiB with
hashlib (libcrypto's frames below a Python one, the GIL released).  Prints
"kmpy ok CALLS" at the end.
"""
import hashlib
import select
import sys

DATA = bytes(range(256)) * 256


def key(x):
    return (x * 7919) % 10007


def sort(n):
    return sorted(range(n), key=key)


def digest(data):
    return hashlib.sha256(data).digest()


def work(stdin):
    calls = 0
    while not select.select([stdin], [], [], 0)[0]:
        sort(1000)
        digest(DATA)
        calls += 1
    return calls


if __name__ == "__main__":
    calls = work(sys.stdin)
    sys.stdin.read()
    print("kmpy ok %d" % calls)

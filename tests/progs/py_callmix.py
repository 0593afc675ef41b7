"""A Python program with a known call tree, for `gebpf sample`'s Python
frames (tests/e2e/test_sample_python.py, bench/bench_sample.py).

    python3 py_callmix.py SECONDS [REF.json] [--fork]
    python3 py_callmix.py --rounds N
    python3 py_callmix.py --threads SECONDS

main() calls three functions in rounds: spin() (integer arithmetic in the
interpreter), build() (dicts and str(): the interpreter and its C
functions) and digest() (hashlib.sha256 of 1 MiB buffers: libcrypto, GIL
released).  Their loop counts are calibrated at start so that they take
about 50%, 30% and 20% of the CPU time; the shares the run actually had,
measured by the program itself (time.thread_time() around each call), are
written to REF.json: {"spin": share, "build": share, "digest": share,
"cpu_s": total}.  With --fork the work runs in a forked child (the parent
waits), which writes REF.json.  With --rounds N (bench/bench_sample.py) it
runs N rounds of fixed loop counts instead and prints its own wall and CPU
time, {"ns": ..., "cpu_ns": ...}, as its last line.  With --threads,
spin() and digest() run in two threads of their own for SECONDS while the
main thread waits in join().
"""
import hashlib
import json
import os
import sys
import time

BUF = b"\x5a" * (1 << 20)
TARGET = {"spin": 0.50, "build": 0.30, "digest": 0.20}


def spin(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def build(n):
    d = {}
    for i in range(n):
        d[i % 97] = str(i)
    return len(d)


def digest(n):
    h = b""
    for _ in range(n):
        h = hashlib.sha256(BUF).digest()
    return h


FUNCS = {"spin": spin, "build": build, "digest": digest}


def per_unit():
    """CPU seconds of one unit of work (one loop count) of each function."""
    units = {"spin": 20000, "build": 10000, "digest": 2}
    cost = {}
    for name, f in FUNCS.items():
        best = None
        for _ in range(3):
            t = time.thread_time()
            f(units[name])
            dt = (time.thread_time() - t) / units[name]
            best = dt if best is None else min(best, dt)
        cost[name] = best
    return cost


def run(seconds, ref):
    cost = per_unit()
    round_s = 0.05
    counts = {k: max(1, round(TARGET[k] * round_s / cost[k])) for k in FUNCS}
    spent = dict.fromkeys(FUNCS, 0.0)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for name, f in FUNCS.items():
            t = time.thread_time()
            f(counts[name])
            spent[name] += time.thread_time() - t
    total = sum(spent.values())
    out = {k: v / total for k, v in spent.items()}
    out["cpu_s"] = total
    if ref:
        with open(ref, "w") as fh:
            json.dump(out, fh)


def fixed(rounds):
    t, c = time.monotonic_ns(), time.process_time_ns()
    for _ in range(rounds):
        spin(40000)
        build(12000)
        digest(1)
    print(json.dumps({"ns": time.monotonic_ns() - t, "cpu_ns": time.process_time_ns() - c}))


def threads(seconds):
    import threading
    end = time.monotonic() + seconds

    def loop(f, n):
        while time.monotonic() < end:
            f(n)

    ts = [threading.Thread(target=loop, args=(spin, 20000), name="spinner"),
          threading.Thread(target=loop, args=(digest, 1), name="digester")]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def main():
    if sys.argv[1:2] == ["--threads"]:
        threads(float(sys.argv[2]))
        return
    if sys.argv[1:2] == ["--rounds"]:
        fixed(int(sys.argv[2]))
        return
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    ref = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] != "--fork" else None
    if "--fork" in sys.argv:
        pid = os.fork()
        if pid == 0:
            run(seconds, ref)
            os._exit(0)
        os.waitpid(pid, 0)
        return
    run(seconds, ref)


if __name__ == "__main__":
    main()

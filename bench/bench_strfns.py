#!/usr/bin/env python3
"""glibc's string functions under the patch trap (issue 34; docs/trace.md
"The patch trap", "A short jump and its trampoline").

    GEBPF_OUTPUT=.output /usr/bin/python3 bench/bench_strfns.py [--reps N] [--quick] [-v]
        [--seconds S]

Two parts:

  entries    tests/progs/libc_strings.c (dynamic, -fno-builtin: the IFUNC
             variants glibc picks for this CPU) traced once per function,
             `gebpf trace -v --range libc:F -- libc_strings 3`: the entries patched, those that
             keep a uprobe, and -v's reason for each kept one.  The CPU's
             maker is printed: Intel and AMD get other variants.
  memcpy     bench/pymemcpy.py (Debian's python3: bytes joins and slices,
             bytearray inserts, json), its loops per second over a window of
             S seconds (default 4), native and under `gebpf trace -p PID
             --range libc:memcpy` (the default budget, -o /dev/null; the
             window from 1 s after -v says the patches are in, so the budget
             is full), and with --max-events 0 into a file (every
             instruction recorded).  Interleaved rounds, medians.

  ratio traced/native with the budget, target >= 0.80.  A run whose -v
  says an entry of memcpy keeps a uprobe is a WARNING (exit 1).  Needs
  root.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import GEBPF, OUT, add_common_args, finish, med, verdict  # noqa: E402

JOB = os.path.join(OUT, "progs", "libc_strings")
PY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pymemcpy.py")
FUNCS = ("memcpy", "memmove", "mempcpy", "memset", "memcmp", "memchr", "strlen", "strnlen",
         "strcmp", "strncmp", "strchr", "strrchr", "strcpy", "stpcpy")
PATCHED = re.compile(r"patch trap: (\d+) entries patched, (\d+) probed")
KEPT = re.compile(r"the entry at (0x[0-9a-f]+) keeps a uprobe \((.*)\)$")
SHORT = re.compile(r"the entry at (0x[0-9a-f]+) gets a 2-byte jump")
TARGET = 0.80


def cpu_maker():
    with open("/proc/cpuinfo") as f:
        for ln in f:
            if ln.startswith("vendor_id"):
                v = ln.split(":", 1)[1].strip()
                return {"GenuineIntel": "Intel", "AuthenticAMD": "AMD"}.get(v, v)
    return "?"


def entries(verbose):
    """{function: (patched, probed, short, [kept reasons])}."""
    out = {}
    for f in FUNCS:
        r = subprocess.run([GEBPF, "trace", "-v", "--range", "libc:" + f, "-o", os.devnull, "--",
                            JOB, "3"], capture_output=True, text=True, timeout=120)
        if verbose:
            print("  $ gebpf trace -v --range libc:%s -- libc_strings 3: exit %d" % (f, r.returncode),
                  file=sys.stderr)
        m = PATCHED.search(r.stderr)
        if r.returncode or not m:
            out[f] = None
            continue
        kept = [("%s: %s" % k.groups()) for k in
                (KEPT.search(ln) for ln in r.stderr.splitlines()) if k]
        short = sum(1 for ln in r.stderr.splitlines() if SHORT.search(ln))
        out[f] = (int(m.group(1)), int(m.group(2)), short, kept)
    return out


def window(proc, t_from, seconds):
    """Loops per second of pymemcpy between its first report at or after
    t_from (monotonic) and the last before t_from + seconds."""
    first = last = None
    while True:
        ln = proc.stdout.readline()
        if not ln:
            break
        parts = ln.split()
        if len(parts) != 2 or parts[0] == "done":
            continue
        t, n = float(parts[0]), int(parts[1])
        if t < t_from:
            continue
        if first is None:
            first = (t, n)
        if t > t_from + seconds:
            break
        last = (t, n)
    if not first or not last or last[0] <= first[0]:
        return None
    return (last[1] - first[1]) / (last[0] - first[0])


def one(mode, seconds, tmp, verbose):
    """Loops/s of pymemcpy: native, budget (default budget, -o /dev/null)
    or all (--max-events 0 into a file); (rate, what -v said) or (None, why)."""
    p = subprocess.Popen(["/usr/bin/python3", PY, "0"], stdout=subprocess.PIPE, text=True)
    g = None
    try:
        p.stdout.readline()     # (running)
        if mode == "native":
            return window(p, time.monotonic() + 1.0, seconds), ""
        args = ["--max-events", "0", "-o", os.path.join(tmp, "all.jsonl")] if mode == "all" \
            else ["-o", os.devnull]
        err = open(os.path.join(tmp, "err.txt"), "w+")
        g = subprocess.Popen([GEBPF, "trace", "-v", "-p", str(p.pid), "--range", "libc:memcpy",
                              "--duration", "%.1f" % (seconds + 4)] + args,
                             stdout=subprocess.DEVNULL, stderr=err)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60 and g.poll() is None:
            err.seek(0)
            if "entries patched" in err.read():
                break
            time.sleep(0.05)
        rate = window(p, time.monotonic() + 1.0, seconds)
        g.wait(timeout=120)
        err.seek(0)
        said = err.read()
        if verbose:
            print(said[-1500:], file=sys.stderr)
        return rate, said
    finally:
        for q in (g, p):
            if q is not None and q.poll() is None:
                q.kill()
                q.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(ap, reps=3, quick=1)
    ap.add_argument("--seconds", type=float, default=4.0)
    a = ap.parse_args()
    reps = 1 if a.quick else a.reps
    warn = []
    if os.geteuid() != 0:
        print("bench_strfns: needs root (gebpf trace -p)")
        return 1
    for need in (GEBPF, JOB):
        if not os.access(need, os.X_OK):
            print("bench_strfns: %s not built (make bench progs)" % need)
            return 1
    maker = cpu_maker()
    print("glibc's string functions under the patch trap, this CPU: %s" % maker)
    print("%-10s %8s %8s %8s  %s" % ("function", "patched", "uprobes", "2-byte", "kept, and why"))
    for f, v in entries(a.verbose).items():
        if v is None:
            print("%-10s %8s" % (f, "(no trace: see -v)"))
            warn.append("libc:%s did not trace" % f)
            continue
        print("%-10s %8d %8d %8d  %s" % (f, v[0], v[1], v[2], "; ".join(v[3]) or "-"))
        if f in ("memcpy", "memmove") and v[1]:
            warn.append("libc:%s keeps %d uprobes on %s" % (f, v[1], maker))
    rates = {"native": [], "budget": [], "all": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(reps):
            for mode in ("budget", "native", "all"):
                r, said = one(mode, a.seconds, tmp, a.verbose)
                if r is None:
                    warn.append("%s: no window measured" % mode)
                    continue
                if mode != "native" and re.search(r"keeps a uprobe", said):
                    warn.append("memcpy kept a uprobe under -p (%s)" % mode)
                rates[mode].append(r)
    print()
    print("pymemcpy.py loops/s (median of %d), -p --range libc:memcpy:" % reps)
    for mode, what in (("native", "untraced"), ("budget", "traced, default budget"),
                       ("all", "traced, --max-events 0 to a file")):
        print("  %-34s %10.1f" % (what, med(rates[mode]) if rates[mode] else float("nan")))
    if rates["native"] and rates["budget"]:
        ratio = med(rates["budget"]) / med(rates["native"])
        print("  ratio traced/native (budget)       %10.2f   target >= %.2f  %s"
              % (ratio, TARGET, verdict(ratio, TARGET, True)))
    if rates["native"] and rates["all"]:
        print("  ratio traced/native (every line)   %10.2f   (no target)"
              % (med(rates["all"]) / med(rates["native"])))
    return finish(warn)


if __name__ == "__main__":
    sys.exit(main())

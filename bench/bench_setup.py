#!/usr/bin/env python3
"""bench_setup: the probe trap's set-up and teardown (issue 20, part 2).

Each uprobe's registration and removal waits for the kernel's RCU grace
periods (tens of ms on this VM); the probe trap attaches all of a range's
entries with one uprobe_multi link (Linux 6.10+), so a range pays them
once, not once per entry.  Rows (docs/benchmarks.md "bench_setup.py"):

  s5/s100/s620  gebpf trace -v --range F -- /usr/bin/python3 -S -c PROG for
                three functions of python3.11 with 5, ~100 and 620 entries
                (PyObject_Malloc, PyUnicode_Format, _PyEval_EvalFrameDefault:
                the bytecode loop); set-up = loading the BPF program +
                attaching the entries, teardown = detaching them (gebpf -v's
                own timings); the whole run's wall beside the same run under
                qemu-x86_64 with gebpf's QEMU plugin (.output/gebpf-qemu.so) for the same range
                (start=/end= from gebpf's summary: python3.11 is not PIE)
  py            the s620 run's wall, target <= 5 s; set-up + teardown <= 1 s
  idle          gebpf trace -p PID --range libc:malloc --duration D on a
                sleeping python (the range is never entered): wall / D, <= 1.05
  perf          with GEBPF_PROBETRAP_PERF=1 (the perf-event uprobes of kernels
                without uprobe_multi: 5.10, 6.1), s5 and s100, context

Every time printed is a median over --reps interleaved rounds; ratios are
medians of per-round ratios.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (GEBPF, OUT, Runner, add_common_args, finish, last_line,  # noqa: E402
                      med, verdict)

PY = "/usr/bin/python3"
PROG = "pass"
# the same instructions in every run (str hashes are salted per process)
os.environ["PYTHONHASHSEED"] = "0"
from bench_engines import PLUGIN, QEMU, qemu_plugin
RANGES = (("s5", "PyObject_Malloc"), ("s100", "PyUnicode_Format"),
          ("s620", "_PyEval_EvalFrameDefault"))

_LOADED = re.compile(r"probe trap: BPF program loaded in ([\d.]+) ms")
_ATTACHED = re.compile(r"probe trap: (\d+) probes in \S+ attached in ([\d.]+) ms")
_DETACHED = re.compile(r"probe trap: (\d+) probes detached in ([\d.]+) ms")
_ENTRIES = re.compile(r"probe trap: (\d+) entries in ")
_XOL = re.compile(r"the kernel's uprobe page mapped .* in ([\d.]+) ms")


def probe_times(text):
    """(set-up s, teardown s, entries) from gebpf -v's stderr: every BPF
    load, attach and detach (launch mode's xol reservation, a one-probe
    trap placing the kernel's uprobe page first, is one line of its own:
    counted in set-up whole, its detach included)."""
    setup = sum(float(m) for m in _LOADED.findall(text))
    setup += sum(float(ms) for n, ms in _ATTACHED.findall(text))
    setup += sum(float(ms) for ms in _XOL.findall(text))
    down = sum(float(ms) for n, ms in _DETACHED.findall(text))
    ents = [int(n) for n in _ENTRIES.findall(text)]
    return setup / 1e3, down / 1e3, (ents[-1] if ents else 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(ap, 3, "one round, no perf-event rows")
    ap.add_argument("--idle", type=float, default=2.0, help="idle row: --duration (default 2)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_setup: skipped: needs root (ptrace, BPF, uprobes)")
        return 0
    if not os.path.exists("/usr/bin/python3.11"):
        print("bench_setup: skipped: /usr/bin/python3.11 not installed")
        return 0
    if a.quick:
        a.reps = 1
    warn, notes = [], []
    qemu = shutil.which(QEMU) and os.path.exists(PLUGIN)
    if not qemu:
        notes.append("qemu rows skipped: %s or %s missing (make builds the plugin)"
                     % (QEMU, PLUGIN))
    tmp = tempfile.mkdtemp(prefix="gebpf-bench-setup-")
    run = Runner("bench_setup", tmp, a.verbose)
    res = {}       # (row, variant) -> list of (wall, setup, teardown)
    native, qemu_w, entries, span = [], {}, {}, {}

    def traced(row, fn, env=None):
        path = os.path.join(tmp, "t.jsonl")
        errp = os.path.join(tmp, "t.err")
        cmd = [GEBPF, "trace", "-v", "--range", fn, "--max-events", "0", "-o", path, "--",
               PY, "-S", "-c", PROG]
        if a.verbose:
            print("  $ " + " ".join(cmd), file=sys.stderr, flush=True)
        with open(errp, "w") as err:
            t0 = time.perf_counter()
            r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=err,
                               env=dict(os.environ, **(env or {})), timeout=1800)
            wall = time.perf_counter() - t0
        text = open(errp, errors="replace").read()
        if r.returncode:
            raise SystemExit("bench_setup: %s: exit %d: %s" % (" ".join(cmd), r.returncode,
                                                              text.strip()[-400:]))
        s = last_line(path)
        span[row] = (s["start"], s["end"])
        setup, down, n = probe_times(text)
        entries[row] = n
        if not n:
            warn.append("%s: gebpf -v named no probe-trap entries: %s" % (row, text[-300:]))
        return wall, setup, down, s["insns"]

    sleeper = None
    try:
        for rnd in range(a.reps):
            native.append(run.native([PY, "-S", "-c", PROG]))
            for row, fn in RANGES:
                w, s, d, insns = traced(row, fn)
                res.setdefault((row, "multi"), []).append((w, s, d))
                if qemu:
                    q = os.path.join(tmp, "q.jsonl")
                    lo, hi = span[row]
                    wq, _ = run.timed([QEMU, "-plugin", qemu_plugin(lo, hi, q), PY, "-S", "-c",
                                        PROG], "qemu")
                    qi = last_line(q)["insns"]
                    os.unlink(q)
                    # python's own start-up differs a little under QEMU
                    # (its auxv, /proc/self/exe): the same job within 1%
                    if abs(qi - insns) > insns / 100:
                        warn.append("%s: qemu counts %d in-range instructions, gebpf %d"
                                    % (row, qi, insns))
                    elif qi != insns:
                        notes.append("%s: in-range instructions: gebpf %d, qemu %d"
                                     % (row, insns, qi))
                    qemu_w.setdefault(row, []).append(wq)
                if not a.quick and row != "s620":
                    w, s, d, _ = traced(row, fn, {"GEBPF_PROBETRAP_PERF": "1"})
                    res.setdefault((row, "perf"), []).append((w, s, d))
            sleeper = subprocess.Popen([PY, "-S", "-c", "import time; time.sleep(3600)"])
            time.sleep(0.3)
            w, _ = run.timed([GEBPF, "trace", "-p", str(sleeper.pid), "--range", "libc:malloc",
                              "--duration", str(a.idle), "-o", os.path.join(tmp, "i.jsonl")],
                             "gebpf trace -p (idle)")
            res.setdefault(("idle", "multi"), []).append((w, 0, 0))
            if sleeper.poll() is not None:
                warn.append("idle: the attached python did not survive")
            sleeper.kill()
            sleeper.wait()
            sleeper = None
    finally:
        if sleeper:
            sleeper.kill()
        shutil.rmtree(tmp, ignore_errors=True)

    print("== bench_setup: %d interleaved round(s); times are medians; load average %s =="
          % (a.reps, " ".join(open("/proc/loadavg").read().split()[:3])))
    print("   python3 -S -c %r natively: %.3f s" % (PROG, med(native)))
    print("   %-5s %-6s %8s %10s %10s %10s %10s %10s %8s %9s" %
          ("row", "probes", "entries", "set-up", "teardown", "both", "wall", "qemu", "wall/qemu",
           "target"))
    for row, _ in RANGES:
        for var in ("multi", "perf"):
            v = res.get((row, var))
            if not v:
                continue
            both = med([s + d for _, s, d in v])
            wall = med([w for w, _, _ in v])
            q = qemu_w.get(row) if var == "multi" else None
            ratio = med([w / x for (w, _, _), x in zip(v, q)]) if q else None
            tgt = ""
            if row == "s620" and var == "multi":
                tgt = "both <= 1 s %s, wall <= 5 s %s" % (verdict(both, 1.0, False),
                                                          verdict(wall, 5.0, False))
            print("   %-5s %-6s %8d %9.3fs %9.3fs %9.3fs %9.3fs %10s %8s  %s" %
                  (row, var, entries.get(row, 0), med([s for _, s, _ in v]),
                   med([d for _, _, d in v]), both, wall,
                   ("%.3fs" % med(q)) if q else "-", ("%.2f" % ratio) if ratio else "-", tgt))
    v = res[("idle", "multi")]
    ratio = med([w / a.idle for w, _, _ in v])
    print("   idle  -p PID --range libc:malloc --duration %g: wall %.3f s (least %.3f s), "
          "wall/duration %.3f  <= 1.05 %s" % (a.idle, med([w for w, _, _ in v]),
                                            min(w for w, _, _ in v), ratio,
                                            verdict(ratio, 1.05, False)))
    print("   set-up = BPF program load(s) + attaching the entries (launch mode loads the program"
          " twice: once to place the kernel's uprobe page first); teardown = detaching them")
    print("   multi: one uprobe_multi link per range (6.10+); perf: GEBPF_PROBETRAP_PERF=1, one "
          "perf-event uprobe per entry (5.10/6.1), context")
    for n in sorted(set(notes)):
        print("   note: " + n)
    return finish(warn)


if __name__ == "__main__":
    sys.exit(main())

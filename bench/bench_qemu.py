#!/usr/bin/env python3
"""The whole-trace job (issue 34): every line of a short hash called 200k
times, written by gebpf, by QEMU with gebpf's plugin and by QEMU with a
plain one-file plugin, beside `cat` of the same bytes; ratios measured in
one run.

    GEBPF_OUTPUT=.output /usr/bin/python3 bench/bench_qemu.py [--reps N] [--quick] [-v]

The job: bench/shortcall CALLS (default 200,000 calls of `fnv`, 40
instructions and 7 accesses a call: 9.4 million lines), `--range fnv`,
`--max-events 0`, the trace to a file in --dir (default /dev/shm where it
exists: memory, so what is measured is the writers, not the disk's
writeback of earlier rounds' 500 MB files; each file removed before its run,
so no run pays for truncating the last one's).  Rows, interleaved
(A B C ... A B C ...), medians over --reps rounds:

  gebpf        gebpf trace (its default trap) -o t.jsonl -- shortcall
  gebpf-zst    the same to t.jsonl.zst
  cat          cat t.jsonl > copy (the same bytes, written once more)
  qemu         qemu-x86_64 -plugin gebpf-qemu.so,range=fnv,max_events=0,out=q.jsonl
  qemu-zst     the same to q.jsonl.zst
  plain        qemu-x86_64 -plugin bench/plainplugin.so (bench/plainplugin.c:
               the same lines with fprintf, nothing else)
  native       shortcall alone (context)

Ratios: gebpf / cat (target <= 2), qemu / gebpf and qemu-zst / gebpf-zst
(target >= 1.5: gebpf faster than the emulator writing the same lines),
plain / qemu (target >= 1: gebpf's plugin at least as fast as the plainest
one); lines per second of each.  Checks: gebpf's plugin and the plain one
write the same bytes (the summary aside), and gebpf's trace has as many
exec and access lines.  Needs root (gebpf trace); the QEMU rows are
skipped with a note where qemu-x86_64 or the plugins are missing.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from benchlib import GEBPF, OUT, Runner, finish, med, verdict

SHORT = os.path.join(OUT, "bench", "shortcall")
PLUGIN = os.path.join(OUT, "gebpf-qemu.so")
PLAIN = os.path.join(OUT, "bench", "plainplugin.so")
QEMU = "qemu-x86_64"


def fnv_span():
    """fnv's [start, end] in shortcall (static, no PIE: QEMU runs it there)."""
    out = subprocess.run(["nm", "-S", SHORT], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) == 4 and f[3] == "fnv":
            lo = int(f[0], 16)
            return lo, lo + int(f[1], 16) - 1
    raise SystemExit("bench_qemu: no sized fnv in %s" % SHORT)


def lines_of(path):
    """(lines, bytes) of a trace file, its summary line (gebpf's last) left out."""
    with open(path, "rb") as f:
        data = f.read()
    last = data.rfind(b"\n", 0, len(data) - 1) + 1
    if b'"t":"summary"' in data[last:]:
        data = data[:last]
    return data.count(b"\n"), data


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--calls", type=int, default=200000, help="shortcall's calls (default 2e5)")
    ap.add_argument("--dir", default="/dev/shm" if os.access("/dev/shm", os.W_OK) else "/tmp",
                    help="where the traces go (default /dev/shm, else /tmp)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.calls = 1, 20000
    warn, notes = [], []
    lo, hi = fnv_span()
    job = [SHORT, str(a.calls)]
    qemu = shutil.which(QEMU) and os.path.exists(PLUGIN)
    plain = qemu and os.path.exists(PLAIN)
    if not qemu:
        notes.append("qemu rows skipped: %s or %s missing (qemu-user; make builds the plugin)"
                     % (QEMU, PLUGIN))
    elif not plain:
        notes.append("plain row skipped: %s not built (make bench)" % PLAIN)
    with tempfile.TemporaryDirectory(prefix="gebpf-bench-qemu-", dir=a.dir) as tmp:
        run = Runner("bench_qemu", tmp, a.verbose)
        p = lambda name: os.path.join(tmp, name)

        def to_file(name, argv, what):
            """Seconds of argv(path) writing tmp/NAME (removed first)."""
            if os.path.exists(p(name)):
                os.unlink(p(name))
            return run.timed(argv(p(name)), what)[0]

        gebpf = lambda out: [GEBPF, "trace", "--range", "fnv", "--max-events", "0", "-o", out,
                             "--"] + job
        qemu_with = lambda out: [QEMU, "-plugin", "%s,range=fnv,max_events=0,out=%s" % (
            PLUGIN, out)] + job
        rows = {
            "native": lambda: run.timed(job, "native")[0],
            "gebpf": lambda: to_file("t.jsonl", gebpf, "gebpf trace"),
            "gebpf-zst": lambda: to_file("t.jsonl.zst", gebpf, "gebpf trace zstd"),
            "cat": lambda: to_file("copy", lambda out: ["sh", "-c", 'cat "$1" > "$2"', "sh",
                                                        p("t.jsonl"), out], "cat"),
        }
        if qemu:
            rows["qemu"] = lambda: to_file("q.jsonl", qemu_with, "qemu")
            rows["qemu-zst"] = lambda: to_file("q.jsonl.zst", qemu_with, "qemu zstd")
        if plain:
            rows["plain"] = lambda: to_file("p.jsonl", lambda out: [
                QEMU, "-plugin", "%s,lo=%#x,hi=%#x,out=%s" % (PLAIN, lo, hi, out)] + job,
                "plain plugin")
        times = {k: [] for k in rows}
        for _ in range(a.reps):
            for k, fn in rows.items():
                times[k].append(fn())
        n, _ = lines_of(p("t.jsonl"))
        if qemu:
            nq, q = lines_of(p("q.jsonl"))
            if nq != n:
                warn.append("gebpf wrote %d lines, its QEMU plugin %d" % (n, nq))
            if plain:
                _, pl = lines_of(p("p.jsonl"))
                if pl != q:
                    warn.append("the plain plugin's bytes differ from gebpf's plugin's")
    m = {k: med(v) for k, v in times.items()}
    print("bench_qemu: shortcall %d, --range fnv, %d lines, %d rounds (medians), files in %s" % (
        a.calls, n, a.reps, a.dir))
    for k in rows:
        extra = "" if k == "native" else "  %.1f M lines/s" % (n / m[k] / 1e6)
        print("  %-10s %7.3f s%s" % (k, m[k], extra))
    r = m["gebpf"] / m["cat"]
    print("gebpf / cat: %.2f (target <= 2) %s" % (r, verdict(r, 2.0, False)))
    if qemu:
        for q, g in (("qemu", "gebpf"), ("qemu-zst", "gebpf-zst")):
            r = m[q] / m[g]
            print("%s / %s: %.2f (target >= 1.5) %s" % (q, g, r, verdict(r, 1.5, True)))
    if plain:
        r = m["plain"] / m["qemu"]
        print("plain plugin / gebpf's plugin: %.2f (target >= 1) %s" % (r, verdict(r, 1.0, True)))
    for note in notes:
        print("note: " + note)
    return finish(warn)


if __name__ == "__main__":
    sys.exit(main())

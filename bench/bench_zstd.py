#!/usr/bin/env python3
"""Plain vs zstd trace output on the loop job (issue 22: at least 10x
smaller and no slower than the plain writer).

    GEBPF_OUTPUT=.output /usr/bin/python3 bench/bench_zstd.py [--reps N] [--iter N] [--quick] [-v]

The loop job of bench_engines.py: bench/loop ITER, --range hot (7
instructions a loop, 1 read + 1 write: 9 lines an iteration), traced with
gebpf's defaults (the patch trap, the translating engine) and --max-events
0, the trace written to a file on /tmp (the disk's file system) as
`-o t.jsonl` (plain) and `-o t.jsonl.zst` (zstd, the default level), rounds
interleaved; as context, zstd at levels 2, 3 and -3 and at level 1 with 2 of
libzstd's worker threads (GEBPF_ZSTD_LEVEL / GEBPF_ZSTD_WORKERS, read by
user/record/lines_zstd.c for this).  Printed per row (medians over rounds):

  lines/s     trace lines / wall seconds of the whole gebpf run
  MB/s        the trace's bytes (uncompressed) / the same wall seconds
  cpu-s       user + system seconds of gebpf, its worker and the target
  file MB     the file's size

and the ratios, each the median of the per-round ratios: zstd lines/s over
plain's (target >= 1: no slower) and plain's file size over zstd's (target
>= 10).  Checks: every row's summary counts the same lines (9 ITER + 4
instructions' worth: 7 ITER + 4 exec lines), and the first round's zstd
file decompresses (libzstd, through python/gebpf) to the plain file byte
for byte.  Needs root (ptrace).
"""
import argparse
import hashlib
import os
import resource
import shutil
import sys
import tempfile

from benchlib import GEBPF, OUT, REPO, Runner, add_common_args, finish, last_line, med, verdict

sys.path.insert(0, os.path.join(REPO, "python"))
from gebpf import _zstd  # noqa: E402

LOOP = os.path.join(OUT, "bench", "loop")
# name, file suffix, environment
ROWS = [("plain", ".jsonl", {}),
        ("zstd", ".jsonl.zst", {}),
        ("zstd-2", ".jsonl.zst", {"GEBPF_ZSTD_LEVEL": "2"}),
        ("zstd-3", ".jsonl.zst", {"GEBPF_ZSTD_LEVEL": "3"}),
        ("zstd-w2", ".jsonl.zst", {"GEBPF_ZSTD_WORKERS": "2"}),
        ("zstd--3", ".jsonl.zst", {"GEBPF_ZSTD_LEVEL": "-3"})]


def cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def summary_of(path):
    if path.endswith(".zst"):
        with open(path, "rb") as f:
            import json
            return json.loads(_zstd.last_frame(f).splitlines()[-1])
    return last_line(path)


def sha(chunks):
    h = hashlib.sha256()
    for c in chunks:
        h.update(c)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(ap, 5, "1 round of a small loop job, plain and zstd only (a smoke run)")
    ap.add_argument("--iter", type=int, default=1000000,
                    help="loop iterations (default 1e6: 9e6 lines, ~510 MB plain)")
    ap.add_argument("--dir", default="/tmp", help="where the traces go (default /tmp)")
    ap.add_argument("--rows", default=",".join(r[0] for r in ROWS),
                    help="rows to run, comma-separated (default: all; plain and zstd always)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_zstd: skipped: needs root")
        return 0
    want_rows = set(a.rows.split(",")) | {"plain", "zstd"}
    rows = [r for r in ROWS if r[0] in want_rows]
    if a.quick:
        a.reps, a.iter, rows = 1, 100000, ROWS[:2]
    tmp = tempfile.mkdtemp(prefix="gebpf-bench-zstd-", dir=a.dir)
    run = Runner("bench_zstd", tmp, a.verbose)
    warn = []
    res = {name: {"wall": [], "cpu": [], "size": [], "lines": set()} for name, _, _ in rows}
    plain_bytes = None
    try:
        for rnd in range(a.reps):
            for name, suffix, env in rows:
                path = os.path.join(tmp, "t" + suffix)
                saved = {k: os.environ.get(k) for k in env}
                os.environ.update(env)
                try:
                    c0 = cpu_children()
                    wall, _ = run.timed([GEBPF, "trace", "--range", "hot", "--max-events", "0",
                                         "-o", path, "--", LOOP, str(a.iter)], "gebpf " + name)
                    cpu = cpu_children() - c0
                finally:
                    for k, v in saved.items():
                        if v is None:
                            os.environ.pop(k, None)
                        else:
                            os.environ[k] = v
                s = summary_of(path)
                r = res[name]
                r["wall"].append(wall)
                r["cpu"].append(cpu)
                r["size"].append(os.path.getsize(path))
                r["lines"].add(s["events"])
                if name == "plain":
                    plain_bytes = os.path.getsize(path)
                    if rnd == 0:
                        with open(path, "rb") as f:
                            plain_sha = sha(iter(lambda: f.read(1 << 20), b""))
                elif name == "zstd" and rnd == 0:
                    with open(path, "rb") as f:
                        if sha(_zstd.Stream(f)) != plain_sha:
                            warn.append("the zstd trace does not decompress to the plain one")
                os.unlink(path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    want = 9 * a.iter + 5  # 7 ITER + 4 exec lines, 2 ITER + 1 access lines
    for name, r in res.items():
        if len(r["lines"]) != 1:
            warn.append("%s: line counts vary between rounds: %s" % (name, sorted(r["lines"])))
        if want not in r["lines"]:
            warn.append("%s: %s lines, expected %d" % (name, sorted(r["lines"]), want))
    print("bench_zstd: loop %d (--range hot, %d lines, %.0f MB of plain trace) to %s, median "
          "of %d rounds; load average %s" % (a.iter, want, plain_bytes / 1e6, a.dir, a.reps,
                                             " ".join(open("/proc/loadavg").read().split()[:3])))
    print("  %-8s %12s %9s %8s %9s" % ("output", "lines/s", "MB/s", "cpu-s", "file MB"))
    for name, r in res.items():
        print("  %-8s %12.0f %9.0f %8.2f %9.2f" % (name, want / med(r["wall"]),
                                                  plain_bytes / 1e6 / med(r["wall"]),
                                                  med(r["cpu"]), med(r["size"]) / 1e6))
    print("  ratios:")
    print("  %-28s %8s %8s" % ("ratio", "value", "target"))
    p = res["plain"]
    for name, r in res.items():
        if name == "plain":
            continue
        speed = med([pw / zw for pw, zw in zip(p["wall"], r["wall"])])
        size = med([ps / zs for ps, zs in zip(p["size"], r["size"])])
        if name == "zstd":
            print("  %-28s %8.2f %8s %s" % ("zstd/plain lines/s", speed, "1", verdict(speed, 1, True)))
            print("  %-28s %8.1f %8s %s" % ("plain/zstd file size", size, "10",
                                            verdict(size, 10, True)))
        else:
            print("  %-28s %8.2f %8s" % (name + "/plain lines/s", speed, "-"))
            print("  %-28s %8.1f %8s" % ("plain/" + name + " file size", size, "-"))
    return finish(warn)


if __name__ == "__main__":
    sys.exit(main())

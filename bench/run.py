#!/usr/bin/env python3
"""Run every bench/bench_*.py in one go and print their results (`make bench`).

    GEBPF_OUTPUT=.output /usr/bin/python3 bench/run.py [--quick] [--only NAME ...] [--list]

Each benchmark runs in turn (never two at once: they measure time), with
GEBPF_OUTPUT passed on and the repetition counts below, chosen so that the
whole run stays under ~10 minutes on the 2-core development VM.  Their output
is shown as it comes; a closing table gives each one's exit status and time.
Exit status: 0 when every benchmark exited 0, 1 otherwise.  A benchmark added
as bench/bench_NAME.py is picked up with no change here (run without
arguments unless listed in ARGS).
"""
import argparse
import glob
import os
import platform
import subprocess
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)

# Arguments and environment per benchmark: "full" for `make bench`, "quick"
# for a smoke run of the harness (small sizes, one or two repetitions).
ARGS = {
    "bench_budget.py": {"full": (["--reps", "3"], {}),
                        "quick": (["--quick"], {})},
    "bench_budget_services.py": {"full": (["--reps", "3"], {}),
                                 "quick": (["--quick"], {})},
    "bench_drain.py": {"full": (["--reps", "3"], {}),
                       "quick": (["--quick"], {})},
    "bench_engines.py": {"full": (["--reps", "3"], {}),
                         "quick": (["--quick"], {})},
    "bench_lockfair.py": {"full": (["--reps", "3"], {}),
                          "quick": (["--quick"], {})},
    "bench_nostop.py": {"full": (["--reps", "5"], {}),
                        "quick": (["--quick"], {})},
    "bench_probed.py": {"full": (["--reps", "3"], {}),
                        "quick": (["--quick"], {})},
    "bench_probe.py": {"full": (["--reps", "3"], {}),
                       "quick": (["--quick"], {})},
    "bench_qemu.py": {"full": (["--reps", "3"], {}),
                      "quick": (["--quick"], {})},
    "bench_sample.py": {"full": (["--reps", "5"], {}),
                        "quick": (["--reps", "1", "--work", "100", "--py-rounds", "50"], {})},
    "bench_setup.py": {"full": (["--reps", "3"], {}),
                       "quick": (["--quick"], {})},
    "bench_strfns.py": {"full": (["--reps", "3"], {}),
                        "quick": (["--quick"], {})},
    "bench_snap.py": {"full": ([], {"BENCH_MIB": "1024", "BENCH_RUNS": "3"}),
                      "quick": ([], {"BENCH_MIB": "128", "BENCH_RUNS": "1"})},
    "bench_traps.py": {"full": (["--reps", "3"], {}),
                       "quick": (["--quick"], {})},
    "bench_trace.py": {"full": (["--reps", "7"], {}),
                       "quick": (["--quick"], {})},
    "bench_values.py": {"full": (["--reps", "3"], {}),
                        "quick": (["--quick"], {})},
    "bench_zstd.py": {"full": (["--reps", "3"], {}),
                      "quick": (["--quick"], {})},
}
TIMEOUT = 1500   # seconds, per benchmark


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes: checks the harness, "
                    "not the numbers")
    ap.add_argument("--only", action="append", default=[], metavar="NAME",
                    help="run only benchmarks whose file name contains NAME (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    a = ap.parse_args()

    benches = sorted(glob.glob(os.path.join(BENCH, "bench_*.py")))
    if a.only:
        benches = [b for b in benches if any(n in os.path.basename(b) for n in a.only)]
    if a.list:
        for b in benches:
            print(os.path.basename(b))
        return 0
    if not benches:
        print("bench: no benchmark matches %s" % ", ".join(a.only), file=sys.stderr)
        return 2

    out = os.path.abspath(os.environ.get("GEBPF_OUTPUT", os.path.join(REPO, ".output")))
    profile = "quick" if a.quick else "full"
    print("bench: %d benchmark(s), %s profile, GEBPF_OUTPUT=%s" % (len(benches), profile, out))
    print("bench: kernel %s, %d CPUs, load average %s at start" %
          (platform.release(), os.cpu_count() or 0, loadavg()), flush=True)

    results = []
    t_all = time.monotonic()
    for path in benches:
        name = os.path.basename(path)
        args, extra_env = ARGS.get(name, {}).get(profile, ([], {}))
        env = dict(os.environ, GEBPF_OUTPUT=out, **extra_env)
        cmd = [sys.executable, path] + args
        print("\n### %s %s" % (name, " ".join(args)), flush=True)
        t0 = time.monotonic()
        try:
            rc = subprocess.run(cmd, env=env, cwd=REPO, timeout=TIMEOUT).returncode
            status = "exit %d" % rc
        except subprocess.TimeoutExpired:
            rc, status = 1, "timed out after %d s" % TIMEOUT
        results.append((name, rc, status, time.monotonic() - t0))
        sys.stdout.flush()

    print("\n### summary (load average %s at end)" % loadavg())
    for name, rc, status, dt in results:
        print("%-20s %-22s %7.1f s" % (name, status, dt))
    failed = sum(1 for r in results if r[1] != 0)
    print("bench: %d benchmark(s) run, %d failed, %.0f s in all" %
          (len(results), failed, time.monotonic() - t_all))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

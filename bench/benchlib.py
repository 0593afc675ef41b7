"""Shared machinery of the bench/bench_*.py scripts: paths, the Runner that
times gebpf, native runs and the raw single-step loop, medians and verdicts.
Imported by the scripts next to it (they run with bench/ on sys.path)."""
import json
import os
import re
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.abspath(os.environ.get("GEBPF_OUTPUT", os.path.join(REPO, ".output")))
GEBPF = os.path.join(OUT, "gebpf")
RAWSTEP = os.path.join(OUT, "bench", "rawstep")

# `gebpf trace -v`'s closing line on stderr (user/session/session.c).
# (No single-steps when the step engine did not run: the patch trap's cache.)
_STATS = re.compile(r"trace: (\w+) trap: (?:(\d+) single-steps, )?(\d+) in-range instructions, "
                    r"(\d+) range entries")


class Runner:
    """Runs and times commands for a benchmark called name; a command that
    exits non-zero ends the benchmark (SystemExit)."""

    def __init__(self, name, tmp, verbose):
        self.name = name
        self.tmp = tmp
        self.verbose = verbose

    def timed(self, cmd, what, stderr_path=None):
        """Run cmd; returns (wall seconds, stdout).  stderr goes to
        stderr_path when given (kept), else is captured."""
        if self.verbose:
            print("  $ " + " ".join(cmd), file=sys.stderr, flush=True)
        err = open(stderr_path, "w") if stderr_path else subprocess.PIPE
        try:
            t0 = time.perf_counter()
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, timeout=1800)
            dt = time.perf_counter() - t0
        finally:
            if stderr_path:
                err.close()
        if r.returncode != 0:
            msg = r.stderr if r.stderr is not None else tail(stderr_path)
            raise SystemExit("%s: %s: exit %d: %s" % (self.name, what, r.returncode,
                                                      msg.strip()[-500:]))
        return dt, r.stdout

    def native(self, argv):
        return self.timed(argv, argv[0])[0]

    def rawstep(self, argv):
        """Steps and seconds of the raw single-step loop over argv."""
        _, out = self.timed([RAWSTEP] + argv, "rawstep")
        steps, secs = out.split()
        return int(steps), float(secs)

    def raw_cost(self, argv):
        """Seconds per raw single-step over argv."""
        steps, secs = self.rawstep(argv)
        return secs / steps

    def gebpf(self, opts, argv, keep=None):
        """gebpf trace ... -o FILE -- argv; returns (wall, summary dict, path)."""
        path = keep or os.path.join(self.tmp, "trace.jsonl")
        cmd = [GEBPF, "trace"] + opts + ["--max-events", "0", "-o", path, "--"] + argv
        dt, _ = self.timed(cmd, "gebpf trace " + " ".join(opts))
        summary = last_line(path)
        if keep is None:
            os.unlink(path)
        return dt, summary

    def gebpf_stats(self, opts, argv):
        """gebpf trace -v ... -o FILE [-- argv]; returns (wall, stats) where
        stats = trace_stats() of its stderr.  argv None: opts name the target
        (-p PID)."""
        path = os.path.join(self.tmp, "trace.jsonl")
        errp = os.path.join(self.tmp, "trace.err")
        cmd = [GEBPF, "trace", "-v"] + opts + ["--max-events", "0", "-o", path]
        if argv is not None:
            cmd += ["--"] + argv
        dt, _ = self.timed(cmd, "gebpf trace " + " ".join(opts), stderr_path=errp)
        stats = trace_stats(errp)
        os.unlink(path)
        os.unlink(errp)
        return dt, stats


# Entry traps a benchmark runs when this gebpf takes them: those `gebpf
# trace --help` lists for --trap, and these (a name the binary refuses is
# dropped with its reason).
TRAPS = ("probes", "pages", "none", "patch")


def available_traps(rng, argv):
    """([traps gebpf traces with], [notes on the ones it refuses]).  Each
    candidate is tried once: `gebpf trace --trap T --range RNG --max-insns 1
    -o FILE -- argv`."""
    r = subprocess.run([GEBPF, "trace", "--help"], capture_output=True, text=True, timeout=30)
    m = re.search(r"--trap\s+([\w|]+)", r.stdout + r.stderr)
    listed = m.group(1).split("|") if m else []
    names = list(TRAPS) + [t for t in listed if t not in TRAPS]
    ok, notes = [], []
    for t in names:
        out = "/tmp/gebpf-bench-trap-%d.jsonl" % os.getpid()
        p = subprocess.run([GEBPF, "trace", "--trap", t, "--range", rng, "--max-insns", "1",
                            "-o", out, "--"] + argv, capture_output=True, text=True, timeout=120)
        if os.path.exists(out):
            os.unlink(out)
        if p.returncode == 0:
            ok.append(t)
        else:
            last = (p.stderr.strip().splitlines() or ["no message"])[-1]
            notes.append("--trap %s: skipped: gebpf refuses it (exit %d): %s"
                         % (t, p.returncode, last))
    return ok, notes


def trace_stats(path):
    """The -v stats line of a gebpf trace stderr file: dict trap, steps,
    in_range, entries.  Fails the benchmark when the line is missing."""
    found = None
    with open(path, errors="replace") as f:
        for line in f:
            m = _STATS.search(line)
            if m:
                found = m
    if found is None:
        raise SystemExit("bench: no stats line in gebpf's stderr: %s" % tail(path).strip()[-300:])
    return {"trap": found.group(1), "steps": int(found.group(2) or 0),
            "in_range": int(found.group(3)), "entries": int(found.group(4))}


def tail(path, size=4096):
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - size))
        return f.read().decode(errors="replace")


def last_line(path):
    return json.loads(tail(path).strip().splitlines()[-1])


def add_common_args(ap, reps, quick):
    """--reps (default reps), --quick (help: quick) and -v, which every
    bench_*.py takes."""
    ap.add_argument("--reps", type=int, default=reps,
                    help="interleaved rounds (default %d)" % reps)
    ap.add_argument("--quick", action="store_true", help=quick)
    ap.add_argument("-v", "--verbose", action="store_true", help="print each command on stderr")


def add_hotcall_args(ap, calls_rows, inner_rows, cold_rows):
    """The sizes of the hotcall jobs, which bench_trace and bench_probe share:
    --calls, --inner, --cold-inner, --cold-pairs; each help names the rows
    of the caller's table that use it (calls_rows "a/b/d", ...)."""
    ap.add_argument("--calls", type=int, default=10000,
                    help="%s: calls of hot (default 10000)" % calls_rows)
    ap.add_argument("--inner", type=int, default=2500,
                    help="%s: loop iterations between calls (4 insns each; default 2500)"
                    % inner_rows)
    ap.add_argument("--cold-inner", type=int, default=300000,
                    help="%s: iterations between calls for the CPU-bound run (default 300000)"
                    % cold_rows)
    ap.add_argument("--cold-pairs", type=int, default=3,
                    help="%s: native/traced runs per round (default 3)" % cold_rows)


def finish(warn):
    """Print each distinct warning once ("WARNING: ..."): the exit status
    of a bench_*.py, 1 when there was any."""
    for w in sorted(set(warn)):
        print("WARNING: " + w)
    sys.stdout.flush()
    return 1 if warn else 0


def med(xs):
    return statistics.median(xs)


def verdict(ratio, target, higher_is_better):
    """ok when the ratio meets its target, MISS otherwise."""
    ok = ratio >= target if higher_is_better else ratio <= target
    return "ok" if ok else "MISS"

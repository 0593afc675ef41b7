#!/usr/bin/env python3
"""The services' speed once the trace's budget is full (issue 32's own
measure: "on the Go and Node services"; bench_budget.py has the C job and
a small Go program).

    GEBPF_OUTPUT=.output /usr/bin/python3 bench/bench_budget_services.py [--reps N] [--quick] [-v]
        [--duration S] [--warm S] [--services go,node]

The services of tests/e2e/test_services.py (tests/services/, docs/testing.md
"Services"): svc_go (4 goroutines, GOMAXPROCS 4, FNV-1a over 2 KiB through
main.hashLoop, the range) and svc_node.js (4 worker_threads, zlib.gzipSync
at level 1 over 8 KiB: the range is zlib's deflate_fast where node has its
own zlib with a symbol table, else crc32_z, as the tests choose).  Each
prints `ready PID` and `beat N DONE/TOTAL` once a second; here its stdin is
/dev/null (no 2 ms nap a round: flat out) and its ROUNDS too many to end:
the bench kills it once its window is measured, so a run lasts about
WARM + DURATION + gebpf's start (9-15 s) whatever the machine's speed.

A round, per service (interleaved: traced, native, traced, native, ...):

  traced   the service started, WARM s (default 1) after `ready`, `gebpf
           trace -v -p PID --range R --duration S -o /dev/null` (the default
           budget, --max-events 1,000,000; S default 6).  The window: from
           the first heartbeat 0.5 s after -v says `counting from then on`
           (the budget full, the counting twins on) to the last one 0.3 s
           before the trace's end (its first closing -v line, less the
           `stopped T ms for the end`).  A run whose -v never says it, or
           whose window is under 2 s, is said and not counted.
  native   the same service untraced, its window from the first heartbeat
           whose DONE reaches the traced window's first DONE, over as many
           heartbeats: the same stretch of the service's work (node's JIT
           warms up by the work done, and gebpf's own start, 2-15 s wall
           on node here, takes CPU from it).

The rate: DONE units (rounds of the 4 workers) per wall second between the
window's first and last heartbeat, and per CPU second of the service (utime
+ stime of /proc/PID/stat, every thread of it, read as each heartbeat line
arrives; 10 ms ticks).  Medians of --reps; ratio traced/native, target
>= 0.80 per CPU second (on this shared 2-core VM the wall rate also pays
for other people's load and for gebpf's own CPU; the wall ratio is printed
beside it).  -v: each command, each run's rates, CPUs used and window,
and the end of each trace's -v.  A service whose runtime is missing (no go and no built svc_go,
no node) is said and its rows left out.  Needs root.
"""
import argparse
import mmap
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import GEBPF, OUT, REPO, add_common_args, finish, med, verdict  # noqa: E402

SRC = os.path.join(REPO, "tests", "services")
TARGET = 0.80
BEAT = re.compile(r"^beat (\d+) (\d+)/(\d+)$")
COUNTING = "counting from then on"
TWINS = re.compile(r"(\d+) instructions counted by the counting twins after the budget "
                   r"\((\d+) twins")
END_STOP = re.compile(r"stopped ([\d.]+) ms for the end")
# -v lines printed at the trace's end (the first one bounds the window)
END_LINE = re.compile(r"stopped [\d.]+ ms for the end|the patch trap: \d+ entries|"
                      r"instructions counted by the counting twins|in-range instructions, \d+ "
                      r"range entries")
NOISE = re.compile(r"^libbpf: |^gebpf: trace: thread \d+: signal \d+ |^gebpf: trace: thread \d+ "
                   r"(exited|appeared|started)")
CLK = os.sysconf("SC_CLK_TCK")
AFTER_COUNTING, BEFORE_END, MIN_WINDOW = 0.5, 0.3, 2.0


def cpu_seconds(pid):
    """utime + stime of every thread of pid (its /proc/PID/stat), or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLK


def tracer_pids(pid):
    """The TracerPids of pid's threads that are not 0."""
    out = []
    for t in os.listdir("/proc/%d/task" % pid) if os.path.isdir("/proc/%d" % pid) else []:
        try:
            with open("/proc/%d/task/%s/status" % (pid, t)) as f:
                tp = int(re.search(r"^TracerPid:\s*(\d+)", f.read(), re.M).group(1))
        except (OSError, AttributeError):
            continue
        if tp:
            out.append(tp)
    return out


class Reader:
    """Lines of a stream, each with the time it came (time.monotonic()) and,
    for a heartbeat, the CPU seconds of pid_of() then."""

    def __init__(self, stream, pid_of=None):
        self.lines, self.eof, self.cv = [], False, threading.Condition()
        self.pid_of = pid_of
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream):
        for line in stream:
            t = time.monotonic()
            line = line.rstrip("\n")
            pid = self.pid_of() if self.pid_of else None
            cpu = cpu_seconds(pid) if pid and BEAT.match(line) else None
            with self.cv:
                self.lines.append((t, line, cpu))
                self.cv.notify_all()
        with self.cv:
            self.eof = True
            self.cv.notify_all()

    def wait(self, pred, timeout):
        end = time.monotonic() + timeout
        with self.cv:
            while True:
                for x in self.lines:
                    if pred(x):
                        return x
                left = end - time.monotonic()
                if self.eof or left <= 0:
                    return None
                self.cv.wait(min(left, 0.5))

    def snapshot(self):
        with self.cv:
            return list(self.lines)


class Service:
    def __init__(self, name, argv, rng):
        self.name, self.argv, self.range = name, argv, rng


def go_service(tmp):
    """svc_go: the one `make services` built, else built here; (Service or
    None, why not)."""
    exe = os.path.join(OUT, "services", "svc_go")
    if not os.access(exe, os.X_OK):
        if not shutil.which("go"):
            return None, "no go (Debian: golang-go) and no %s" % exe
        exe = os.path.join(tmp, "svc_go")
        env = dict(os.environ, HOME=tmp, GOCACHE=os.path.join(tmp, "gocache"), GO111MODULE="off",
                   GOPATH=os.path.join(tmp, "gopath"))
        p = subprocess.run(["go", "build", "-o", exe, os.path.join(SRC, "svc_go.go")], env=env,
                           capture_output=True, text=True, timeout=600)
        if p.returncode:
            return None, "svc_go does not build: %s" % p.stderr.strip()[-200:]
    return Service("go", [exe, "100000000"], "main.hashLoop"), None


def node_service(tmp):
    """node svc_node.js; the range as test_services.py's Node picks it."""
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        return None, "no node (Debian: nodejs)"
    with open(os.path.realpath(node), "rb") as f, \
            mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        own = m.find(b"\0deflate_fast\0") >= 0
    return Service("node", [node, os.path.join(SRC, "svc_node.js"), "100000000"],
                   "deflate_fast" if own else "crc32_z"), None


class Run:
    """A service started (stdin /dev/null: flat out), its stdout read."""

    def __init__(self, svc, tmp, verbose):
        if verbose:
            print("  $ " + " ".join(svc.argv), file=sys.stderr, flush=True)
        self.svc = svc
        self.errf = open(os.path.join(tmp, svc.name + ".stderr"), "w+")
        self.p = subprocess.Popen(svc.argv, stdout=subprocess.PIPE, stderr=self.errf,
                                  stdin=subprocess.DEVNULL, text=True, cwd=tmp)
        self.pid = None
        self.out = Reader(self.p.stdout, lambda: self.pid)
        r = self.out.wait(lambda x: x[1].startswith("ready "), 60)
        if r is None:
            self.fail("no `ready` in 60 s")
        self.pid, self.t_ready = int(r[1].split()[1]), r[0]
        if not self.out.wait(lambda x: bool(BEAT.match(x[1])) and int(BEAT.match(x[1]).group(2)),
                             60):
            self.fail("no heartbeat with work done in 60 s")

    def fail(self, what):
        self.kill()
        self.errf.seek(0)
        raise SystemExit("bench_budget_services: %s: %s (stdout %s; stderr %s)" % (
            self.svc.name, what, [x[1] for x in self.out.snapshot()][-5:],
            self.errf.read().strip()[-400:]))

    def until_age(self, age):
        time.sleep(max(0.0, self.t_ready + age - time.monotonic()))

    def beats(self):
        """[(time, DONE, CPU seconds)] of its heartbeats so far."""
        return [(t, int(BEAT.match(ln).group(2)), cpu) for t, ln, cpu in self.out.snapshot()
                if BEAT.match(ln) and cpu is not None]

    def rates(self, beats):
        """(rounds/wall s, rounds/CPU s, (DONE at the first, heartbeat
        intervals), (first age, last age)) from the first heartbeat of beats
        to the last; None when that is under MIN_WINDOW s."""
        if len(beats) < 2 or beats[-1][0] - beats[0][0] < MIN_WINDOW:
            return None
        (t0, d0, c0), (t1, d1, c1) = beats[0], beats[-1]
        return ((d1 - d0) / (t1 - t0), (d1 - d0) / (c1 - c0) if c1 > c0 else 0.0,
                (d0, len(beats) - 1), (t0 - self.t_ready, t1 - self.t_ready))

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        self.errf.close()


def traced(svc, a, tmp):
    """One traced run: (rates or None, -v facts dict, the -v without noise)."""
    s = Run(svc, tmp, a.verbose)
    try:
        s.until_age(a.warm)
        cmd = [GEBPF, "trace", "-v", "-p", str(s.pid), "--range", svc.range, "--duration",
               str(a.duration), "-o", "/dev/null"]
        if a.verbose:
            print("  $ " + " ".join(cmd), file=sys.stderr, flush=True)
        t_start = time.monotonic()
        g = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, text=True)
        err = Reader(g.stderr)
        try:
            rc = g.wait(timeout=a.duration + 180)
        except subprocess.TimeoutExpired:
            g.terminate()
            rc = g.wait()
        t_exit = time.monotonic()
        err.wait(lambda x: False, 5)        # (its last lines)
        lines = err.snapshot()
        text = "\n".join(ln for _, ln, _ in lines if not NOISE.search(ln))
        facts = {"rc": rc, "tracers": tracer_pids(s.pid), "alive": s.p.poll() is None}
        cnt = [t for t, ln, _ in lines if COUNTING in ln]
        facts["patched"] = next((ln.split("patch trap: ", 1)[1] for _, ln, _ in lines
                                 if "entries patched" in ln), None)
        m = TWINS.search(text)
        facts["twins"] = (int(m.group(1)), int(m.group(2))) if m else None
        m = re.search(r"the patch trap: (\d+) entries, (\d+) in-range misses, (\d+) signals", text)
        facts["entries"] = tuple(map(int, m.groups())) if m else None
        if not cnt or rc != 0:
            return None, facts, text
        ends = [t for t, ln, _ in lines if t > cnt[0] and END_LINE.search(ln)] + [t_exit]
        m = END_STOP.search(text)
        t_end = min(ends) - (float(m.group(1)) / 1000 if m else 0.0) - BEFORE_END
        facts["counting_after"] = cnt[0] - t_start
        r = s.rates([b for b in s.beats() if cnt[0] + AFTER_COUNTING <= b[0] <= t_end])
        facts["window"] = r[3][1] - r[3][0] if r else 0.0
        return r, facts, text
    finally:
        s.kill()


def native(svc, at, a, tmp):
    """One untraced run; its window from the first heartbeat with DONE >= at[0]
    (the traced run's at its window's start: the same point of node's
    warm-up, which goes by the work done) over at[1] heartbeat intervals."""
    s = Run(svc, tmp, a.verbose)
    try:
        first = s.out.wait(lambda x: bool(BEAT.match(x[1])) and int(BEAT.match(x[1]).group(2))
                           >= at[0], 120)
        if first is None:
            s.fail("DONE %d not reached in 120 s" % at[0])
        s.out.wait(lambda x: x[0] > first[0] and bool(BEAT.match(x[1])) and
                   int(BEAT.match(x[1]).group(1)) >= int(BEAT.match(first[1]).group(1)) + at[1],
                   at[1] + 10)
        beats = [b for b in s.beats() if b[0] >= first[0]][:at[1] + 1]
        r = s.rates(beats)
        if r is None:
            s.fail("no window of %d heartbeats from DONE %d" % (at[1], at[0]))
        return r
    finally:
        s.kill()


def digest(facts):
    """What -v said of the patch trap, in a few words."""
    out = ["patch trap: %s" % (facts["patched"] or "NOT SET UP")]
    if facts["twins"]:
        out.append("%d twins counted %.3g insns" % (facts["twins"][1], facts["twins"][0]))
    if facts["entries"]:
        out.append("%d recorded entries, %d in-range misses, %d signals out of the cache"
                   % facts["entries"])
    if facts.get("counting_after") is not None:
        out.append("counting on %.1f s after gebpf started" % facts["counting_after"])
    return "; ".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(ap, 3, "1 round, --duration 5 (a smoke run)")
    ap.add_argument("--duration", type=float, default=6.0, help="gebpf's --duration (default 6)")
    ap.add_argument("--warm", type=float, default=1.0,
                    help="seconds after `ready` before gebpf attaches (default 1)")
    ap.add_argument("--services", default="go,node", help="comma-separated (default go,node)")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.duration = 1, 5.0
    if os.geteuid() != 0:
        print("bench_budget_services: skipped: needs root (ptrace, uprobes)")
        return 0
    warn = []
    with tempfile.TemporaryDirectory(prefix="gebpf-budget-svc-") as tmp:
        svcs = []
        for name in a.services.split(","):
            make = {"go": go_service, "node": node_service}.get(name)
            if make is None:
                raise SystemExit("bench_budget_services: no service %r (go, node)" % name)
            svc, why = make(tmp)
            if svc:
                svcs.append(svc)
            else:
                print("   %s: skipped: %s" % (name, why))
        rows = {s.name: {"native": [], "traced": [], "facts": [], "default": None} for s in svcs}
        for rep in range(a.reps):
            for svc in svcs:
                row = rows[svc.name]
                r, facts, text = traced(svc, a, tmp)
                row["facts"].append(facts)
                if a.verbose:
                    print("  %s traced: %s\n%s" % (svc.name, digest(facts),
                                                   "\n".join("    " + x for x in
                                                             text.splitlines()[-14:])),
                          file=sys.stderr, flush=True)
                if facts["tracers"] or not facts["alive"]:
                    warn.append("%s: after the trace: %s" % (
                        svc.name, "still traced by %s" % facts["tracers"] if facts["tracers"]
                        else "the service died"))
                at = r[2] if r else row["default"] or (0, int(a.duration) - 2)
                if r is None:
                    why = ("gebpf exit %s" % facts["rc"] if facts["rc"] else
                           "-v never said `%s`" % COUNTING if "counting_after" not in facts
                           else "a window of %.1f s" % facts.get("window", 0))
                    print("   %s round %d: the traced run is not counted: %s (%s)"
                          % (svc.name, rep + 1, why, digest(facts)))
                else:
                    row["traced"].append(r)
                    row["default"] = r[2]
                n = native(svc, at, a, tmp)
                row["native"].append(n)
                if a.verbose:
                    for kind, x in (("traced", r), ("native", n)):
                        if x:
                            print("  %s %s: %.1f rounds/wall s, %.1f rounds/CPU s (%.2f CPUs), "
                                  "DONE %d + %d beats, ages %.1f-%.1f s" % (
                                      svc.name, kind, x[0], x[1], x[0] / x[1] if x[1] else 0,
                                      x[2][0], x[2][1], x[3][0], x[3][1]),
                                  file=sys.stderr, flush=True)
        print("== bench_budget_services: the services flat out, attached with the default budget "
              "(--duration %g), rounds done a second in the window after the budget is full, "
              "median of %d; load average %s ==" % (a.duration, a.reps, " ".join(
                  "%.2f" % x for x in os.getloadavg())))
        print("%-5s %-14s %-7s %12s %12s %8s %8s %8s %s" % (
            "svc", "range", "run", "rounds/wall", "rounds/CPU", "wall x", "CPU x", "target",
            "verdict"))
        for svc in svcs:
            row = rows[svc.name]
            nw, nc = (med([x[i] for x in row["native"]]) for i in (0, 1))
            print("%-5s %-14s %-7s %12.1f %12.1f" % (svc.name, svc.range, "native", nw, nc))
            if not row["traced"]:
                warn.append("%s: no traced run was counted (%s)" % (svc.name,
                                                                    digest(row["facts"][-1])))
                continue
            w, c = (med([x[i] for x in row["traced"]]) for i in (0, 1))
            print("%-5s %-14s %-7s %12.1f %12.1f %8.3f %8.3f %8s %s" % (
                svc.name, svc.range, "traced", w, c, w / nw, c / nc, ">=%.2f" % TARGET,
                verdict(c / nc, TARGET, True)))
        for svc in svcs:
            row = rows[svc.name]
            wins = [f["window"] for f in row["facts"] if f.get("window")]
            print("   %s: %d of %d traced runs counted, windows %s s; the last -v: %s" % (
                svc.name, len(row["traced"]), len(row["facts"]),
                "/".join("%.1f" % x for x in wins) or "none", digest(row["facts"][-1])))
    return finish(warn)


if __name__ == "__main__":
    sys.exit(main())

"""Harmless without gebpf (issue 32; docs/testing.md "Services"): real
services in the languages people deploy, traced with gebpf's default trap
(the patch trap: jumps written into the service's text, gebpf's code cache
run inside it), snapshotted, sampled, and gebpf killed under them.

Each service (tests/services/: Go, Rust, Java, Node, Debian's python3, and
the same Python service in a bullseye chroot of its own mount namespace) has
4 worker threads doing a fixed amount of work through one hot function (the
range), prints `ready PID`, a heartbeat `beat N DONE/TOTAL` once a second,
and at its end `checksum HEX`, which depends only on the work: the expected
one comes from a native run, once per session.  Its workers sleep 2 ms a
round while its stdin is open: a test closes it after its gebpf commands,
and the rest of the work runs flat out (the native run's stdin is
/dev/null).

While each service runs: `gebpf trace -p PID --range HOT --duration S` (the
patch trap set up, in-range lines written, the summary sane), `gebpf snap -p
PID` (a core gdb and readelf open, one thread each), `gebpf sample -p PID
--duration S --report` (its hot function in the profile); each time the
service keeps its heartbeat and ends with the native checksum.

Then the kill campaigns: SIGKILL of gebpf alone (its worker ends the trace),
of its worker alone, and of both together (a cgroup OOM kill, a container
stop), at a moment of the set-up, of the run or of the end (seed % 3).
After each kill: nothing of the service is traced any more (TracerPid 0 in
every thread), its heartbeat goes on with work done, a second `gebpf trace
-p` of the same range works (exit 0, lines written), and the service ends by
itself with the native checksum.

Each kill test is a campaign (campaign.py, docs/testing.md "Random
campaigns"): in CI the fixed seeds 1..RUNS (one per phase), three runs at a
time; GEBPF_SEEDS=S1,S2 replays seeds, and scripts/soak runs the same
campaigns on fresh seeds for as long as it is told.  GEBPF_CRASH_REPORT=FILE
appends each campaign's counts and every failed run.  GEBPF_CHROOT_DIR
(default /var/cache/gebpf/bullseye-python3.9) is where the bullseye chroot
is made once (mmdebstrap's extract variant, GEBPF_DEBIAN_MIRROR)."""
import concurrent.futures
import fcntl
import json
import os
import random
import re
import shutil
import signal
import subprocess
import threading
import time

import pytest
from elftools.elf.elffile import ELFFile

from conftest import OUTPUT, REPO, check_vt_order, gebpf_path, read_trace
from test_probetrap import tracer_of
from test_trap_crash import PHASES, gone, traced_threads, untraced, worker_of

pytestmark = [pytest.mark.probetrap, pytest.mark.usefixtures("probes_ready")]

SRC = os.path.join(REPO, "tests", "services")
BUILT = os.path.join(OUTPUT, "services")
RUNS = 3           # CI's runs per service and kind of kill: one per phase
CHROOT = os.environ.get("GEBPF_CHROOT_DIR") or "/var/cache/gebpf/bullseye-python3.9"
MIRROR = os.environ.get("GEBPF_DEBIAN_MIRROR") or "http://deb.debian.org/debian"
BEAT_GAP = 8.0      # s without a heartbeat that counts as hung (a beat is due every 1 s)


class Service:
    """One service: how to start it, its range, what its profile names.

    rounds: (while-it-runs tests, kill campaigns), ~10 s and ~30 s of work
    at the pace of a service whose stdin is open (2 ms asleep a round, a few
    percent of a core a worker), so that the service outlives the test's
    gebpf commands (the campaigns': the first trace, the kill, two
    heartbeats, a second trace; gebpf's set-up took up to 37 s on a loaded
    VM), then the test ends its stdin and the service does the rest flat
    out (about a CPU-second; the native run, stdin /dev/null, runs flat
    out all along)."""

    def __init__(self, name, rng, hot, rounds):
        self.name, self.range, self.hot, self.rounds = name, rng, hot, rounds

    def argv(self, rounds):
        raise NotImplementedError

    def missing(self):
        """Why this service cannot run here (a skip's reason), or None."""
        return None

    def gdb_args(self):
        return []


class Built(Service):
    """A program built by tests/services/services.mk."""

    def __init__(self, name, rng, hot, rounds, path, toolchain):
        super().__init__(name, rng, hot, rounds)
        self.path, self.toolchain = path, toolchain

    def argv(self, rounds):
        return [self.path, str(rounds)]

    def missing(self):
        if not os.access(self.path, os.X_OK):
            return "%s not built: no %s (make services; scripts/packages.txt)" % (
                self.path, self.toolchain)
        return None


class Java(Service):
    def argv(self, rounds):
        return [shutil.which("java"), "-cp", os.path.join(BUILT, "java"), "SvcJava", str(rounds)]

    def missing(self):
        if not os.path.exists(os.path.join(BUILT, "java", "SvcJava.class")):
            return "SvcJava.class not built: no javac (make services; Debian: default-jdk-headless)"
        if not shutil.which("java"):
            return "no java on PATH (Debian: default-jdk-headless)"
        return None


class Script(Service):
    def __init__(self, name, rng, hot, rounds, interp, script, package):
        super().__init__(name, rng, hot, rounds)
        self.interp, self.script, self.package = interp, script, package

    def argv(self, rounds):
        return [self.interpreter(), os.path.join(SRC, self.script), str(rounds)]

    def interpreter(self):
        return next((p for p in (shutil.which(i) if "/" not in i else i for i in self.interp)
                     if p and os.access(p, os.X_OK)), None)

    def missing(self):
        if not self.interpreter():
            return "no %s (Debian: %s)" % (" or ".join(self.interp), self.package)
        return None


class Node(Script):
    """Node's range is zlib's: deflate_fast, the hottest function of its
    gzip (a fifth of the samples here), where node has its own zlib with a
    symbol table (upstream and NodeSource builds); else (Debian's nodejs on
    Debian's libz, whose static functions have no symbol) crc32_z, which
    every build exports (a bare symbol: the executable first, then libz)."""

    def missing(self):
        why = super().missing()
        if not why and not self.range:
            with open(os.path.realpath(self.interpreter()), "rb") as f:
                elf = ELFFile(f)
                tab = elf.get_section_by_name(".symtab")
                # (its string table: node's symbol table has 65,000 entries)
                own = tab is not None and b"\0deflate_fast\0" in elf.get_section(
                    tab["sh_link"]).data()
            self.range = self.hot = "deflate_fast" if own else "crc32_z"
        return why


class Chroot(Service):
    """svc_python.py run by bullseye's python3.9 (its libc 2.31, its libz
    1.2.11) in a mount namespace whose root is the chroot (pivot_root): the
    service's /proc/PID/maps name files by their paths inside it, where the
    host has other files or none: gebpf must read them through
    /proc/PID/root."""

    def argv(self, rounds):
        return ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-ec",
                'mount --bind "$1" "$1"; cd "$1"; mount -t proc proc proc; '
                'mkdir -p .oldroot; pivot_root . .oldroot; cd /; umount -l /.oldroot; '
                'exec /usr/bin/python3 /opt/gebpf/svc_python.py "$2"', "sh", CHROOT, str(rounds)]

    def missing(self):
        return chroot_missing()

    def gdb_args(self):
        return ["-ex", "set sysroot " + CHROOT]


# The ranges: what runs hot in each (gebpf sample --report here), and that
# trace -v sees entering (docs/testing.md "Services" has the numbers).
SERVICES = {s.name: s for s in [
    Built("go", "main.hashLoop", "main.hashLoop", (3000, 9000),
          os.path.join(BUILT, "svc_go"), "go (Debian: golang-go)"),
    Built("rust", "hash_loop", "hash_loop", (3600, 10800),
          os.path.join(BUILT, "svc_rust"), "rustc (Debian: rustc)"),
    Java("java", "libz:adler32_z", "adler32_z", (2000, 8000)),
    Node("node", None, None, (1200, 3000), ["node", "nodejs"], "svc_node.js", "nodejs"),
    Script("python", "libz:crc32_z", "crc32_z", (2800, 8400), ["/usr/bin/python3"],
           "svc_python.py", "python3"),
    Chroot("python-bullseye", "libz:crc32_z", "crc32_z", (2800, 8400)),
]}


# --- the bullseye chroot ----------------------------------------------------

_CHROOT = []


def chroot_missing():
    """Make the chroot once (CHROOT_PACKAGES unpacked, ~70 MB); None, or
    why it cannot be had."""
    if _CHROOT:
        return _CHROOT[0]
    why = None
    if not shutil.which("mmdebstrap"):
        why = "mmdebstrap not installed (scripts/packages.txt; Debian: mmdebstrap)"
    elif not (shutil.which("unshare") and shutil.which("pivot_root")):
        why = "no unshare or pivot_root (Debian: util-linux)"
    else:
        why = build_chroot()
    if not why:
        # Put in place whole (a copy to a temporary name, then a rename): a
        # copy over it truncated the file that another xdist worker's
        # service was starting on, and its python3 ran an empty script,
        # exit 0 and not a line (a campaign run "did not start").
        d = os.path.join(CHROOT, "opt", "gebpf")
        os.makedirs(d, exist_ok=True)
        tmp = os.path.join(d, ".svc_python.py.%d" % os.getpid())
        shutil.copy(os.path.join(SRC, "svc_python.py"), tmp)
        os.replace(tmp, os.path.join(d, "svc_python.py"))
    _CHROOT.append(why)
    return why


# What the chroot holds: bullseye's python3.9 (the interpreter and the
# minimal standard library svc_python.py needs: threading, zlib, hashlib)
# and umount, which the service's start runs inside it after pivot_root;
# apt adds their dependencies (libc6 2.31, zlib1g 1.2.11, ...).  They are
# unpacked, not installed (mmdebstrap --variant=extract: no maintainer
# scripts, no dpkg database): 12 CPU s where debootstrap's minbase took 85
# and 250 MB (docs/testing.md "Services").
CHROOT_PACKAGES = ("python3-minimal", "python3.9-minimal", "libpython3.9-minimal", "mount")


def build_chroot():
    done = os.path.join(CHROOT, ".gebpf-complete")
    os.makedirs(os.path.dirname(CHROOT), exist_ok=True)
    with open(CHROOT + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)    # (another session building it)
        if os.path.exists(done):
            return None
        tmp = CHROOT + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        argv = ["mmdebstrap", "--quiet", "--variant=extract",
                "--include=" + ",".join(CHROOT_PACKAGES), "bullseye", tmp, MIRROR]
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
        except subprocess.TimeoutExpired:
            return "mmdebstrap bullseye %s did not finish in 30 min" % MIRROR
        if r.returncode != 0 or not os.access(os.path.join(tmp, "usr/bin/python3"), os.X_OK):
            return "mmdebstrap bullseye %s failed (exit %d): %s" % (
                MIRROR, r.returncode, (r.stderr or r.stdout).strip()[-500:])
        for d in ("proc", "tmp"):     # (the extract variant makes no mount points)
            os.makedirs(os.path.join(tmp, d), exist_ok=True)
        shutil.rmtree(CHROOT, ignore_errors=True)
        os.rename(tmp, CHROOT)
        open(done, "w").close()
    return None


# --- a running service ------------------------------------------------------

BEAT = re.compile(r"beat (\d+) (\d+)/(\d+)$")


class Running:
    """A service started with its stdout read by a thread: every line with
    the time it came (time.monotonic())."""

    def __init__(self, svc, rounds, outdir, tag):
        self.svc, self.rounds = svc, rounds
        self.err = open(os.path.join(outdir, tag + ".service-stderr"), "w+")
        self.cwd = outdir
        self.p = subprocess.Popen(svc.argv(rounds), stdout=subprocess.PIPE, stderr=self.err,
                                  stdin=subprocess.PIPE, cwd=outdir, text=True)
        self.t0 = time.monotonic()
        self.lines, self.eof = [], False
        self.cv = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        self.pid = None

    def _read(self):
        for line in self.p.stdout:
            with self.cv:
                self.lines.append((time.monotonic(), line.rstrip("\n")))
                self.cv.notify_all()
        with self.cv:
            self.eof = True
            self.cv.notify_all()

    def wait_line(self, pred, timeout, after=0.0):
        """The first (time, line) after time AFTER that pred accepts, within
        timeout seconds; None."""
        end = time.monotonic() + timeout
        with self.cv:
            while True:
                for t, ln in self.lines:
                    if t > after and pred(ln):
                        return t, ln
                left = end - time.monotonic()
                if self.eof or left <= 0:
                    return None
                self.cv.wait(min(left, 0.5))

    def beats(self, after=0.0):
        """[(time, n, done)] of the heartbeats after time AFTER."""
        with self.cv:
            return [(t, int(m.group(1)), int(m.group(2))) for t, ln in self.lines if t > after
                    for m in [BEAT.match(ln)] if m]

    def last_beat(self):
        b = self.beats()
        return "'beat %d %d/%d' at +%.1f s" % (b[-1][1], b[-1][2], self.rounds * 4,
                                               b[-1][0] - self.t0) if b else "no beat at all"

    def started(self, timeout=60):
        """Ready and one heartbeat with work done (the range's module is
        mapped by then: Java loads libzip at its first Deflater); the pid."""
        r = self.wait_line(lambda ln: ln.startswith("ready "), timeout)
        assert r, "%s did not start in %d s: %s" % (self.svc.name, timeout, self.describe())
        self.pid = int(r[1].split()[1])
        b = self.wait_line(lambda ln: bool(BEAT.match(ln)) and int(BEAT.match(ln).group(2)) > 0,
                           timeout)
        assert b, "%s: no heartbeat with work done in %d s: %s" % (self.svc.name, timeout,
                                                                  self.describe())
        return self.pid

    def checksum(self):
        with self.cv:
            return next((ln.split()[1] for _, ln in self.lines if ln.startswith("checksum ")),
                        None)

    def stderr_tail(self, n=300):
        """Its stderr's first and last N characters (a Go crash names the
        signal and pc first, then dumps every goroutine)."""
        self.err.flush()
        self.err.seek(0)
        text = self.err.read().strip()
        return text if len(text) <= 2 * n else text[:n] + " ... " + text[-n:]

    def status(self):
        """How the service ended, in words, or None while it runs."""
        rc = self.p.poll()
        if rc is None:
            return None
        if rc < 0:
            return "died of signal %d (%s)" % (-rc, signal.Signals(-rc).name)
        return "exit status %d" % rc

    def describe(self):
        st = self.status()
        err = self.stderr_tail()
        return "%s, last %s%s%s" % (st or "running (threads: %s)" % thread_states(self.pid),
                                    self.last_beat(), "; its stderr: %r" % err if err else "",
                                    hs_err(self.cwd, self.pid))

    def hurry(self):
        """End its stdin: its workers stop sleeping between rounds and do
        the rest of the work flat out (the same work, the same checksum)."""
        if self.p.stdin and not self.p.stdin.closed:
            try:
                self.p.stdin.close()
            except OSError:
                pass    # (it died)

    def finish(self, timeout):
        """Hurry it, and wait for its end; (rc or None when it did not end)."""
        self.hurry()
        try:
            self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        with self.cv:
            while not self.eof:
                self.cv.wait(1)
        return self.p.returncode

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        self.hurry()
        self.err.close()


def thread_states(pid):
    """Its threads by state and kernel wait channel: "4 S futex_wait_queue,
    1 R" (a hung service's threads say where they wait)."""
    seen = {}
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except (OSError, TypeError):
        return "gone"
    for t in tids:
        try:
            with open("/proc/%d/task/%s/stat" % (pid, t)) as f:
                st = f.read().rsplit(")", 1)[1].split()[0]
            with open("/proc/%d/task/%s/wchan" % (pid, t)) as f:
                wchan = f.read().strip()
        except OSError:
            continue
        key = "%s %s" % (st, wchan if wchan not in ("", "0") else "")
        seen[key.strip()] = seen.get(key.strip(), 0) + 1
    return ", ".join("%d %s" % (n, k) for k, n in sorted(seen.items(), key=lambda x: -x[1]))


def hs_err(cwd, pid):
    """What a JVM that died says of it (its hs_err_pidN.log in its working
    directory): the signal and the problematic frame."""
    path = os.path.join(cwd, "hs_err_pid%s.log" % pid)
    if not pid or not os.path.exists(path):
        return ""
    with open(path, errors="replace") as f:
        text = f.read(20000)
    keep = re.findall(r"^# +(?:SIG\w+|Internal Error|Problematic frame:).*$|^# (?:[CVJj]) .*$|"
                      r"^siginfo: .*$", text, re.M)
    return "; JVM %s: %s" % (path, " | ".join(keep[:6]))


def max_gap(svc_run, after):
    """The longest time without a heartbeat from AFTER to the service's
    last line (its checksum)."""
    with svc_run.cv:
        until = svc_run.lines[-1][0]
    ts = [after] + [t for t, _, _ in svc_run.beats(after) if t <= until] + [until]
    return max(b - a for a, b in zip(ts, ts[1:]))


# --- native checksums -------------------------------------------------------

_NATIVE = {}
_NATIVE_LOCK = threading.Lock()
_NATIVE_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=4)


def _native_run(svc, rounds, outdir):
    t0 = time.monotonic()
    r = subprocess.run(svc.argv(rounds), capture_output=True, text=True, timeout=600, cwd=outdir,
                       stdin=subprocess.DEVNULL)
    secs = time.monotonic() - t0
    sums = [ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("checksum ")]
    if r.returncode != 0 or len(sums) != 1:
        raise AssertionError("native run of %s %d failed (exit %d): %s %s" % (
            svc.name, rounds, r.returncode, r.stdout[-300:], r.stderr[-600:]))
    return sums[0], secs


def native(svc, rounds, outdir, wait=True):
    """(checksum, seconds) of an untraced run of svc, once per session
    (started in the background on the first call: wait=False)."""
    with _NATIVE_LOCK:
        fut = _NATIVE.get((svc.name, rounds))
        if fut is None:
            fut = _NATIVE[(svc.name, rounds)] = _NATIVE_POOL.submit(_native_run, svc, rounds,
                                                                    outdir)
    return fut.result() if wait else None


@pytest.fixture
def service(request, tmp_path):
    """The Service of the test's parameter, skipped (saying why) where it
    cannot run; the native checksum of the test's work started in the
    background (the kill campaigns' work is the larger)."""
    svc = SERVICES[request.param]
    why = svc.missing()
    if why:
        pytest.skip(why)
    native(svc, svc.rounds[request.function.__name__ == "test_kill"], str(tmp_path), wait=False)
    return svc


def gebpf_trace(pid, rng, out, duration, stderr, max_events=20000):
    """gebpf trace -v -p PID of the range; past MAX_EVENTS lines the trace
    goes on, counting them as dropped (the test reads every line written)."""
    return subprocess.Popen([gebpf_path(), "trace", "-v", "-p", str(pid), "--range", rng,
                             "--duration", "%.3f" % duration, "-o", out,
                             "--max-events", str(max_events)],
                            stdout=subprocess.DEVNULL, stderr=stderr, stdin=subprocess.DEVNULL)


def vline(stderr, pattern):
    m = re.search(pattern, stderr, re.M)
    return m


def trap_used(stderr):
    """"patch", or the -v line saying why the patch trap did not apply."""
    if vline(stderr, r"entries patched"):
        return "patch"
    m = vline(stderr, r"^.*(?:does not apply|not mapped in pid).*$")
    return m.group(0) if m else "not said"


def check_trace(path, stderr, what, patch=True):
    """A trace with in-range lines (by the patch trap unless patch is
    False): the problem in words, or None.  Returns (problem, summary)."""
    if patch and not vline(stderr, r"entries patched"):
        why = re.findall(r"^.*(?:does not apply|warning|error).*$", stderr, re.M)
        # (and, where no code cache found room, what -v says lies near the range)
        layout = re.findall(r"^gebpf: trace: (?:pid \d+: the mappings within|  0x).*$", stderr, re.M)
        return "%s: the patch trap was not set up (-v: %s)" % (what, (why[-3:] + layout[:18]) or
                                                              vtail(stderr, 600)), None
    try:
        lines, summary = read_trace(path)
        check_vt_order(lines)
    except AssertionError as e:
        return "%s: bad trace: %s" % (what, str(e)[:500]), None
    execs = [ln for ln in lines if ln["t"] == "exec"]
    if not execs:
        return "%s: no in-range instruction written (summary %s; -v: %s)" % (
            what, summary, vtail(stderr, 400)), summary
    lo, hi = int(summary["start"], 16), int(summary["end"], 16)
    out = [ln["pc"] for ln in execs if not lo <= int(ln["pc"], 16) <= hi]
    if out:
        return "%s: exec lines outside the range %s-%s: %s" % (what, summary["start"],
                                                                summary["end"], out[:5]), summary
    return None, summary


# --- while it runs: trace, snap, sample -------------------------------------

def run_and_finish(svc_run, svc, tmp_path, since):
    """After the test's gebpf command: the service keeps its heartbeat and
    ends with the native checksum."""
    svc_run.hurry()
    want, secs = native(svc, svc_run.rounds, str(tmp_path))
    rc = svc_run.finish(timeout=3 * secs + 60)
    end = time.monotonic()
    assert rc is not None, "%s hung: not finished %.0f s after the command (native %.1f s): %s" % (
        svc.name, end - since, secs, svc_run.describe())
    assert rc == 0, "%s %s" % (svc.name, svc_run.describe())
    got = svc_run.checksum()
    assert got == want, "%s: checksum %s, native %s" % (svc.name, got, want)
    gap = max_gap(svc_run, since)
    assert gap <= BEAT_GAP, "%s: no heartbeat for %.1f s after the command: %s" % (
        svc.name, gap, [ln for _, ln in svc_run.lines][-12:])


@pytest.mark.parametrize("service", list(SERVICES), indirect=True)
def test_trace(service, tmp_path):
    """gebpf trace -p PID --range HOT --duration 2 while the service runs."""
    s = Running(service, service.rounds[0], str(tmp_path), "svc")
    try:
        pid = s.started()
        libz = chroot_libz(pid) if isinstance(service, Chroot) else None
        out = str(tmp_path / "trace.jsonl")
        with open(tmp_path / "trace.err", "w+") as err:
            t0 = time.monotonic()
            g = gebpf_trace(pid, service.range, out, 2.0, err, 200000)
            try:
                rc = g.wait(timeout=120)
            except subprocess.TimeoutExpired:
                g.kill()
                rc = "still running after 120 s"
            err.seek(0)
            stderr = err.read()
        assert rc == 0, "gebpf trace: %s: %s" % (rc, vtail(stderr, 2000))
        assert not traced_threads(pid), "still traced after the trace: %s" % traced_threads(pid)
        run_and_finish(s, service, tmp_path, t0)
        problem, summary = check_trace(out, stderr, "trace")
        assert not problem, problem
        m = vline(stderr, r"patch trap: (\d+) in-range instructions, (\d+) range entries")
        assert m and int(m.group(2)) > 0, "no range entries counted: %s" % vtail(stderr, 1000)
        print("%s: %s, %s entries; %s" % (service.name, service.range, m.group(2), summary))
        if libz:
            got = "%s-%s" % (summary["start"], summary["end"])
            assert got == libz[1], "range %s, but crc32_z of the chroot's %s is at %s" % (
                got, libz[0], libz[1])
    finally:
        s.kill()


def chroot_libz(pid):
    """(the path pid's maps give its libz, crc32_z's START-END in pid by
    that file, read through /proc/PID/root)."""
    maps = open("/proc/%d/maps" % pid).read().splitlines()
    ents = [ln.split() for ln in maps if "/libz.so" in ln]
    assert ents, "no libz in the maps of %d" % pid
    path = ents[0][5]
    base = min(int(e[0].split("-")[0], 16) - int(e[2], 16) for e in ents if e[5] == path)
    with open("/proc/%d/root%s" % (pid, path), "rb") as f:
        sym = ELFFile(f).get_section_by_name(".dynsym").get_symbol_by_name("crc32_z")[0]
    return path, "%#x-%#x" % (base + sym["st_value"], base + sym["st_value"] + sym["st_size"] - 1)


@pytest.mark.parametrize("service", list(SERVICES), indirect=True)
def test_snap(service, tmp_path):
    """gebpf snap -p PID while the service runs: a core that readelf and
    gdb open, one thread each."""
    s = Running(service, service.rounds[0], str(tmp_path), "svc")
    try:
        pid = s.started()
        core = str(tmp_path / "svc.core")
        # (read now: on a loaded machine the service may have ended by the
        # time gdb runs: a CI's run at load 8, node)
        exe = os.readlink("/proc/%d/exe" % pid)
        t0 = time.monotonic()
        live = len(os.listdir("/proc/%d/task" % pid))
        r = subprocess.run([gebpf_path(), "snap", "-p", str(pid), "-o", core],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, "gebpf snap: exit %d: %s" % (r.returncode, r.stderr[-2000:])
        assert not traced_threads(pid), "still traced after the snapshot"
        n = subprocess.run(["readelf", "-n", core], capture_output=True, text=True, timeout=120)
        assert n.returncode == 0, n.stderr
        threads = n.stdout.count("NT_PRSTATUS")
        assert threads >= 5 and abs(threads - live) <= 4, \
            "%d threads in the core, %d in the process at the snapshot" % (threads, live)
        if shutil.which("gdb"):
            if isinstance(service, Chroot):
                exe = CHROOT + exe
            g = subprocess.run(["gdb", "-batch", "-nx"] + service.gdb_args() +
                               ["-ex", "info threads", "-ex", "thread apply all bt 3", exe, core],
                               capture_output=True, text=True, timeout=300)
            assert g.returncode == 0, "gdb: %s" % g.stderr[-2000:]
            lwps = set(re.findall(r"\(LWP (\d+)\)", g.stdout))
            assert len(lwps) == threads, "gdb sees %d threads, the core has %d:\n%s" % (
                len(lwps), threads, g.stdout[-2000:])
            assert "#0" in g.stdout, g.stdout[-2000:]
        run_and_finish(s, service, tmp_path, t0)
    finally:
        s.kill()


# The services gebpf resume brings back (docs/resume.md "Files"): the
# chroot's python runs under chroot(1), whose root resume does not make.
RESUMED = [n for n in SERVICES if n != "python-bullseye"]


def snapped_and_resumed(service, tmp_path, *opts):
    """Snapped with snap -p mid-run, SIGKILLed, resumed (stdin /dev/null):
    its exit 0 and the native checksum; resume's stderr lines."""
    s = Running(service, service.rounds[0], str(tmp_path), "svc")
    try:
        pid = s.started()
        core = str(tmp_path / "svc.core")
        r = subprocess.run([gebpf_path(), "snap", "-p", str(pid), "-o", core],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, "gebpf snap: exit %d: %s" % (r.returncode, r.stderr[-2000:])
    finally:
        s.kill()
    want, secs = native(service, service.rounds[0], str(tmp_path))
    r = subprocess.run([gebpf_path(), "resume"] + list(opts) + [core], capture_output=True,
                       text=True, stdin=subprocess.DEVNULL, timeout=3 * secs + 120,
                       cwd=str(tmp_path))
    sums = [ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("checksum ")]
    assert r.returncode == 0 and sums == [want], "%s resumed: exit %d, %s (native %s): %s" % (
        service.name, r.returncode, sums, want, r.stderr[-2000:])
    errs = r.stderr.splitlines()
    assert all(ln.startswith("gebpf: warning: resume: ") for ln in errs), errs
    return errs


@pytest.mark.parametrize("service", RESUMED, indirect=True)
def test_resume(service, tmp_path):
    """gebpf snap -p PID mid-run, the service SIGKILLed, gebpf resume of the
    snapshot: it finishes with the uninterrupted checksum.  Its epoll
    instances, eventfds, pipes and unix socket pairs are made again (Go's
    netpoller, libuv's loops, the JVM's); stdin, a pipe from this test, is
    the only fd named and replaced."""
    errs = snapped_and_resumed(service, tmp_path)
    named = [ln for ln in errs if re.match(r"gebpf: warning: resume: fd \d+ ", ln)]
    assert all("fd 0 " in ln or "pipe whose other end" in ln for ln in named), named


ASYNCIO = Script("python-asyncio", "libz:crc32_z", "crc32_z", (2800, 8400), ["/usr/bin/python3"],
                 "svc_asyncio.py", "python3")


def test_resume_asyncio_service_with_its_pid(tmp_path):
    """svc_asyncio (an asyncio loop: its epoll watching stdin, its self-pipe
    socket pair; the pid it runs under checked by asyncio): resumed with
    --new-pidns it finishes with the uninterrupted checksum.  The loop's
    interest in stdin (now /dev/null, which epoll cannot watch) is named."""
    why = ASYNCIO.missing()
    if why:
        pytest.skip(why)
    errs = snapped_and_resumed(ASYNCIO, tmp_path, "--new-pidns")
    assert all("interest in fd 0" in ln for ln in errs), errs


REPORT_FN = re.compile(r"^\s*(\d+)\s+[\d.]+\s+(\S+)$")


@pytest.mark.parametrize("service", list(SERVICES), indirect=True)
def test_sample(service, tmp_path):
    """gebpf sample -p PID --duration 2 --report: the hot function is in
    the profile."""
    s = Running(service, service.rounds[0], str(tmp_path), "svc")
    try:
        pid = s.started()
        t0 = time.monotonic()
        r = subprocess.run([gebpf_path(), "sample", "-p", str(pid), "--duration", "2",
                            "--report", "--top", "200"], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, "gebpf sample: exit %d: %s" % (r.returncode, r.stderr[-2000:])
        fns = r.stdout.split("# top functions", 1)
        assert len(fns) == 2, r.stdout[-2000:]
        counts = {m.group(2): int(m.group(1)) for m in map(REPORT_FN.match, fns[1].splitlines())
                  if m}
        assert counts.get(service.hot, 0) > 0, "no sample in %s: %s" % (
            service.hot, fns[1][:1500])
        print("%s: %d samples in %s of %d" % (service.name, counts[service.hot], service.hot,
                                              sum(counts.values())))
        run_and_finish(s, service, tmp_path, t0)
    finally:
        s.kill()


# --- the kill campaigns -----------------------------------------------------

SETUP_STEPS = ("gebpf: range ", "code cache at ", "addresses of the range", "the owner check in ")


def one_run(svc, mode, seed, outdir):
    """One service, one attached trace of its hot range, one kill (mode:
    gebpf, worker or both) at a moment of the seed's phase; then the
    checks.  Returns what was seen (result: "ok" or every problem)."""
    rnd = random.Random("%s-%s-%d" % (svc.name, mode, seed))
    phase = PHASES[seed % 3]
    duration = rnd.uniform(0.3, 0.8)
    rounds = svc.rounds[1]
    tag = "%s-%s-%d" % (svc.name, mode, seed)
    res = {"service": svc.name, "mode": mode, "seed": seed, "phase": phase,
           "duration": round(duration, 3)}
    problems = []
    res["stages"] = stages = {}
    s = Running(svc, rounds, outdir, tag)
    mark = lambda what: stages.__setitem__(what, round(time.monotonic() - s.t0, 2))
    g = err = None
    try:
        pid = s.started()
        mark("started")
        err = open(os.path.join(outdir, tag + ".trace-stderr"), "w+")
        t0 = time.monotonic()
        g = gebpf_trace(pid, svc.range, os.path.join(outdir, tag + ".jsonl"), duration, err)
        w = worker_of(g)

        def stderr():
            err.seek(0)
            return err.read()
        if phase == "setup":
            # Just after one of the set-up's steps (its -v lines, whatever
            # the load makes them take): the range resolved (the target
            # being attached), the cache mapped (translating), the module's
            # code addresses read, the entry blocks made (patching).
            step = rnd.choice(SETUP_STEPS)
            res["step"] = step
            while time.monotonic() - t0 < 60 and g.poll() is None and step not in stderr():
                time.sleep(0.002)
            time.sleep(rnd.uniform(0.0, 0.1))
        else:
            while time.monotonic() - t0 < 30 and g.poll() is None:
                if "entries patched" in stderr():
                    break
                time.sleep(0.005)
            if phase == "run":
                time.sleep(rnd.uniform(0.0, duration))
            else:   # from the duration's expiry through the teardown
                time.sleep(duration + rnd.uniform(-0.02, 0.5))
        res["patched"] = "entries patched" in stderr()
        res["attached"] = bool(w) and tracer_of(pid) == w
        res["ended"] = g.poll() is not None
        kill = {"gebpf": [g.pid], "worker": [w],
                "both": [w, g.pid] if rnd.random() < 0.5 else [g.pid, w]}[mode]
        tk = time.monotonic()
        mark("kill")
        res["at"] = round(tk - t0, 3)
        for k in kill:
            try:
                if k:
                    os.kill(k, signal.SIGKILL)
            except ProcessLookupError:
                pass    # (the trace had ended)
        try:
            g.wait(timeout=30)
        except subprocess.TimeoutExpired:
            problems.append("gebpf still running 30 s after the kill")
        if not gone(w, 60):
            problems.append("gebpf's worker %s still there 60 s after the kill" % w)
        if not untraced(pid, 20):
            problems.append("still traced 20 s after the kill: threads %s have a tracer" %
                            traced_threads(pid))
        mark("untraced")
        res["stderr"] = vtail(stderr(), 1500)
        # The heartbeat goes on, with work done.
        b = s.wait_line(lambda ln: bool(BEAT.match(ln)), BEAT_GAP, after=tk)
        if s.status() or s.checksum():
            problems.append(ended_early(s, "after the kill"))
            return finish_run(res, problems)
        if not b:
            problems.append("hung: no heartbeat for %.0f s after the kill (last %s; threads: %s)" % (
                BEAT_GAP, s.last_beat(), thread_states(pid)))
            return finish_run(res, problems)
        after = s.beats(tk)[0]
        b2 = s.wait_line(lambda ln: bool(BEAT.match(ln)) and int(BEAT.match(ln).group(2)) >
                         after[2], BEAT_GAP, after=after[0])
        if not b2:
            if s.status() or s.checksum():
                problems.append(ended_early(s, "after the kill"))
            else:
                problems.append("stalled: heartbeat goes on but no work done in %.0f s after "
                                "the kill (last %s; threads: %s)" % (BEAT_GAP, s.last_beat(),
                                                                   thread_states(pid)))
            return finish_run(res, problems)
        # A second trace of the same range works.
        mark("beats")
        if s.status() is None:
            second = os.path.join(outdir, tag + ".second.jsonl")
            with open(os.path.join(outdir, tag + ".second-stderr"), "w+") as e2:
                g2 = gebpf_trace(pid, svc.range, second, 0.5, e2)
                try:
                    rc2 = g2.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    g2.kill()
                    rc2 = "still running after 120 s"
                e2.seek(0)
                err2 = e2.read()
            if s.p.poll() is not None:
                problems.append("%s (the trace's -v: %s)" % (
                    ended_early(s, "during the second trace"), vtail(err2)))
                return finish_run(res, problems)
            if rc2 != 0:
                problems.append("second trace failed (exit %s): %s" % (rc2, vtail(err2)))
            else:
                # (After a kill of the worker alone the threads keep their gs
                # bases, and the patch trap does not apply: the probe trap
                # traces, docs/trace.md "Ending".)
                res["second_trap"] = trap_used(err2)
                p2, _ = check_trace(second, err2, "second trace", patch=False)
                if p2:
                    problems.append(p2)
            if not untraced(pid, 20):
                problems.append("still traced after the second trace: threads %s" %
                                traced_threads(pid))
        else:
            problems.append(ended_early(s, "before the second trace"))
        # The service ends by itself with the native checksum, its heartbeat
        # going on (from the second trace's end: gebpf gone again).
        mark("second")
        t2 = time.monotonic()
        s.hurry()
        want, secs = native(svc, rounds, outdir)
        rc = s.finish(timeout=3 * secs + 60)
        mark("end")
        if rc is None:
            problems.append("hung: not finished %.0f s after the kill (native %.1f s; last %s; "
                            "threads: %s)" % (time.monotonic() - tk, secs, s.last_beat(),
                                              thread_states(pid)))
        elif rc != 0:
            problems.append("at its end: %s" % s.describe())
        elif s.checksum() != want:
            problems.append("checksum %s, native %s" % (s.checksum(), want))
        else:
            gap = max_gap(s, t2)
            if gap > BEAT_GAP:
                problems.append("no heartbeat for %.1f s after the second trace" % gap)
        return finish_run(res, problems)
    except AssertionError as e:
        problems.append(str(e))
        return finish_run(res, problems)
    finally:
        if g is not None and g.poll() is None:
            g.kill()
            g.wait()
        if err is not None:
            err.close()
        s.kill()


def ended_early(s, when):
    """A service that ended before the campaign's checks: died (of what),
    or finished its work (too little for this machine's speed)."""
    if s.checksum() and s.p.returncode in (0, None):
        return ("finished its work %s, before the checks could run (ROUNDS too small for "
                "this machine: %s)" % (when, s.describe()))
    return "%s: %s" % (when, s.describe())


NOISE = re.compile(r"^libbpf: |^gebpf: trace: thread \d+: signal \d+ |^gebpf: trace: thread \d+ "
                   r"(exited|appeared|started)")


def vtail(stderr, n=800):
    """The end of gebpf's -v without libbpf's lines and the per-thread
    signal and thread lines (a Go service gets SIGURG all the time)."""
    keep = [ln for ln in stderr.splitlines() if not NOISE.search(ln)]
    return "\n".join(keep)[-n:]


def finish_run(res, problems):
    res["result"] = "; ".join(problems) or "ok"
    print("  %s %s seed %d %s: %s %s" % (res["service"], res["mode"], res["seed"], res["phase"],
                                       res["stages"], res["result"][:200]))
    return res


def campaign_of(c, svc, mode, outdir):
    """The runs of campaign C (its seeds), three at a time, and their counts."""
    runs = [r for _, r in c.map(lambda seed: one_run(svc, mode, seed, outdir), workers=3)]
    count = lambda f: sum(1 for r in runs if f(r))
    summary = {
        "service": svc.name, "mode": mode, "runs": len(runs),
        "ok": count(lambda r: r["result"] == "ok"),
        "attached": count(lambda r: r.get("attached")),
        "killed_after_patching": count(lambda r: r.get("patched")),
        "second_trace_by_patch_trap": count(lambda r: r.get("second_trap") == "patch"),
        "second_trace_otherwise": sorted(set(re.sub(r"\d+", "N", r["second_trap"]) for r in runs
                                             if r.get("second_trap", "patch") != "patch")),
        "by_phase": {ph: count(lambda r: r["phase"] == ph) for ph in PHASES},
        "failed_by_phase": {ph: count(lambda r: r["phase"] == ph and r["result"] != "ok")
                            for ph in PHASES},
    }
    print(json.dumps(summary))
    rep = os.environ.get("GEBPF_CRASH_REPORT")
    if rep:
        with open(rep, "a") as f:
            f.write(json.dumps(summary) + "\n")
            for r in runs:
                if r["result"] != "ok":
                    f.write(json.dumps(r) + "\n")
    return runs, summary


def failures(runs):
    """{seed: what went wrong} for the runs that failed."""
    return {r["seed"]: "%s: kill of %s (%s phase, %.2f s after gebpf started, %s patched; "
            "--duration %.2f): %s%s" % (
                r["service"], r["mode"], r["phase"], r.get("at", -1),
                "after the entries were" if r.get("patched") else "before the entries were",
                r["duration"], r["result"],
                "\n    gebpf -v (tail): %s" % r["stderr"][-600:] if r.get("stderr") else "")
            for r in runs if r["result"] != "ok"}


KILLS = [(svc, mode) for svc in SERVICES for mode in ("gebpf", "worker", "both")]


@pytest.mark.parametrize("service,mode", KILLS, ids=["%s-%s" % k for k in KILLS],
                         indirect=["service"])
@pytest.mark.campaign
def test_kill(service, mode, campaign, tmp_path):
    """SIGKILL of gebpf, of its worker, or of both, at moments of the
    set-up, the run and the end of an attached trace: the service is left
    untraced, keeps its heartbeat and work, can be traced again, and ends
    with the native checksum."""
    c = campaign(RUNS)
    runs, s = campaign_of(c, service, mode, str(tmp_path))
    c.check(failures(runs), s)
    assert s["attached"] >= max(1, len(runs) // 3), s

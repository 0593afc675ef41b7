"""Shared fixtures for the end-to-end tests.

GEBPF_OUTPUT names the build output directory holding `gebpf` and `progs/`
(default: <repo>/.output).  The test programs and what to trace in each are
listed in PROGS below (tests/progs/ holds their sources).
"""
import atexit
import contextlib
import itertools
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
OUTPUT = os.path.abspath(os.environ.get("GEBPF_OUTPUT", os.path.join(REPO, ".output")))
sys.path.insert(0, HERE)

import lackey  # noqa: E402  (the oracle lives next to the tests)
import campaign as campaign_mod  # noqa: E402
import refcache  # noqa: E402

# name -> what to trace.  "range": function symbols; one symbol is passed as
# --range SYMBOL (or MODULE:SYMBOL with "module"), several as the START-END
# span covering them.  "handlers": signal handlers inside the range.
# "threads": the traced function runs in several threads.  "exit": the
# program's exit status (0 when absent).
PROGS = {
    "mem_sizes": {"range": ["traced"]},
    "stack_ops": {"range": ["traced"]},
    "rep_string": {"range": ["traced"]},
    "atomics": {"range": ["traced"]},
    "bittest": {"range": ["traced"]},
    "simd": {"range": ["traced"]},
    "page_cross": {"range": ["traced"]},
    "syscall_write": {"range": ["traced"]},
    "exit_mid": {"range": ["traced"], "exit": 3},
    "hot_loop": {"range": ["hot"], "module": True},
    "tls": {"range": ["traced"]},
    "switch": {"range": ["traced"]},
    "recursion": {"range": ["traced"]},
    "qsort_cb": {"range": ["traced"]},
    "setjmp": {"range": ["traced", "traced_dive"]},
    "signal": {"range": ["traced", "traced_handler"], "handlers": ["traced_handler"]},
    "threads": {"range": ["traced"], "threads": True},
}

SUMMARY_KEYS = ["t", "insns", "mem", "events", "dropped", "exec", "start", "end"]
LINE_KEYS = {
    "exec": ["t", "vcpu", "pc", "vt"],
    "read": ["t", "vcpu", "addr", "size", "pc", "vt"],
    "write": ["t", "vcpu", "addr", "size", "pc", "vt"],
    "fault": ["t", "vcpu", "addr", "pc", "err", "vt"],
    "regs": ["t", "vcpu", "regs", "vt"],
}
# trace --values (docs/trace-format.md "Values"): the same lines with these
# fields, "val" only where the value could be read.
VALUE_KEYS = {
    "exec": ["t", "vcpu", "pc", "regs", "vt"],
    "read": ["t", "vcpu", "addr", "size", "val", "pc", "vt"],
    "write": ["t", "vcpu", "addr", "size", "val", "pc", "vt"],
}
HEX = re.compile(r"0x(0|[1-9a-f][0-9a-f]*)")


_REFCACHE_MADE = []


def pytest_configure(config):
    # The session's reference cache (refcache.py): made by the controller
    # (or a run without xdist), before the workers start, which inherit it.
    if not os.environ.get("PYTEST_XDIST_WORKER") and refcache.ENV not in os.environ:
        d = tempfile.mkdtemp(prefix="gebpf-ref-")
        os.environ[refcache.ENV] = d
        _REFCACHE_MADE.append(d)
    config.addinivalue_line(
        "markers", "probetrap: needs `gebpf trace --trap probes` (the probe trap, issue 9); "
        "run them alone with -m probetrap")
    config.addinivalue_line(
        "markers", "serial: needs the machine to itself (timing-sensitive, or looks at "
        "machine-wide state): scripts/test runs these alone, one at a time, after the "
        "parallel part (docs/testing.md \"How scripts/test runs the suite\")")
    # (xdist registers it; a run without xdist, -p no:xdist, must know it too)
    config.addinivalue_line(
        "markers", "xdist_group(name): tests that share a module fixture or a cache run on one "
        "xdist worker under --dist loadgroup (conftest.module_fixtures)")
    config.addinivalue_line(
        "markers", "campaign: a random campaign (tests/e2e/campaign.py): fixed seeds in CI, "
        "fresh ones under scripts/soak; implies serial")


# (tryfirst: before xdist's own hook reads the xdist_group marks)
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("campaign") and not item.get_closest_marker("serial"):
            item.add_marker(pytest.mark.serial)
        if not item.get_closest_marker("xdist_group"):
            shared = module_fixtures(item)
            if shared:
                item.add_marker(pytest.mark.xdist_group("%s:%s" % (
                    item.module.__name__, "+".join(shared))))


def module_fixtures(item):
    """The module-scoped fixtures of its own module that ITEM uses: with
    `--dist loadgroup` (scripts/test) the tests that share one run on one
    xdist worker, so its value (a reference trace, a built snapshot) is made
    once, not once per worker (docs/testing.md "How scripts/test runs the
    suite").  A test's own cache (test_trap_cases.py's runs) marks its
    tests with xdist_group itself."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    out = []
    for name, defs in info.name2fixturedefs.items():
        d = defs[-1] if defs else None
        if d is not None and d.scope == "module" and d.baseid and item.nodeid.startswith(d.baseid):
            out.append(name)
    return sorted(out)


_CAMPAIGN_LINES = []


def pytest_runtest_logreport(report):
    """The campaigns' lines (campaign.py), also from xdist's workers."""
    if report.when == "call":
        _CAMPAIGN_LINES.extend(v for k, v in report.user_properties if k == campaign_mod.PROPERTY)


def pytest_terminal_summary(terminalreporter):
    if _CAMPAIGN_LINES:
        terminalreporter.section("campaign seeds")
        for line in _CAMPAIGN_LINES:
            terminalreporter.write_line(line)
    d = refcache.directory()
    line = d and refcache.summary(d)
    if line:
        terminalreporter.write_line("reference traces: " + line)


def pytest_unconfigure(config):
    for d in _REFCACHE_MADE:
        shutil.rmtree(d, ignore_errors=True)
        os.environ.pop(refcache.ENV, None)


# GEBPF_TEST_CPU=FILE: one line per test appended to FILE, "CPU WALL NODEID":
# the CPU seconds of the test's pytest process and of the children it waited
# for (gebpf, its targets, QEMU) during the test, and its wall seconds.  The
# suite's time on a 2-core CI host is bound by CPU, not by waiting, so this
# is what to sort by when cutting it (docs/testing.md "How scripts/test runs
# the suite").
_CPU_FILE = os.environ.get("GEBPF_TEST_CPU")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not _CPU_FILE:
        yield
        return
    t0, w0 = os.times(), time.monotonic()
    yield
    t1, w1 = os.times(), time.monotonic()
    cpu = sum(getattr(t1, k) - getattr(t0, k)
              for k in ("user", "system", "children_user", "children_system"))
    fd = os.open(_CPU_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, ("%.2f %.2f %s\n" % (cpu, w1 - w0, item.nodeid)).encode())
    finally:
        os.close(fd)


@pytest.fixture
def campaign(request):
    """campaign(runs, fixed=()) -> a Campaign (campaign.py) for this test."""
    def make(runs, fixed=()):
        return campaign_mod.Campaign(request.node, runs, fixed)
    return make


_HAS_TRAP = []


def gebpf_has_trap():
    """Whether this gebpf has --trap probes|pages|none (the probe trap's CLI)."""
    if not _HAS_TRAP:
        r = subprocess.run([gebpf_path(), "trace", "--help"], capture_output=True, text=True,
                           timeout=30)
        _HAS_TRAP.append("--trap" in r.stdout + r.stderr)
    return _HAS_TRAP[0]


def trap_args(kind):
    """gebpf arguments selecting the entry mechanism KIND ("patch", "probes",
    "pages", "none", or "default": no --trap, the trap gebpf picks itself).
    With --trap, that; before it existed the page trap was the default and
    "none" was spelled --step-all (still an alias)."""
    if kind == "default":
        return []
    if gebpf_has_trap():
        return ["--trap", kind]
    return {"pages": [], "none": ["--step-all"]}[kind]


def gebpf_path():
    return os.path.join(OUTPUT, "gebpf")


_ANYUSER = {}


def anyuser_dir():
    """A directory of this test process that every user can enter (0755,
    under the system's temporary directory, removed at exit): the clone, and
    pytest's tmp_path (under /tmp/pytest-of-root, 0700), may sit where only
    their owner can go (`mktemp -d` makes 0700 directories)."""
    if "dir" not in _ANYUSER:
        d = tempfile.mkdtemp(prefix="gebpf-anyuser-")
        os.chmod(d, 0o755)
        atexit.register(shutil.rmtree, d, True)
        _ANYUSER["dir"] = d
    return _ANYUSER["dir"]


def anyuser_copy(path, beside=()):
    """A copy of the program PATH (gebpf, a test program) that another user
    can run, in anyuser_dir(): a test that runs one as nobody runs this.
    BESIDE: files it needs at the same place relative to it ($ORIGIN's
    libraries: "lib/libunwindleaf.so")."""
    if path not in _ANYUSER:
        sub = tempfile.mkdtemp(dir=anyuser_dir())
        for rel in (os.path.basename(path),) + tuple(beside):
            src = os.path.join(os.path.dirname(path), rel)
            dst = os.path.join(sub, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(src, dst)
        for d, _, files in os.walk(sub):
            os.chmod(d, 0o755)
            for f in files:
                os.chmod(os.path.join(d, f), 0o755)
        _ANYUSER[path] = os.path.join(sub, os.path.basename(path))
    return _ANYUSER[path]


@pytest.fixture
def anyuser_tmp():
    """A fresh directory (0755) that every user can reach (anyuser_dir)."""
    d = tempfile.mkdtemp(dir=anyuser_dir())
    os.chmod(d, 0o755)
    yield pathlib.Path(d)
    shutil.rmtree(d, True)


def prog_path(name):
    return os.path.join(OUTPUT, "progs", name)


def private_prog(tmp_path, name):
    """A copy of test program NAME of this test's own (TMP_PATH/bin/NAME, the
    same bytes and file name): a test that looks for processes by their
    executable (/proc/PID/exe) finds its own only, whatever the parallel
    tests beside it run (docs/testing.md "How scripts/test runs the
    suite")."""
    d = os.path.join(str(tmp_path), "bin")
    os.makedirs(d, exist_ok=True)
    dst = os.path.join(d, name)
    if not os.path.exists(dst):
        shutil.copy2(prog_path(name), dst)
    return dst


def range_arg(name):
    """The --range value the tests pass for program NAME."""
    spec = PROGS[name]
    if len(spec["range"]) == 1:
        return ("%s:%s" % (name, spec["range"][0])) if spec.get("module") else spec["range"][0]
    start, end = lackey.Program(prog_path(name)).span(spec["range"])
    return "%#x-%#x" % (start, end)


def stable_env():
    """The environment for every target: pytest's PYTEST_CURRENT_TEST changes
    from test to test and would move the stack between otherwise identical
    runs (ASLR off makes the stack depend only on argv, env and auxv), and
    xdist's PYTEST_XDIST_WORKER from worker to worker, which kept a
    reference run from being shared between workers (refcache.py keys a run
    by its environment: half the session's reference runs were made twice)."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTEST_CURRENT_TEST", "PYTEST_XDIST_WORKER")}


def run_gebpf(args, timeout=120, **kw):
    """Run gebpf ARGS; returns the CompletedProcess (text mode)."""
    kw.setdefault("env", stable_env())
    return subprocess.run([gebpf_path()] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=timeout, **kw)


@contextlib.contextmanager
def threads_running(ms=60000):
    """snap_threads running with its threads started ("ready" read), for
    snapshots of a live multi-threaded process; killed on exit.  (It runs
    a minute: a 1.5 s one had ended on a loaded CI host before the test
    read its /proc, "No such process".)"""
    p = subprocess.Popen([prog_path("snap_threads"), str(ms)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().startswith("ready ")
        time.sleep(0.2)
        yield p
    finally:
        p.kill()
        p.communicate(timeout=60)


def output_grew(path, proc, size=1, timeout=120):
    """Wait until the file PATH holds SIZE bytes (a trace under way) or the
    process PROC ended: a test that signals gebpf once it has traced
    something waits for that, not for a fixed time load can stretch.
    Returns whether the file got there."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        try:
            if os.path.getsize(str(path)) >= size:
                return True
        except OSError:
            pass
        time.sleep(0.02)
    return os.path.exists(str(path)) and os.path.getsize(str(path)) >= size


def started(make):
    """The body of a factory fixture: yields start(*args), which returns
    make(*args); everything started is .kill()ed at teardown.

        @pytest.fixture
        def server():
            yield from started(Server)
    """
    made = []

    def start(*args, **kw):
        x = make(*args, **kw)
        made.append(x)
        return x
    try:
        yield start
    finally:
        for x in made:
            x.kill()


def exits_within(g, secs, what):
    """gebpf process G's stderr once it exited, failing the test if it is
    still running SECS seconds on (then it is killed)."""
    try:
        _, err = g.communicate(timeout=secs)
    except subprocess.TimeoutExpired:
        g.kill()
        _, err = g.communicate()
        pytest.fail("gebpf still running %s s after %s: %s" % (secs, what, err.decode().strip()))
    return err.decode()


def check_line(raw):
    """One trace line: exact schema (field order, no spaces, lower-case hex
    without leading zeros).  Returns the parsed object."""
    obj = json.loads(raw)
    keys = SUMMARY_KEYS if obj.get("t") == "summary" else LINE_KEYS.get(obj.get("t"))
    assert keys is not None, "unknown line type: %r" % raw
    got = list(obj)
    if obj["t"] == "summary" and got[-1] == "faults":
        got = got[:-1]
    if ("regs" in obj or "val" in obj) and obj["t"] in VALUE_KEYS:
        keys = VALUE_KEYS[obj["t"]]
    assert got == keys, "fields/order of %r (want %s)" % (raw, keys)
    for v in list(obj.get("regs", {}).values()) + ([obj["val"]] if "val" in obj else []):
        assert HEX.fullmatch(v), "bad value %s in %r" % (v, raw)
    assert lackey.dumps(obj) == raw, "not in canonical form (spaces?): %r" % raw
    for k in ("pc", "addr", "err", "start", "end"):
        if k in obj and obj[k] is not None:
            assert HEX.fullmatch(obj[k]), "bad hex %s in %r" % (k, raw)
    return obj


# The canonical forms of the common lines (check_line's verdict and object,
# without its json.loads + dumps round trip: a quarter of its time on the
# million lines of a full budget); any other line goes to check_line.
_N = r"(0|[1-9][0-9]*)"
_H = r'"(0x(?:0|[1-9a-f][0-9a-f]*))"'
_EXEC = re.compile(r'\{"t":"exec","vcpu":%s,"pc":%s,"vt":%s\}' % (_N, _H, _N))
_ACCESS = re.compile(r'\{"t":"(read|write)","vcpu":%s,"addr":%s,"size":%s,"pc":%s,"vt":%s\}'
                     % (_N, _H, _N, _H, _N))


def check_line_fast(raw):
    """check_line(RAW), the same object and verdict, quicker for exec and
    access lines."""
    m = _EXEC.fullmatch(raw)
    if m:
        return {"t": "exec", "vcpu": int(m[1]), "pc": m[2], "vt": int(m[3])}
    m = _ACCESS.fullmatch(raw)
    if m:
        return {"t": m[1], "vcpu": int(m[2]), "addr": m[3], "size": int(m[4]), "pc": m[5],
                "vt": int(m[6])}
    return check_line(raw)


def trace_bytes(path):
    """The bytes of a trace file, decompressed by the zstd CLI when it is
    zstd (a .zst trace, a recording's blobs/trace.jsonl.zst)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] == b"\x28\xb5\x2f\xfd":
        if not shutil.which("zstd"):
            pytest.skip("zstd (the CLI) is not installed: scripts/packages.txt")
        r = subprocess.run(["zstd", "-dc", "--", str(path)], capture_output=True, timeout=120)
        assert r.returncode == 0, "zstd -d %s: %s" % (path, r.stderr.decode())
        data = r.stdout
    return data


def read_trace(path):
    """Parse and check a trace file (plain or zstd): every line well formed,
    the summary last and consistent with the lines.  Returns (lines, summary)."""
    data = trace_bytes(path)
    assert data.endswith(b"\n"), "%s does not end with a newline" % path
    raws = data.decode().split("\n")[:-1]
    assert raws, "%s is empty" % path
    objs = [check_line_fast(r) for r in raws]
    summary, lines = objs[-1], objs[:-1]
    check_summary(summary, raws[-1], lines, len(lines), sum(o["t"] == "exec" for o in lines),
                  sum(o["t"] in ("read", "write") for o in lines))
    return lines, summary


def check_summary(summary, raw, others, nlines, execs, mem):
    """The summary (line RAW) last and consistent with the NLINES lines
    before it (EXECS exec lines, MEM accesses; OTHERS: those parsed, none
    a summary)."""
    assert summary["t"] == "summary", "last line is not the summary: %r" % raw
    assert all(o["t"] != "summary" for o in others), "summary line before the end"
    assert summary["events"] == nlines + summary["dropped"], summary
    if summary["dropped"] == 0:
        if summary["exec"]:
            assert summary["insns"] == execs, summary
        assert summary["mem"] == mem, summary


# check_line_fast's common lines, on bytes, for trace_summary.
_LINE_B = re.compile(("%s|%s" % (_EXEC.pattern, _ACCESS.pattern)).encode())


def trace_summary(path):
    """read_trace's checks (every line well formed, the summary last and
    consistent with the lines), for a test that wants the summary alone:
    no object per line (a flat-out trace's million lines cost read_trace
    seconds of CPU).  Returns the summary."""
    data = trace_bytes(path)
    assert data.endswith(b"\n"), "%s does not end with a newline" % path
    raws = data.split(b"\n")[:-1]
    assert raws, "%s is empty" % path
    body = raws[:-1]
    # (the common lines matched in C: filterfalse and the regex; the rest,
    # fault lines, by check_line)
    others = [check_line(r.decode()) for r in itertools.filterfalse(_LINE_B.fullmatch, body)]
    summary = check_line(raws[-1].decode())
    check_summary(summary, raws[-1], others, len(body), data.count(b'{"t":"exec",'),
                  data.count(b'{"t":"read",') + data.count(b'{"t":"write",'))
    return summary


def check_vt_order(lines):
    """vt: exec lines number 0, 1, 2, ... in file order; access lines carry
    the vt of their instruction and follow its exec line (same vcpu)."""
    last = None
    for i, ln in enumerate(lines):
        if ln["t"] == "exec":
            want = 0 if last is None else last["vt"] + 1
            assert ln["vt"] == want, "line %d: vt %d, want %d" % (i, ln["vt"], want)
            last = ln
        elif ln["t"] in ("read", "write"):
            assert last is not None and (ln["vt"], ln["vcpu"], ln["pc"]) == (
                last["vt"], last["vcpu"], last["pc"]), "line %d: access %r after %r" % (i, ln, last)


@pytest.fixture(scope="session")
def gebpf():
    path = gebpf_path()
    if not os.access(path, os.X_OK):
        pytest.fail("%s not found: build it (make OUTPUT=%s)" % (path, OUTPUT))
    return path


@pytest.fixture(scope="session")
def root():
    """Tracing needs root (or CAP_SYS_PTRACE) and a ptrace_scope that allows it."""
    if os.geteuid() != 0:
        pytest.skip("needs root: gebpf trace attaches with ptrace")
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            if f.read().strip() == "3":
                pytest.skip("ptrace disabled (kernel.yama.ptrace_scope=3)")
    except FileNotFoundError:
        pass


@pytest.fixture(scope="session")
def trace_ready(gebpf, root, tmp_path_factory):
    """Skip (with the reason) while `gebpf trace` is still the placeholder."""
    out = tmp_path_factory.mktemp("probe") / "t.jsonl"
    try:
        r = run_gebpf(["trace", "--range", "traced", "-o", str(out), "--",
                       prog_path("mem_sizes")], timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("gebpf trace --range traced -- %s did not finish in 30 s (33 in-range "
                    "instructions)" % prog_path("mem_sizes"))
    assert r.returncode == 0, "gebpf trace does not work: %s" % r.stderr.strip()
    return gebpf


@pytest.fixture(scope="session")
def probes_ready(trace_ready):
    """Fail (not skip) while gebpf has no --trap probes: the probe-trap tests
    are written against that contract (docs/testing.md)."""
    if not gebpf_has_trap():
        pytest.fail("gebpf trace has no --trap option: the probe trap (issue 9) is not "
                    "integrated in this build")
    return trace_ready


@pytest.fixture
def prog():
    def get(name):
        path = prog_path(name)
        if not os.access(path, os.X_OK):
            pytest.fail("%s not built (make OUTPUT=%s progs)" % (path, OUTPUT))
        return path
    return get


@pytest.fixture(scope="session")
def valgrind():
    try:
        subprocess.run([lackey.VALGRIND, "--version"], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("valgrind not installed (scripts/deps installs it)")
    return lackey.VALGRIND


_ORACLE = {}


@pytest.fixture
def oracle(valgrind, prog):
    """oracle(name, exec_on=True) -> lackey's converted trace (cached per
    session: valgrind takes a second or two per program)."""
    def get(name, exec_on=True):
        key = (name, exec_on)
        if key not in _ORACLE:
            rng = range_arg(name)
            _ORACLE[key] = lackey.oracle(prog(name), (), rng.split(":")[-1], exec_on=exec_on)
        return _ORACLE[key]
    return get

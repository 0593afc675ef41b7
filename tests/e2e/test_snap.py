"""gebpf snap: the snapshot of a live or launched process, read by gdb,
eu-stack and readelf; determinism; the target keeps running unchanged."""
import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest
from elftools.elf.elffile import ELFFile

from conftest import gebpf_path, prog_path, run_gebpf


def note_json(path):
    """The GEBPF note's document, parsed with pyelftools (independently of gebpf)."""
    with open(path, "rb") as f:
        elf = ELFFile(f)
        assert elf["e_type"] == "ET_CORE"
        segs = list(elf.iter_segments())
        assert segs[0]["p_type"] == "PT_NOTE", "PT_NOTE must come first"
        loads = [s["p_vaddr"] for s in segs[1:]]
        assert all(s["p_type"] == "PT_LOAD" for s in segs[1:])
        assert loads == sorted(loads), "PT_LOAD not in address order"
        notes = list(segs[0].iter_notes())
        # Its own type (0x47424501, "GBE" 1), not NT_PRSTATUS's 1.
        assert notes[-1]["n_name"] == "GEBPF" and notes[-1]["n_type"] == 0x47424501, \
            "JSON note must be last"
        desc = notes[-1]["n_desc"]
        return json.loads(desc if isinstance(desc, str) else desc.decode())


def start_threads(ms=1500):
    p = subprocess.Popen([prog_path("snap_threads"), str(ms)], stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    assert line.startswith("ready "), line
    return p


def expected_threads_output():
    r = subprocess.run([prog_path("snap_threads"), "10"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0
    return r.stdout.split("\n", 1)[1]


@pytest.fixture(scope="module", params=[[], ["--no-fork"]], ids=["fork", "no-fork"])
def threads_snap(request, gebpf, root, tmp_path_factory):
    """A snapshot of snap_threads while it runs, and what the live process had:
    with the copy-on-write copy (the default) and without (--no-fork)."""
    out = tmp_path_factory.mktemp("snap") / "threads.core"
    p = start_threads()
    time.sleep(0.3)
    live_tids = sorted(int(t) for t in os.listdir("/proc/%d/task" % p.pid))
    r = run_gebpf(["snap", "-p", str(p.pid), "-o", str(out)] + request.param)
    rest = p.stdout.read()
    p.wait(timeout=60)
    assert r.returncode == 0, r.stderr
    return {"path": str(out), "pid": p.pid, "tids": live_tids, "rest": rest, "rc": p.returncode}


def test_attach_snapshot_content(threads_snap):
    doc = note_json(threads_snap["path"])
    assert doc["version"] == 1
    assert doc["meta"]["pid"] == threads_snap["pid"]
    assert doc["meta"]["point"] == "attach"
    assert doc["exe"] == os.path.realpath(prog_path("snap_threads"))
    tids = [t["tid"] for t in doc["threads"]]
    assert sorted(tids) == threads_snap["tids"] and tids[0] == threads_snap["pid"]
    assert len(doc["regs"]) == len(tids) and all("fs_base" in r for r in doc["regs"])
    # Unreadable maps are listed with no bytes, never dropped.
    names = {m[3]: i for i, m in enumerate(doc["maps"])}
    assert "[vvar]" in names and doc["mem"][names["[vvar]"]]["size"] == 0
    assert doc["mem"][names["[stack]"]]["size"] > 0
    assert os.stat(threads_snap["path"]).st_mode & 0o777 == 0o600
    # Every thread's stack trace is symbolized and starts at its rip.
    syms = [[f["symbol"] or "" for f in st] for st in doc["stacktrace"]]
    for st, regs in zip(doc["stacktrace"], doc["regs"]):
        assert st[0]["pc"] == regs["rip"]
    flat = " ".join(s for st in syms for s in st)
    for fn in ("compute", "reader", "catcher", "main"):
        assert re.search(r"\b%s\+0x" % fn, flat), (fn, syms)
    assert any(f["fd"] == 1 for f in doc["fds"])


def test_target_output_unchanged(threads_snap):
    assert threads_snap["rc"] == 0
    assert threads_snap["rest"] == expected_threads_output()


def test_gdb_opens_it(threads_snap):
    if not shutil.which("gdb"):
        pytest.skip("gdb not installed (scripts/deps installs it)")
    doc = note_json(threads_snap["path"])
    r = subprocess.run(["gdb", "-batch", "-ex", "info threads", "-ex", "thread apply all bt",
                        "-ex", "info registers", prog_path("snap_threads"), threads_snap["path"]],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    # A live capture, as gcore's: no signal (the tracer's own stop is not one).
    assert "terminated with signal" not in r.stdout + r.stderr, r.stdout
    assert all(t["signal"] == 0 for t in doc["threads"])
    lwps = re.findall(r"\(LWP (\d+)\)", r.stdout)
    assert sorted(set(int(x) for x in lwps)) == threads_snap["tids"]
    for fn in ("compute", "reader", "catcher", "main"):
        assert re.search(r" in %s \(|#\d+\s+%s \(" % (fn, fn), r.stdout), fn
    rip = int(re.search(r"^rip\s+(0x[0-9a-f]+)", r.stdout, re.M).group(1), 16)
    assert rip == int(doc["regs"][0]["rip"], 16)


def test_eu_stack_and_readelf(threads_snap):
    if not shutil.which("eu-stack"):
        pytest.skip("elfutils not installed (scripts/deps installs it)")
    r = subprocess.run(["eu-stack", "--core", threads_snap["path"], "--executable",
                        prog_path("snap_threads")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert len(re.findall(r"^TID \d+:", r.stdout, re.M)) == len(threads_snap["tids"])
    assert "compute_step" in r.stdout or "compute" in r.stdout
    r = subprocess.run(["readelf", "-n", threads_snap["path"]], capture_output=True, text=True)
    assert r.returncode == 0
    for kind in ("NT_PRPSINFO", "NT_PRSTATUS", "NT_FPREGSET", "NT_X86_XSTATE", "NT_SIGINFO",
                 "NT_AUXV", "NT_FILE"):
        assert kind in r.stdout, kind
    assert r.stdout.count("NT_PRSTATUS") == len(threads_snap["tids"])
    assert "Unknown note type: (0x47424501)" in r.stdout


def test_old_note_type_still_reads(gebpf, root, tmp_path):
    """Snapshots written before the JSON note had its own type used 1: gebpf
    and the Python package still read them."""
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "python"))
    import gebpf as gp
    new = snap_det(tmp_path, "new.core", ["--at", "snap_here"])
    data = bytearray(new.read_bytes())
    at = data.index(b"GEBPF\0") - 4
    assert data[at:at + 4] == (0x47424501).to_bytes(4, "little")
    data[at:at + 4] = (1).to_bytes(4, "little")
    old = tmp_path / "old.core"
    old.write_bytes(bytes(data))
    for core in (new, old):
        r = run_gebpf(["show", str(core)])
        assert r.returncode == 0 and '"snap_here+0x0"' in r.stdout, r.stderr
        assert gp.Snapshot.load(str(core)).getMeta("point").startswith("at ")


# One fixed environment for the launched program: its size decides how many
# instructions the start-up code runs, so every run under comparison gets it.
DET_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}


def snap_det(tmp_path, name, extra=()):
    """Launch snap_det under gebpf snap.  Its fds are /dev/null: fds are
    process state, and pipes would differ (their inode) from run to run."""
    out = tmp_path / name
    args = [gebpf_path(), "snap", "-o", str(out)] + list(extra) + ["--", prog_path("snap_det")]
    rc = subprocess.call(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, timeout=120, env=DET_ENV)
    if rc != 0:
        r = subprocess.run(args, capture_output=True, text=True, timeout=120, env=DET_ENV)
        pytest.fail("gebpf snap failed (%d): %s" % (rc, r.stderr))
    return out


def test_launch_at_symbol_is_byte_identical(gebpf, root, tmp_path):
    a = snap_det(tmp_path, "a.core", ["--at", "snap_here"])
    b = snap_det(tmp_path, "b.core", ["--at", "snap_here"])
    assert a.read_bytes() == b.read_bytes()
    doc = note_json(a)
    assert doc["meta"]["point"].startswith("at 0x") and "snap_here" in doc["meta"]["point"]
    assert doc["stacktrace"][0][0]["symbol"] == "snap_here+0x0"
    assert doc["stacktrace"][0][1]["symbol"].startswith("main+0x")


def test_gdb_reads_ymm(gebpf, root, tmp_path):
    if "avx" not in open("/proc/cpuinfo").read().split():
        pytest.skip("no AVX on this CPU")
    if not shutil.which("gdb"):
        pytest.skip("gdb not installed")
    a = snap_det(tmp_path, "a.core", ["--at", "snap_here"])
    r = subprocess.run(["gdb", "-batch", "-ex", "p/x $ymm0.v32_int8", prog_path("snap_det"), str(a)],
                       capture_output=True, text=True, timeout=60)
    want = ", ".join(hex(b) for b in bytes.fromhex(
        "00112233445566778899aabbccddeeff0f1e2d3c4b5a69788796a5b4c3d2e1f0"))
    assert "{%s}" % want in r.stdout, r.stdout + r.stderr


def test_after_n_matches_trace(gebpf, root, tmp_path):
    a = snap_det(tmp_path, "a.core", ["--after", "1000"])
    b = snap_det(tmp_path, "b.core", ["--after", "1000"])
    assert a.read_bytes() == b.read_bytes()
    doc = note_json(a)
    assert doc["meta"]["vt"] == 1000 and doc["meta"]["point"] == "after 1000"
    t = tmp_path / "t.jsonl"
    r = run_gebpf(["trace", "--max-insns", "1001", "--max-events", "0", "-o", str(t), "--",
                   prog_path("snap_det")], stdin=subprocess.DEVNULL, env=DET_ENV)
    assert r.returncode == 0, r.stderr
    execs = [json.loads(l) for l in open(t) if '"t":"exec"' in l]
    assert len(execs) > 1000, "trace stopped early"
    assert execs[1000]["pc"] == doc["regs"][0]["rip"]


def test_launch_program_runs_on(gebpf, root, tmp_path):
    out = tmp_path / "x.core"
    r = run_gebpf(["snap", "-o", str(out), "--at", "snap_here", "--", prog_path("snap_det")])
    assert r.returncode == 0, r.stderr
    native = subprocess.run([prog_path("snap_det")], capture_output=True, text=True)
    assert native.stdout in r.stdout and native.stdout.startswith("sum ")


def test_bad_inputs(gebpf, root, tmp_path):
    r = run_gebpf(["snap"])
    assert r.returncode == 2 and r.stderr.startswith("gebpf: snap:")
    r = run_gebpf(["snap", "-p", "12x"])
    assert r.returncode == 2
    r = run_gebpf(["snap", "-p", "1", "--", "/bin/true"])
    assert r.returncode == 2
    p = subprocess.Popen(["/bin/true"])
    p.wait()
    out = tmp_path / "gone.core"
    r = run_gebpf(["snap", "-p", str(p.pid), "-o", str(out)])
    assert r.returncode == 1 and ("pid %d" % p.pid) in r.stderr, r.stderr
    assert not out.exists()
    r = run_gebpf(["snap", "--at", "no_such_symbol", "-o", str(out), "--", prog_path("snap_det")])
    assert r.returncode == 1 and "no_such_symbol" in r.stderr, r.stderr
    assert not out.exists()
    r = run_gebpf(["snap", "-o", str(tmp_path / "nodir" / "x.core"), "--", prog_path("snap_det")])
    assert r.returncode == 1 and "nodir" in r.stderr


@pytest.mark.parametrize("how", ["plain", "pidns-proc"])
def test_own_pid_refused(how, gebpf, root, tmp_path):
    """gebpf does not snapshot itself (it did, with exit 0): one line, exit 1,
    no file; named by its pid, or in a pid namespace of its own by its number
    in /proc (test_trace_cli.py OWN_PID)."""
    from test_trace_cli import own_pid
    out = tmp_path / "self.core"
    r = own_pid(how, "snap", "-o", out)
    assert r.returncode == 1, r.stderr
    assert r.stderr.count("\n") == 1 and "is gebpf itself; it cannot attach to itself" in r.stderr, \
        r.stderr
    assert not out.exists()


@pytest.mark.parametrize("extra", [[], ["--no-fork"], ["--at", "handle"]],
                         ids=["fork", "no-fork", "at"])
def test_stopped_process(extra, gebpf, root, tmp_path):
    """A process stopped by SIGSTOP (Ctrl-Z) is snapped at once, as gdb
    attaches to it (it hung before, and killed, said the process had exited),
    and left stopped: a request sent to it is not answered until SIGCONT,
    then answered as natively.  With --at the thread is run to the point
    first (as a running process's), and stays stopped there."""
    from test_pagetrap_attach import Server, answers
    from test_trace_cli import job_stop, send, silent, state, tracer_of
    want = answers([2, 3, 4])
    server = Server(0)
    try:
        assert server.ask(2) == want[2]
        job_stop(server.pid)
        out = tmp_path / "stopped.core"
        if extra[:1] == ["--at"]:
            send(server, 3)   # for handle to be reached: gebpf runs the thread there
        r = run_gebpf(["snap", "-p", str(server.pid), "-o", str(out)] + extra, timeout=30)
        assert r.returncode == 0 and r.stdout == "%s\n" % out, r.stderr
        assert r.stderr == "", r.stderr
        doc = note_json(out)
        assert doc["meta"]["pid"] == server.pid
        if extra[:1] == ["--at"]:
            assert int(doc["regs"][0]["rip"], 16) == symbol_addr("trap_server", "handle")
        assert state(server.pid) == "T" and tracer_of(server.pid) == 0
        if extra[:1] != ["--at"]:
            send(server, 3)
        assert silent(server, 0.5), "the stopped process ran after the snapshot"
        os.kill(server.pid, signal.SIGCONT)
        assert server.line(20) == want[3]
        assert server.ask(4) == want[4]
        assert server.finish() == b"bye 3\n"
        server.check_errors()
    finally:
        server.kill()


def symbol_addr(prog, name):
    from test_pagetrap import symbol
    return symbol(prog, name)[0]


def test_at_inside_an_instruction_is_refused(gebpf, root, tmp_path):
    """--at ADDR inside an instruction: a breakpoint there would corrupt it
    (and never be hit).  One line naming the instruction and the two
    addresses to use, exit 1, no file, and an attached target runs on to its
    own end (tests/progs/spin_fault.c: sp_run starts with a 3-byte mov)."""
    sp_run = int(subprocess.run(["nm", prog_path("spin_fault")], capture_output=True, text=True,
                                check=True).stdout.split(" T sp_run\n")[0].rsplit("\n", 1)[-1], 16)
    inside = "%#x" % (sp_run + 2)
    out = tmp_path / "x.core"
    r = run_gebpf(["snap", "--at", inside, "-o", str(out), "--", prog_path("spin_fault"), "2", "10"])
    assert r.returncode == 1, r.stderr
    want = ("gebpf: snap: --at %s: %s is inside the instruction at %#x (sp_run+0x0); run to an "
            "instruction: %#x or %#x" % (inside, inside, sp_run, sp_run, sp_run + 3))
    assert want in r.stderr.splitlines(), r.stderr
    assert not out.exists()
    p = subprocess.Popen([prog_path("spin_fault"), "400", "20000000"], stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.3)
        r = run_gebpf(["snap", "-p", str(p.pid), "--at", inside, "-o", str(out)])
        assert r.returncode == 1 and "is inside the instruction" in r.stderr, r.stderr
        assert not out.exists()
        stdout, _ = p.communicate(timeout=120)
    finally:
        p.kill()
    assert p.returncode == 0 and "faults 400" in stdout, (p.returncode, stdout)


def test_pid_gone_during_capture(gebpf, root, tmp_path):
    """Kill the target while gebpf captures 256 MiB of it: either the capture
    finished first (a valid file) or it fails clearly and leaves no file."""
    big = subprocess.Popen(["/usr/bin/python3", "-c",
                            "import sys,time; b=bytearray(b'x')*(256<<20); print('ready', flush=True); time.sleep(60)"],
                           stdout=subprocess.PIPE, text=True)
    assert big.stdout.readline().startswith("ready")
    out = tmp_path / "big.core"
    g = subprocess.Popen([gebpf, "snap", "-p", str(big.pid), "-o", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.05)
    big.kill()
    big.wait()
    _, err = g.communicate(timeout=120)
    if g.returncode == 0:
        note_json(out)
    else:
        assert g.returncode == 1 and ("pid %d" % big.pid) in err, err
        assert not out.exists()
    assert not [f for f in os.listdir(tmp_path) if ".tmp." in f], "temporary file left behind"

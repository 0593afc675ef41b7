"""gebpf resume and gebpf trace --from: a snapshot taken mid-computation runs
on to the same output and exit status as the uninterrupted program; the
--from trace is the tail of the full trace; --set/--poke change the outcome;
files are reopened at their offsets, sockets become /dev/null with a warning;
bad and multi-threaded snapshots are refused with one line."""
import json
import os
import subprocess
import sys

import pytest

from conftest import gebpf_path, prog_path, run_gebpf, threads_running

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
import gebpf as gp  # noqa: E402  (the package under python/, no install needed)

DET_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}


def snap(tmp_path, name, prog, extra, args=(), **kw):
    out = tmp_path / name
    r = subprocess.run([gebpf_path(), "snap", "-o", str(out)] + list(extra) + ["--", prog] + list(args),
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
                       env=DET_ENV, **kw)
    assert r.returncode == 0, r.stderr
    return out


def resume(path, *opts):
    return run_gebpf(["resume"] + list(opts) + [str(path)], stdin=subprocess.DEVNULL)


def native(prog, *args):
    return subprocess.run([prog] + list(args), capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("extra", [["--at", "snap_here"], ["--after", "1"], ["--after", "1000"],
                                   ["--after", "20000"]])
def test_resume_finishes_like_the_uninterrupted_run(gebpf, root, tmp_path, extra):
    s = snap(tmp_path, "a.core", prog_path("snap_det"), extra)
    want = native(prog_path("snap_det"))
    r = resume(s)
    assert (r.returncode, r.stdout) == (want.returncode, want.stdout), r.stderr
    assert r.stderr == ""


@pytest.mark.parametrize("aslr", [[], ["--aslr"]])
def test_dynamic_pie_and_moved_vdso(gebpf, root, tmp_path, aslr):
    """trap_dyn: PIE with libc and its own library mapped from their files.
    With --aslr the snapshot's vDSO is not where the helper's is (ASLR off):
    resume moves it there."""
    prog = prog_path("trap_dyn")
    def vdso(core):
        return [m[0] for m in gp.Snapshot.load(str(core)).getMemoryMaps() if m[3] == "[vdso]"]
    s = snap(tmp_path, "d.core", prog, aslr + ["--at", "dyn_hot"], ["5", "10"])
    want = native(prog, "5", "10")
    r = resume(s)
    assert (r.returncode, r.stdout) == (want.returncode, want.stdout), r.stderr
    assert r.stderr == ""
    if aslr:
        fixed = snap(tmp_path, "f.core", prog, ["--at", "dyn_hot"], ["5", "10"])
        assert vdso(s) and vdso(s) != vdso(fixed), "ASLR was off: the vDSO did not move"


def test_vector_registers_survive(gebpf, root, tmp_path):
    """resume_vec holds ymm0-15 (zmm0-31 and k1-7 where the CPU has AVX-512)
    across vec_checkpoint: the resumed run prints the registers it had.  The
    snapshot stores the standard XSAVE layout; a CPU that enumerates other
    offsets (AMD EPYC under this VM: AVX-512 at 832/896/1408) gets it back in
    its own layout, not as x87/SSE only."""
    prog = prog_path("resume_vec")
    s = snap(tmp_path, "v.core", prog, ["--at", "vec_checkpoint"])
    want = native(prog)
    assert want.returncode == 0 and want.stdout.count("mm") >= 16
    r = resume(s)
    assert (r.returncode, r.stdout) == (want.returncode, want.stdout), r.stderr
    assert r.stderr == ""


def test_exit_status_and_no_heap(gebpf, root, tmp_path):
    """exit_mid has no heap and exits with status 3 from inside the range."""
    s = snap(tmp_path, "e.core", prog_path("exit_mid"), ["--after", "2"])
    assert "[heap]" not in [m[3] for m in gp.Snapshot.load(str(s)).getMemoryMaps()]
    r = resume(s)
    assert r.returncode == 3, r.stderr


def test_files_reopened_sockets_replaced(gebpf, root, tmp_path):
    data = tmp_path / "in.txt"
    data.write_text("abcdefghij")
    prog = prog_path("resume_io")
    want = native(prog, str(data))
    assert (want.returncode, want.stdout) == (7, "abcd efgh 1 1\n")
    s = snap(tmp_path, "io.core", prog, ["--at", "resume_here"], [str(data)])
    fds = {f["fd"]: f for f in gp.Snapshot.load(str(s)).getFdInfo()}
    assert fds[3]["target"] == str(data) and fds[3]["offset"] == 4
    r = resume(s)
    # The file continues at offset 4; the socket fds are /dev/null (one
    # warning each); brk grows from the restored heap; exit status 7.
    assert (r.returncode, r.stdout) == (7, "abcd efgh 1 1\n"), r.stderr
    warns = r.stderr.splitlines()
    assert len(warns) == 2 and all("socket:[" in w and "/dev/null" in w for w in warns), warns
    assert all(w.startswith("gebpf: warning: resume: fd ") for w in warns)


def test_set_and_poke_change_the_outcome(gebpf, root, tmp_path):
    s = snap(tmp_path, "a.core", prog_path("snap_det"), ["--at", "snap_here"])
    regs = gp.Snapshot.load(str(s)).getRegisterContext().getRegisters()
    # snap_here(buf, n) sums buf[i] * (i + 1): n = 1 and buf[0] = 5 give 5.
    r = resume(s, "--set", "rsi=1", "--poke", "%#x=0500000000000000" % regs["rdi"])
    assert (r.returncode, r.stdout) == (0, "sum 5\n"), r.stderr
    r = resume(s, "--set", "rsi=0")
    assert (r.returncode, r.stdout) == (0, "sum 0\n"), r.stderr
    r = resume(s, "--set", "rip=0")
    assert r.returncode == 128 + 11 and "killed by SIGSEGV" in r.stderr
    for bad in (["--set", "nosuch=1"], ["--set", "rax"], ["--poke", "0x10=00"],
                ["--poke", "%#x=abc" % regs["rdi"]]):
        r = resume(s, *bad)
        assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, (bad, r.stderr)
        assert r.stderr.startswith("gebpf: resume: "), r.stderr


def test_bad_snapshots_refused(gebpf, root, tmp_path):
    junk = tmp_path / "junk.core"
    junk.write_bytes(b"not a core at all" * 10)
    for path in (junk, tmp_path / "missing.core"):
        r = resume(path)
        assert r.returncode == 1 and len(r.stderr.splitlines()) == 1, r.stderr
        assert r.stderr.startswith("gebpf: resume: ")
    r = run_gebpf(["resume"])
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1


def test_multithreaded_refused(gebpf, root, tmp_path):
    out = tmp_path / "t.core"
    with threads_running() as p:
        r = run_gebpf(["snap", "-p", str(p.pid), "-o", str(out)])
    assert r.returncode == 0, r.stderr
    r = resume(out)
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1
    assert "only single-threaded snapshots can be resumed" in r.stderr


def trace_lines(path):
    with open(path) as f:
        return f.read().splitlines()


def test_trace_from_is_the_tail_of_the_full_trace(gebpf, root, tmp_path):
    rec = tmp_path / "rec"
    r = subprocess.run([gebpf_path(), "trace", "--range", "snap_here", "--out", str(rec),
                        "--snap-at", "vt=500", "--", prog_path("snap_det")],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, env=DET_ENV, timeout=300)
    assert r.returncode == 0, r.stderr
    full = trace_lines(rec / "blobs" / "trace.jsonl")
    start = next(i for i, line in enumerate(full) if json.loads(line).get("vt") == 500)
    core = rec / "blobs" / "snap-500.core"
    outs = []
    for k in range(2):
        out = tmp_path / ("from%d.jsonl" % k)
        r = subprocess.run([gebpf_path(), "trace", "--range", "snap_here", "--from", str(core), "-o",
                            str(out)], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           env=DET_ENV, timeout=300)
        assert r.returncode == 0, r.stderr
        assert r.stdout == native(prog_path("snap_det")).stdout
        outs.append(out.read_bytes())
    tail = trace_lines(tmp_path / "from0.jsonl")
    assert json.loads(tail[0])["vt"] == 500
    assert tail[:-1] == full[start:-1]          # line for line, vt included
    summary = json.loads(tail[-1])
    assert summary["t"] == "summary" and summary["insns"] == json.loads(full[-1])["insns"] - 500
    assert outs[0] == outs[1], "two resumes of one snapshot gave different traces"

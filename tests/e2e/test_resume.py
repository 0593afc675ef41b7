"""gebpf resume and gebpf trace --from: a snapshot taken mid-computation runs
on to the same output and exit status as the uninterrupted program; the
--from trace is the tail of the full trace; --set/--poke change the outcome;
files are reopened at their offsets, kernel objects (epoll, eventfd, timerfd,
signalfd, pipes and socket pairs held whole) made again, the rest /dev/null
with a warning;
four computing threads and a Python thread pool run on to their results;
bad snapshots are refused with one line."""
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from conftest import gebpf_path, prog_path, run_gebpf, trace_bytes

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


def test_files_reopened_socket_pair_made_again(gebpf, root, tmp_path):
    data = tmp_path / "in.txt"
    data.write_text("abcdefghij")
    prog = prog_path("resume_io")
    want = native(prog, str(data))
    assert (want.returncode, want.stdout) == (7, "abcd efgh 1 1\n")
    s = snap(tmp_path, "io.core", prog, ["--at", "resume_here"], [str(data)])
    fds = {f["fd"]: f for f in gp.Snapshot.load(str(s)).getFdInfo()}
    assert fds[3]["target"] == str(data) and fds[3]["offset"] == 4
    assert fds[4]["kind"] == fds[5]["kind"] == "unix"
    assert (fds[4]["peer"], fds[5]["peer"]) == (fds[5]["ino"], fds[4]["ino"])
    r = resume(s)
    # The file continues at offset 4; the socket pair is made again (the
    # write succeeds, nothing is said); brk grows from the restored heap;
    # exit status 7.
    assert (r.returncode, r.stdout) == (7, "abcd efgh 1 1\n"), r.stderr
    assert r.stderr == "", r.stderr


def test_kernel_object_fds_made_again(gebpf, root, tmp_path):
    """resume_fds's eventfd (count 5), pipe holding "hello", timerfd, signalfd,
    epoll watching three of them, inotify watches (by path, the same wds)
    and sealed memfd: the snapshot's note says what each holds, and the resumed program finds each as it left it, at the same
    numbers, with the same O_CLOEXEC and O_NONBLOCK (its lines are the
    uninterrupted run's)."""
    prog = prog_path("resume_fds")
    want = native(prog)
    assert want.returncode == 0 and "eventfd 8 5" in want.stdout, want
    s = snap(tmp_path, "fds.core", prog, ["--at", "resume_here"])
    fds = {f["fd"]: f for f in gp.Snapshot.load(str(s)).getFdInfo()}
    kinds = {fd: f.get("kind") for fd, f in fds.items() if fd > 2}
    assert kinds == {3: "eventfd", 4: "pipe", 5: "pipe", 6: "timerfd", 7: "signalfd",
                     8: "epoll", 9: "inotify", 10: "memfd"}, kinds
    assert fds[3]["count"] == "0x5" and fds[4]["bytes"] == b"hello".hex()
    assert fds[4]["ino"] == fds[5]["ino"] and "bytes" not in fds[5]
    assert fds[7]["sigmask"] == "0x200"  # SIGUSR1
    assert sorted((e["fd"], e["data"]) for e in fds[8]["interest"]) == [
        (3, "0x1111"), (4, "0x2222"), (6, "0x3333")]
    assert [(w["wd"], w["path"]) for w in fds[9]["watches"]] == [(1, "/tmp"), (2, "/")]
    assert (fds[10]["name"], fds[10]["bytes"], fds[10]["seals"]) == ("gbm", b"memdata".hex(), "0x6")
    r = resume(s)
    assert (r.returncode, r.stdout) == (0, want.stdout), r.stderr
    assert "warning" not in r.stderr, r.stderr


def test_fd_choices_replace_what_resume_makes(gebpf, root, tmp_path):
    """--fd N=PATH opens PATH at N instead (resume_fds's pipe read end reads
    the file; the epoll's interest in it is named, a file is not pollable),
    --fd N=close leaves N closed; a bad --fd is refused in one line."""
    s = snap(tmp_path, "fds.core", prog_path("resume_fds"), ["--at", "resume_here"])
    f = tmp_path / "in.txt"
    f.write_text("hey")
    r = resume(s, "--fd", "4=%s" % f, "--fd", "5=close")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "epoll 1 ready 0x1111" and lines[2].startswith("pipe 3 hey "), lines
    assert r.stderr.splitlines() == [
        "gebpf: warning: resume: fd 8 (epoll): its interest in fd 4 not restored: Operation "
        "not permitted"], r.stderr
    for bad, code in (("99=close", 1), ("1=close", 1), ("x=close", 2), ("4=", 2)):
        r = resume(s, "--fd", bad)
        assert r.returncode == code and len(r.stderr.splitlines()) == 1, (bad, r.stderr)


def rewrite_note(path, edit):
    """The snapshot's JSON note edited in place (edit(dict)), written back
    at the same length (shorter: padded with spaces, which JSON allows)."""
    data = bytearray(open(path, "rb").read())
    at = data.index(b'{"version":')
    old, end = json.JSONDecoder().raw_decode(data[at:].decode("utf-8", "replace"))
    new = old
    edit(new)
    text = json.dumps(new, separators=(",", ":")).encode()
    assert len(text) <= end, "the edit made the note longer"
    data[at:at + end] = text + b" " * (end - len(text))
    open(path, "wb").write(bytes(data))


def test_old_and_bad_fd_kinds_in_a_note(gebpf, root, tmp_path):
    """A note written before fd kinds (no "kind") still loads and resumes,
    each object named and replaced by /dev/null; a kind without its fields
    is refused in one line."""
    s = snap(tmp_path, "fds.core", prog_path("resume_fds"), ["--at", "resume_here"])

    def strip(d):
        for f in d["fds"]:
            for k in [k for k in f if k not in ("fd", "target", "flags", "offset")]:
                del f[k]
    old = tmp_path / "old.core"
    shutil.copy(s, old)
    rewrite_note(old, strip)
    r = resume(old)
    warns = [ln for ln in r.stderr.splitlines() if "replaced by /dev/null" in ln]
    assert len(warns) == 8, r.stderr
    assert r.stdout.startswith("epoll -1 ready 0\n"), r.stdout  # (/dev/null is no epoll)

    def bad(d):
        f = next(f for f in d["fds"] if f["fd"] == 3)
        for k in ("count", "semaphore"):
            del f[k]
        f["kind"] = "epoll"
    rewrite_note(s, bad)
    r = resume(s)
    err = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(err) == 1 and "epoll fd needs its interest list" in err[0], \
        r.stderr


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


def note(path):
    """The snapshot's JSON note, read straight from the file."""
    data = open(path, "rb").read()
    return json.JSONDecoder().raw_decode(data[data.index(b'{"version":'):].decode("utf-8", "replace"))[0]


def snap_running(tmp_path, argv, settle=0.3):
    """Start argv (it prints "ready PID" first), snap -p it after settle s
    while it runs, wait for its own end; (snapshot, its stdout)."""
    out = tmp_path / "live.core"
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                         env=DET_ENV)
    try:
        assert p.stdout.readline().startswith("ready ")
        time.sleep(settle)
        r = run_gebpf(["snap", "-p", str(p.pid), "-o", str(out)])
        assert r.returncode == 0, r.stderr
        rest = p.communicate(timeout=120)[0]
    finally:
        p.kill()
        p.wait()
    return out, rest


def test_four_threads_resume_to_the_uninterrupted_result(gebpf, root, tmp_path):
    """resume_threads: four threads computing when snap -p stops them; the
    resumed process runs all four on, joins them with pthread_join (the
    clear_child_tid word) and prints what the uninterrupted run printed."""
    # 300M steps a thread: ~2 s natively here, so the snapshot (0.1 s in)
    # finds all four still computing however quiet the machine is (60M
    # ended before the snapshot on an idle one).
    argv = [prog_path("resume_threads"), "300"]
    s, rest = snap_running(tmp_path, argv, settle=0.1)
    doc = note(s)
    assert len(doc["threads"]) == 5
    computing = [st for st in doc["stacktrace"] if any("work" in (f["symbol"] or "") for f in st)]
    assert len(computing) == 4, doc["stacktrace"]
    assert all(t.get("clear_child_tid") for t in doc["threads"])
    r = resume(s)
    assert (r.returncode, r.stdout) == (0, rest), r.stderr
    assert r.stdout.count("thread ") == 4 and "steps %d" % (4 * (300000000 >> 20) << 20) in r.stdout
    assert r.stderr == ""


def test_python_thread_pool_resumes(gebpf, root, tmp_path):
    """Debian's python3 with a ThreadPoolExecutor mid-run: the resumed
    interpreter finishes the pool's work and prints the same digests."""
    # 1.6M updates a task: ~4 s natively here (400,000, ~1 s, had ended,
    # a zombie, before the snapshot of a loaded CI run)
    argv = ["/usr/bin/python3", os.path.join(HERE, "..", "progs", "py_pool.py"), "1600000"]
    s, rest = snap_running(tmp_path, argv, settle=0.2)
    assert len(note(s)["threads"]) == 5
    r = resume(s)
    assert (r.returncode, r.stdout) == (0, rest), r.stderr
    assert len(r.stdout.split()) == 8
    assert r.stderr == ""


def test_asyncio_resumes_with_its_own_pid(gebpf, root, tmp_path):
    """Debian's python3 running an asyncio loop mid-run (py_async.py): its
    loop refuses to run under another pid, so a plain resume dies with
    "no running event loop"; with --new-pidns it has its own pid (and tids)
    again, in a new pid namespace, and prints the uninterrupted run's lines,
    its pid among them."""
    argv = ["/usr/bin/python3", os.path.join(HERE, "..", "progs", "py_async.py"), "1000000"]
    s, rest = snap_running(tmp_path, argv, settle=0.3)
    assert rest.endswith("\npid %d\n" % note(s)["meta"]["pid"]), rest
    r = resume(s)
    assert r.returncode != 0 and "no running event loop" in r.stderr, (r.returncode, r.stderr)
    r = resume(s, "--new-pidns")
    assert (r.returncode, r.stdout) == (0, rest), r.stderr
    assert r.stderr == ""


def test_new_pidns_keeps_every_thread_s_tid(gebpf, root, tmp_path):
    """resume_threads (four computing threads) resumed with --new-pidns:
    each thread has the tid it had (NSpid's last field), the result is the
    uninterrupted one, and an exit status comes back through the namespace."""
    s, rest = snap_running(tmp_path, [prog_path("resume_threads"), "300"], settle=0.1)
    tids = sorted(t["tid"] for t in note(s)["threads"])
    assert len(tids) == 5
    p = subprocess.Popen([gebpf_path(), "resume", "--new-pidns", str(s)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)

    def children(pids):
        out = []
        for q in pids:
            try:
                out += [int(x) for x in open("/proc/%d/task/%d/children" % (q, q)).read().split()]
            except OSError:
                pass
        return out

    def ns_tid(pid, t):
        status = open("/proc/%d/task/%s/status" % (pid, t)).read()
        return int(status.split("NSpid:")[1].split("\n")[0].split()[-1])
    try:
        seen = []
        for _ in range(300):
            # gebpf -> its keeper -> the namespace's init -> the process
            procs = children(children(children([p.pid])))
            try:
                seen = sorted(ns_tid(procs[0], t) for t in os.listdir("/proc/%d/task" % procs[0]))
            except (OSError, IndexError):
                seen = []
            if len(seen) == len(tids):
                break
            time.sleep(0.02)
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
        p.wait()
    assert seen == tids, (seen, tids)
    assert (p.returncode, out) == (0, rest), err


def trace_lines(path):
    with open(path) as f:
        return f.read().splitlines()


def test_trace_from_is_the_tail_of_the_full_trace(gebpf, root, tmp_path):
    rec = tmp_path / "rec"
    r = subprocess.run([gebpf_path(), "trace", "--range", "snap_here", "--out", str(rec),
                        "--snap-at", "vt=500", "--", prog_path("snap_det")],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, env=DET_ENV, timeout=300)
    assert r.returncode == 0, r.stderr
    full = trace_bytes(rec / "blobs" / "trace.jsonl.zst").decode().splitlines()
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


def test_at_symbol_records_vt_0_and_from_continues(gebpf, root, tmp_path):
    """snap --at SYMBOL of a launched program stops at the symbol's first
    arrival: meta.vt is 0 (no instruction of a range starting there ran), and
    trace --range SYMBOL --from runs the same instructions, vt for vt, as the
    full trace.  At a bare address gebpf does not know: vt null, and
    trace --from says it starts at 0."""
    s = snap(tmp_path, "at.core", prog_path("snap_det"), ["--at", "snap_here"])
    assert note(s)["meta"]["vt"] == 0
    # The breakpoint's SIGTRAP is the tracer's, not the program's: no signal.
    assert note(s)["threads"][0]["signal"] == 0
    if shutil.which("gdb"):
        g = subprocess.run(["gdb", "-batch", "-ex", "bt 1", prog_path("snap_det"), str(s)],
                           capture_output=True, text=True, timeout=120)
        assert "snap_here" in g.stdout and "terminated with signal" not in g.stdout + g.stderr
    full, frm = tmp_path / "full.jsonl", tmp_path / "from.jsonl"
    for args, out in ((["--", prog_path("snap_det")], full), (["--from", str(s)], frm)):
        r = subprocess.run([gebpf_path(), "trace", "--range", "snap_here", "-o", str(out)] + args,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, env=DET_ENV,
                           timeout=300)
        assert r.returncode == 0 and r.stderr == "", r.stderr
    execs = [[(o["pc"], o["vt"]) for o in map(json.loads, trace_lines(p)) if o["t"] == "exec"]
             for p in (full, frm)]
    assert execs[0] == execs[1] and execs[0][0][1] == 0
    addr = note(s)["regs"][0]["rip"]
    s2 = snap(tmp_path, "addr.core", prog_path("snap_det"), ["--at", addr])
    assert note(s2)["meta"]["vt"] is None
    r = run_gebpf(["trace", "--range", "snap_here", "--from", str(s2), "-o", str(tmp_path / "a.jsonl")],
                  stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and "vt starts at 0" in r.stderr, r.stderr

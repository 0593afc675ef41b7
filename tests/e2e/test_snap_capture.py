"""gebpf snap's capture: the copy-on-write copy (the target frozen only for
registers and maps), --no-fork, memory through a fixed buffer, holes, the
read-only reader, and what a kill leaves.  The target is tests/progs/snap_mem."""
import json
import os
import re
import resource
import subprocess
import time

import pytest
from elftools.elf.elffile import ELFFile

from conftest import anyuser_copy, gebpf_path, prog_path

WALL = 0x40000000  # __WALL: the copy is a clone child (exit signal 0)


class Target:
    """snap_mem MODE ARG, its "ready" addresses, and its report on demand."""

    def __init__(self, mode, arg="1", cpu=None, preexec_fn=None, exe=None):
        argv = [exe or prog_path("snap_mem"), mode, str(arg)]
        if cpu is not None:
            argv = ["taskset", "-c", str(cpu)] + argv
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  preexec_fn=preexec_fn)
        line = self.p.stdout.readline()
        assert line.startswith("ready "), line
        self.addrs = [int(x, 16) if x.startswith("0x") else int(x) for x in line.split()[1:]]
        self.pid = self.p.pid

    def report(self):
        self.p.stdin.write("\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().split()

    def end(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


def hwm_kib(pid):
    """VmHWM of PID (KiB), 0 once it is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for ln in f:
                if ln.startswith("VmHWM:"):
                    return int(ln.split()[1])
    except OSError:
        pass
    return 0


def snap(args, out, timeout=300, cwd=None):
    """gebpf snap ARGS -o OUT; returns (rc, stderr, gebpf's peak RSS in KiB).

    The peak is VmHWM, read every 20 ms while gebpf runs: the high-water
    mark of gebpf's own address space.  wait4's ru_maxrss cannot be used: the
    kernel carries the RSS of the address space a process had before exec
    into it (exec_mmap), so a child forked or vforked from a pytest grown to
    hundreds of MiB over a full run reports that size whatever it does."""
    g = subprocess.Popen([gebpf_path(), "snap", "-v", "-o", str(out)] + [str(a) for a in args],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=cwd)
    deadline = time.time() + timeout
    peak = 0
    while True:
        peak = max(peak, hwm_kib(g.pid))
        pid, status, _ = os.wait4(g.pid, os.WNOHANG)
        if pid:
            break
        assert time.time() < deadline, "gebpf snap did not finish in %d s" % timeout
        time.sleep(0.02)
    err = g.stderr.read()
    g.returncode = os.waitstatus_to_exitcode(status)
    return g.returncode, err, peak


def load_bytes(path, addr, n):
    """n bytes at addr from the core's PT_LOADs (holes read as zeros)."""
    with open(path, "rb") as f:
        for seg in ELFFile(f).iter_segments():
            if seg["p_type"] != "PT_LOAD":
                continue
            lo, size = seg["p_vaddr"], seg["p_memsz"]
            if lo <= addr < lo + size:
                assert seg["p_filesz"] == size, "map has no bytes"
                f.seek(seg["p_offset"] + addr - lo)
                return f.read(n)
    raise AssertionError("0x%x in no PT_LOAD" % addr)


def our_children():
    """(pid, state) of each child of this pytest process."""
    me, out = os.getpid(), []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            st = open("/proc/%s/status" % d).read()
        except OSError:
            continue
        if int(re.search(r"^PPid:\s+(\d+)", st, re.M).group(1)) == me:
            out.append((int(d), re.search(r"^State:\s+(\S)", st, re.M).group(1)))
    return out


_before = set()


@pytest.fixture(autouse=True)
def _children_before():
    """The children this process had before the test: an xdist worker runs
    other modules' tests too, and a snapshot's copy made there (a clone child
    of the worker, which only a __WALL wait collects) may still be a zombie."""
    _before.clear()
    _before.update(pid for pid, _ in our_children())
    yield


def children_left(exclude):
    """Children made during this test, other than exclude: (pid, state) each."""
    return [(pid, st) for pid, st in our_children()
            if pid not in exclude and pid not in _before]


def reap_copies(target_pid):
    """The copy is a clone child of the target's parent (us): after gebpf
    ends it is at most a zombie that only a __WALL wait collects.  Assert
    that nothing of it runs, and collect it."""
    left = children_left({target_pid})
    for pid, state in left:
        if state != "Z":
            time.sleep(0.5)
            state = open("/proc/%d/status" % pid).read().split("State:")[1].split()[0] \
                if os.path.exists("/proc/%d" % pid) else "Z"
        assert state == "Z", "a copy (pid %d) is still alive: %s" % (pid, state)
        try:
            os.waitpid(pid, WALL)
        except ChildProcessError:
            pass
    return left


def test_fork_and_no_fork_give_identical_files(gebpf, root, tmp_path):
    # Pinned to one CPU and blocked in read(): nothing changes between captures
    # (the kernel writes the CPU number into the rseq area).
    t = Target("regions", cpu=0)
    try:
        outs = []
        for i, extra in enumerate([["--no-fork"], [], ["--no-fork"], []]):
            out = tmp_path / ("%d.core" % i)
            rc, err, _ = snap(extra + ["-p", t.pid], out)
            assert rc == 0, err
            assert ("copy-on-write copy pid" in err) == (not extra), err
            assert "warning" not in err, err
            # -v: the three phases, in order, one line each.
            phases = [l.split()[2] for l in err.splitlines() if l.startswith("gebpf: snap: ")]
            assert phases == ["freeze", "copy", "sync"], err
            outs.append(out.read_bytes())
        assert outs[0] == outs[1] == outs[2] == outs[3]
        assert t.report() == ["sigchld", "0", "children", "0"]
    finally:
        t.end()
    reap_copies(t.pid)


def test_regions_fork_does_not_copy(gebpf, root, tmp_path):
    """MADV_DONTFORK, MADV_WIPEONFORK and MAP_SHARED bytes are the process's;
    the program sees no SIGCHLD and no child to wait for.  (-o without a
    directory: the scratch file goes to the current one.)"""
    t = Target("regions")
    try:
        out = tmp_path / "r.core"
        rc, err, _ = snap(["-p", t.pid], "r.core", cwd=tmp_path)
        assert rc == 0 and "copy-on-write" in err, err
        dc, wf, sh = t.addrs
        assert load_bytes(out, dc, 4 * 4096) == b"\xdc" * 3 * 4096 + bytes(4096)
        assert load_bytes(out, wf, 4 * 4096) == b"\x3f" * 3 * 4096 + bytes(4096)
        assert load_bytes(out, sh, 4 * 4096) == b"\x5a" * 3 * 4096 + bytes(4096)
        time.sleep(0.2)
        assert t.report() == ["sigchld", "0", "children", "0"]
    finally:
        t.end()
    reap_copies(t.pid)


@pytest.mark.parametrize("mode", [[], ["--no-fork"]])
def test_counter_snapshot_is_one_instant(gebpf, root, tmp_path, mode):
    """A thread writes counter v into every page, page after page, forever:
    an instant holds v in a prefix of the pages and v-1 in the rest."""
    t = Target("counter", 64)
    try:
        time.sleep(0.3)
        out = tmp_path / "c.core"
        rc, err, _ = snap(mode + ["-p", t.pid], out)
        assert rc == 0, err
        base, size = t.addrs
        data = load_bytes(out, base, size)
        vals = [int.from_bytes(data[o:o + 8], "little") for o in range(0, size, 4096)]
        hi = max(vals)
        assert set(vals) <= {hi, hi - 1}, sorted(set(vals))[:10]
        k = vals.index(hi - 1) if hi - 1 in vals else len(vals)
        assert all(v == hi for v in vals[:k]) and all(v == hi - 1 for v in vals[k:]), \
            "pages from two instants interleave"
    finally:
        t.end()
    reap_copies(t.pid)


def test_rlimit_nproc_falls_back(gebpf, root, tmp_path):
    """(snap_mem runs as nobody: a copy it can reach, conftest.anyuser_copy)"""
    def drop():
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
        os.setgid(65534)
        os.setuid(65534)
    t = Target("regions", preexec_fn=drop, exe=anyuser_copy(prog_path("snap_mem")))
    try:
        out = tmp_path / "n.core"
        rc, err, _ = snap(["-p", t.pid], out)
        assert rc == 0, err
        warn = [l for l in err.splitlines() if "warning" in l]
        assert len(warn) == 1 and "no copy-on-write copy" in warn[0] and \
            "capturing with the process stopped" in warn[0], err
        assert "stopped until the file was written" in err
        assert load_bytes(out, t.addrs[0], 8) == b"\xdc" * 8
        assert t.report() == ["sigchld", "0", "children", "0"]
    finally:
        t.end()
    assert not children_left({t.pid})


def allow_all_seccomp():
    """A seccomp filter that allows everything (Seccomp: 2 in /proc/PID/status)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)

    class Filter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                    ("k", ctypes.c_uint)]

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]

    ret_allow = Filter(0x06, 0, 0, 0x7fff0000)   # BPF_RET|BPF_K, SECCOMP_RET_ALLOW
    prog = Prog(1, ctypes.pointer(ret_allow))
    if libc.prctl(38, 1, 0, 0, 0) or libc.prctl(22, 2, ctypes.byref(prog), 0, 0):
        raise OSError(ctypes.get_errno(), "seccomp")


def test_seccomp_filter_falls_back(gebpf, root, tmp_path):
    """A clone under a seccomp filter could kill the program: not tried."""
    t = Target("regions", preexec_fn=allow_all_seccomp)
    try:
        assert re.search(r"^Seccomp:\s+2$", open("/proc/%d/status" % t.pid).read(), re.M)
        out = tmp_path / "s.core"
        rc, err, _ = snap(["-p", t.pid], out)
        assert rc == 0, err
        warn = [l for l in err.splitlines() if "warning" in l]
        assert len(warn) == 1 and "seccomp filter" in warn[0], err
        assert load_bytes(out, t.addrs[2], 8) == b"\x5a" * 8
        assert t.report() == ["sigchld", "0", "children", "0"]
    finally:
        t.end()
    assert not children_left({t.pid})


@pytest.mark.parametrize("mode", [[], ["--no-fork"]])
def test_gebpf_killed_mid_capture(gebpf, root, tmp_path, mode):
    """SIGKILL gebpf while it copies 1 GiB: the target runs on, no copy is
    left running, and no file at all is left (O_TMPFILE)."""
    t = Target("stall", 1024)
    try:
        out = tmp_path / "k.core"
        g = subprocess.Popen([gebpf, "snap", "-v", "-o", str(out)] + mode + ["-p", str(t.pid)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if not mode:
            line = g.stderr.readline()
            assert "freeze" in line, line
            time.sleep(0.1)
        else:
            time.sleep(0.4)
        assert g.poll() is None, "gebpf finished before the kill: the test needs a slower copy"
        g.kill()
        g.wait(timeout=30)
        # gebpf's worker ends the capture as SIGTERM does (docs/snap.md):
        # it finishes the chunk it is copying, then detaches; on a loaded
        # machine that took more than the 0.2 s this waited once
        deadline = time.monotonic() + 10
        while True:
            st = open("/proc/%d/status" % t.pid).read()
            if re.search(r"^TracerPid:\s+0$", st, re.M) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert re.search(r"^TracerPid:\s+0$", st, re.M), "target still traced after 10 s"
        assert os.listdir(tmp_path) == [], os.listdir(tmp_path)
        rep = t.report()
        assert rep[0] == "stall_us", rep
    finally:
        t.end()
    reap_copies(t.pid)


@pytest.mark.parametrize("case", ["no-dir", "dir", "dir-slash", "empty"])
def test_output_checked_before_the_target_stops(gebpf, root, tmp_path, case):
    """An output that cannot be a file fails before anything is stopped (-v
    shows no freeze): a missing directory, an existing directory (with or
    without a final slash), an empty name (a usage error)."""
    out, rc, why = {
        "no-dir": (str(tmp_path / "no" / "x.core"), 1, "cannot create a file there"),
        "dir": (str(tmp_path), 1, "is a directory"),
        "dir-slash": (str(tmp_path / "sub") + "/", 1, "is a directory"),
        "empty": ("", 2, "empty file name"),
    }[case]
    t = Target("regions")
    try:
        r = subprocess.run([gebpf, "snap", "-v", "-p", str(t.pid), "-o", out],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == rc and why in r.stderr, r.stderr
        assert len(r.stderr.splitlines()) == 1 and "freeze" not in r.stderr, r.stderr
        st = open("/proc/%d/status" % t.pid).read()
        assert re.search(r"^TracerPid:\s+0$", st, re.M)
        assert t.report() == ["sigchld", "0", "children", "0"]
        assert os.listdir(tmp_path) == [], os.listdir(tmp_path)
    finally:
        t.end()
    assert reap_copies(t.pid) == []


def test_untouched_30_gib_costs_nothing(gebpf, root, tmp_path):
    """30 GiB of MAP_NORESERVE memory with three pages touched: gebpf's memory
    stays small, untouched pages are holes and go unhashed, a populated zero page reads as
    zeros, and the 30 GiB snapshot opens (read-only mapping)."""
    t = Target("noreserve", 30)
    try:
        base, size = t.addrs
        out = tmp_path / "big.core"
        rc, err, maxrss = snap(["-p", t.pid], out, timeout=600)
        assert rc == 0, err
        assert maxrss < 200 * 1024, "gebpf grew to %d MiB" % (maxrss // 1024)
    finally:
        t.end()
    reap_copies(t.pid)
    st = os.stat(out)
    assert st.st_size > 30 << 30
    assert st.st_blocks * 512 < 64 << 20, "untouched pages were written"
    assert load_bytes(out, base, 10) == b"first page"
    assert load_bytes(out, base + size // 2, 11) == b"middle page"
    assert load_bytes(out, base + size - 4096, 4096) == bytes(4096)
    r = subprocess.run([gebpf, "read", str(out), hex(base + size // 2), "11"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and "middle page" in r.stdout, r.stdout + r.stderr
    r = subprocess.run([gebpf, "show", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    # the 30 GiB map has no digest (hashing its zeros took 19 CPU s); every
    # other map with bytes has one (docs/snapshot-format.md)
    mem = {int(m["base"], 16): m for m in json.loads(r.stdout)["mem"]}
    assert mem[base]["size"] == size and mem[base]["sha256"] is None, mem[base]
    assert all(re.fullmatch(r"[0-9a-f]{64}", m["sha256"]) for b, m in mem.items()
               if b != base and m["size"]), mem


def test_copy_keeps_sharing_its_pages(gebpf, root, tmp_path):
    """Reading the copy must not unshare its copy-on-write pages (pinning
    them with process_vm_readv would: the copy would end up owning a private
    copy of the whole memory).  Sample the copy's smaps_rollup while gebpf
    reads it."""
    t = Target("stall", 1024)
    try:
        g = subprocess.Popen([gebpf, "snap", "-v", "-o", str(tmp_path / "s.core"), "-p", str(t.pid)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        line = g.stderr.readline()
        copy = int(re.search(r"copy-on-write copy pid (\d+)", line).group(1))
        private, samples = 0, 0
        while g.poll() is None:
            try:
                roll = open("/proc/%d/smaps_rollup" % copy).read()
            except OSError:
                break
            kb = sum(int(x) for x in re.findall(r"^Private_(?:Clean|Dirty):\s+(\d+) kB", roll, re.M))
            private = max(private, kb)
            samples += 1
            time.sleep(0.05)
        g.communicate(timeout=120)
        assert g.returncode == 0
        assert samples >= 2, "the copy was read too fast to sample (%d samples)" % samples
        assert private < 64 * 1024, "the copy holds %d MiB of private pages" % (private // 1024)
    finally:
        t.end()
    reap_copies(t.pid)


def test_read_only_shared_mapping_is_read_from_the_copy(gebpf, root, tmp_path):
    """A MAP_SHARED mapping of a file opened read-only (no VM_MAYWRITE: a
    JVM's lib/modules) is not copied during the freeze: the process can
    never change it, so the copy reads it later (docs/snap.md).  Its bytes
    in the snapshot are the file's, and so are a writable shared mapping's,
    which is still copied during the freeze."""
    data = tmp_path / "ro.bin"
    data.write_bytes(bytes(range(256)) * 4096 * 4)  # 4 MiB
    rw = tmp_path / "rw.bin"
    rw.write_bytes(b"\x5a" * 65536)
    code = ("import mmap, os, sys, time\n"
            "f = os.open(sys.argv[1], os.O_RDONLY)\n"
            "m = mmap.mmap(f, 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)\n"
            "g = os.open(sys.argv[2], os.O_RDWR)\n"
            "w = mmap.mmap(g, 0, flags=mmap.MAP_SHARED)\n"
            "w[0:4] = b'live'\n"
            "print('ready', flush=True)\n"
            "time.sleep(60)\n")
    p = subprocess.Popen(["/usr/bin/python3", "-c", code, str(data), str(rw)],
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        maps = open("/proc/%d/maps" % p.pid).read().splitlines()
        ro = next(ln for ln in maps if ln.endswith(str(data)))
        wr = next(ln for ln in maps if ln.endswith(str(rw)))
        assert ro.split()[1] == "r--s" and wr.split()[1] == "rw-s", (ro, wr)
        out = tmp_path / "s.core"
        r = subprocess.run([gebpf, "snap", "-v", "-p", str(p.pid), "-o", str(out)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert "copy-on-write copy" in r.stderr, r.stderr
        for line, want in ((ro, data.read_bytes()), (wr, b"live" + b"\x5a" * 65532)):
            start = int(line.split("-")[0], 16)
            for off in (0, len(want) // 2 + 13, len(want) - 64):
                got = subprocess.run([gebpf, "read", str(out), hex(start + off), "64"],
                                     capture_output=True, text=True, timeout=60)
                assert got.returncode == 0, got.stderr
                hexes = re.findall(r"\b[0-9a-f]{2}\b", " ".join(x.split("|")[0].split(None, 1)[1]
                                                          for x in got.stdout.splitlines()))
                assert bytes.fromhex("".join(hexes)) == want[off:off + 64], (line, off)
    finally:
        p.kill()
        p.wait()

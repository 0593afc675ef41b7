"""The Python package (python/, imported from there: no install needed) against
snapshots and traces gebpf wrote: every Snapshot method compared with what
`gebpf show` / `gebpf read` / gdb print and with the live process; a snapshot
saved from Python after an edit is read back by gdb, gebpf read and resume."""
import hashlib
import json
import os
import re
import subprocess
import sys
import tracemalloc

import pytest

from conftest import gebpf_path, prog_path, run_gebpf, threads_running, trace_bytes

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
import gebpf as gp  # noqa: E402

DET_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}
YMM_PATTERN = bytes.fromhex("00112233445566778899aabbccddeeff0f1e2d3c4b5a69788796a5b4c3d2e1f0")


@pytest.fixture(scope="module")
def det(gebpf, root, tmp_path_factory):
    """snap_det stopped at snap_here: the snapshot and `gebpf show`'s JSON of it."""
    out = tmp_path_factory.mktemp("py") / "det.core"
    r = subprocess.run([gebpf_path(), "snap", "-o", str(out), "--at", "snap_here", "--",
                        prog_path("snap_det")], stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, env=DET_ENV, timeout=120)
    assert r.returncode == 0, r.stderr
    show = run_gebpf(["show", str(out)])
    assert show.returncode == 0, show.stderr
    return {"path": str(out), "show": json.loads(show.stdout)}


def gebpf_read(path, addr, size):
    return subprocess.run([gebpf_path(), "read", str(path), "%#x" % addr, str(size), "--raw"],
                          capture_output=True, timeout=60)


def test_maps_and_meta_match_show(det):
    s = gp.Snapshot.load(det["path"])
    show = det["show"]
    maps = s.getMemoryMaps()
    assert [(m[0], m[1], m[3]) for m in maps] == [(int(b, 16), n, f) for b, n, _p, f in show["maps"]]
    for (base, _n, mm, _f), (_b, _s, perms, _f2) in zip(maps, show["maps"]):
        assert bool(mm & gp.MM_READ) == (perms[0] == "r") and bool(mm & gp.MM_WRITE) == (perms[1] == "w")
        assert bool(mm & gp.MM_EXEC) == (perms[2] == "x") and s.getMemoryMap(base + 1)[0] == base
    assert s.getMemoryMap(0x1000) is None
    assert s.getExe() == show["exe"] == os.path.realpath(prog_path("snap_det"))
    assert s.getMeta("point") == show["meta"]["point"] and s.getMeta("Architecture") == "amd64"
    assert s.getMeta("ThreadId") == show["meta"]["tid"] and s.getPid() == show["meta"]["pid"]
    assert s.getThreadInfo() == {t["tid"]: t for t in show["threads"]}
    assert s.getThreads() == {t["tid"]: t["tid"] for t in show["threads"]}
    kinds = {"/": gp.FD_FILE, "p": gp.FD_PIPE, "s": gp.FD_SOCKET}
    assert s.getFds() == [(f["fd"], kinds.get(f["target"][0], gp.FD_UNKNOWN), f["target"])
                          for f in show["fds"]]
    assert s.getStackTrace() == [(int(f["pc"], 16), int(f["sp"], 16)) for f in show["stacktrace"][0]]
    assert s.getStackSymbols() == [f["symbol"] for f in show["stacktrace"][0]]
    assert s.getStackSymbols()[0] == "snap_here+0x0"


def test_registers_match_show_and_gdb(det):
    s = gp.Snapshot.load(det["path"])
    ctx = s.getRegisterContext()
    regs = ctx.getRegisters()
    for name, val in det["show"]["regs"][0].items():
        assert regs[name] == int(val, 16), name
    assert ctx.getProgramCounter() == regs["rip"] and ctx.getRegisterByName("fs_base") != 0
    with pytest.raises(gp.InvalidRegisterName):
        ctx.getRegisterByName("nosuch")
    assert all("xmm%d" % i in regs for i in range(16)) and "mxcsr" in regs
    if "avx" in open("/proc/cpuinfo").read().split():
        assert regs["ymm0"] == int.from_bytes(YMM_PATTERN, "little")
    g = subprocess.run(["gdb", "-batch", "-ex", "p/x $rip", "-ex", "p/x $rsp", "-ex", "p/x $fs_base",
                        prog_path("snap_det"), det["path"]], capture_output=True, text=True, timeout=120)
    vals = [int(v, 16) for v in re.findall(r"^\$\d+ = (0x[0-9a-f]+)", g.stdout, re.M)]
    assert vals == [regs["rip"], regs["rsp"], regs["fs_base"]], g.stdout + g.stderr


def test_read_memory_matches_gebpf_read(det):
    s = gp.Snapshot.load(det["path"])
    rsp = s.getRegisterContext().getStackCounter()
    maps = s.getMemoryMaps()
    # A read across two adjacent maps with bytes.
    adj = next(m for m, n in zip(maps, maps[1:]) if m[0] + m[1] == n[0] and m[2] & gp.MM_READ and n[2] & gp.MM_READ)
    table = int(subprocess.run(["nm", prog_path("snap_det")], capture_output=True, text=True).stdout
                .split(" B table")[0].split()[-1], 16)
    # (rsp: the stack; adj: two maps; table+8 pages: a zero page stored as a hole)
    for addr, size in ((rsp, 64), (adj[0] + adj[1] - 8, 16), (table + 4 * 4096, 4096), (table, 64)):
        r = gebpf_read(det["path"], addr, size)
        assert r.returncode == 0, r.stderr
        assert s.readMemory(addr, size) == r.stdout
    assert s.readMemory(table + 4 * 4096, 4096) == bytes(4096)
    assert s.readMemory(table + 8, 8) == (1).to_bytes(8, "little")   # table[1] = 1 * 1
    vvar = next(m for m in maps if m[3] == "[vvar]")
    for bad in (0x1000, vvar[0]):
        with pytest.raises(gp.SegmentationViolation) as e:
            s.readMemory(bad, 8)
        assert e.value.va == bad
        assert gebpf_read(det["path"], bad, 8).returncode != 0


def test_unedited_save_is_byte_identical(det, tmp_path):
    out = tmp_path / "same.core"
    gp.Snapshot.load(det["path"]).saveToFile(str(out))
    assert out.read_bytes() == open(det["path"], "rb").read()


def test_edit_save_read_back(det, tmp_path):
    s = gp.Snapshot.load(det["path"])
    ctx = s.getRegisterContext()
    buf, n = ctx.getRegisterByName("rdi"), ctx.getRegisterByName("rsi")
    s.writeMemory(buf, (7).to_bytes(8, "little"))
    ctx.setRegisterByName("rsi", 1)
    assert s.readMemory(buf, 8) == (7).to_bytes(8, "little") and n > 1
    out = tmp_path / "edited.core"
    s.saveToFile(str(out))
    # gebpf show / read see the edit, and the edited map's hash is right.
    show = json.loads(run_gebpf(["show", str(out)]).stdout)
    assert show["regs"][0]["rsi"] == "0x1"
    assert gebpf_read(out, buf, 8).stdout == (7).to_bytes(8, "little")
    back = gp.Snapshot.load(str(out))
    base, size = back.getMemoryMap(buf)[:2]
    i = [int(m[0], 16) for m in show["maps"]].index(base)
    assert show["mem"][i]["sha256"] == hashlib.sha256(back.readMemory(base, size)).hexdigest()
    # gdb reads the edit.
    g = subprocess.run(["gdb", "-batch", "-ex", "x/gx %#x" % buf, "-ex", "p/x $rsi", prog_path("snap_det"),
                        str(out)], capture_output=True, text=True, timeout=120)
    assert re.search(r":\s+0x0*7\b", g.stdout) and "$1 = 0x1" in g.stdout, g.stdout + g.stderr
    # And the edited snapshot resumes with it: sum = buf[0] * 1.
    r = run_gebpf(["resume", str(out)], stdin=subprocess.DEVNULL)
    assert (r.returncode, r.stdout) == (0, "sum 7\n"), r.stderr


def test_live_process(gebpf, root, tmp_path):
    """An attached snapshot against the live process it was taken from."""
    out = tmp_path / "live.core"
    with threads_running() as p:
        # (its compute thread ends by itself, perhaps while the snapshot is
        # taken: the snapshot's threads are between those before and after)
        before = sorted(int(t) for t in os.listdir("/proc/%d/task" % p.pid))
        r = run_gebpf(["snap", "-p", str(p.pid), "-o", str(out)])
        assert r.returncode == 0, r.stderr
        with open("/proc/%d/maps" % p.pid) as f:
            live = [line.split() for line in f]
        tids = sorted(int(t) for t in os.listdir("/proc/%d/task" % p.pid))
        fds = sorted(int(fd) for fd in os.listdir("/proc/%d/fd" % p.pid))
        s = gp.Snapshot.load(str(out))
        text = next(m for m in s.getMemoryMaps() if m[2] & gp.MM_EXEC and m[3] == s.getExe())
        with open("/proc/%d/mem" % p.pid, "rb") as mem:
            mem.seek(text[0])
            live_text = mem.read(text[1])
    want = [(int(l[0].split("-")[0], 16), int(l[0].split("-")[1], 16) - int(l[0].split("-")[0], 16),
             l[5] if len(l) > 5 else "") for l in live]
    assert [(m[0], m[1], m[3]) for m in s.getMemoryMaps()] == want
    got = sorted(s.getThreads())
    assert set(tids) <= set(got) <= set(before) and len(got) > 1, (before, got, tids)
    for tid in tids:
        assert s.getRegisterContext(tid).getRegisterByName("rsp") != 0
        assert s.getStackTrace(tid)
    assert sorted(fd for fd, _t, _n in s.getFds()) == fds
    assert s.readMemory(text[0], text[1]) == live_text


def test_trace_api(gebpf, root, tmp_path):
    rec = tmp_path / "rec"
    r = subprocess.run([gebpf_path(), "trace", "--range", "snap_here", "--out", str(rec), "--snap-at",
                        "vt=100", "--", prog_path("snap_det")], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, env=DET_ENV, timeout=300)
    assert r.returncode == 0, r.stderr
    tr = gp.Trace.open(str(rec))
    with open(rec / "meta.json") as f:
        assert tr.meta == json.load(f)
    assert tr.meta["trace_blob"] == "blobs/trace.jsonl.zst" and tr.compressed
    lines = trace_bytes(rec / "blobs" / "trace.jsonl.zst").decode().splitlines()
    assert list(tr) == [json.loads(line) for line in lines]
    recs = list(tr.records())
    assert tr.summary == json.loads(lines[-1]) and len(recs) == len(lines) - 1
    assert sum(1 for x in recs if x["t"] == "exec") == tr.summary["insns"] == tr.meta["trace"]["insns"]
    plain = gp.Trace.open(str(rec / "blobs" / "trace.jsonl.zst"))
    assert plain.meta is None and plain.summary == tr.summary and plain.snapshots() == []
    snap = tr.loadSnapshot(100)
    assert snap.getMeta("vt") == 100
    assert snap.getRegisterContext().getProgramCounter() == int(tr.snapshots()[0]["pc"], 16)
    # Records are read one line at a time: walking a big trace holds little memory.
    big = tmp_path / "big.jsonl"
    with open(big, "w") as f:
        for i in range(200000):
            f.write('{"t":"exec","vcpu":0,"pc":"0x401000","vt":%d}\n' % i)
        f.write('{"t":"summary","insns":200000,"mem":0,"events":200000,"dropped":0,"exec":true,'
                '"start":"0x401000","end":"0x401000"}\n')
    tracemalloc.start()
    n = sum(1 for _ in gp.Trace.open(str(big)).records())
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert n == 200000 and peak < 1 << 20, peak
    assert gp.Trace.open(str(big)).summary["insns"] == 200000


def test_not_a_snapshot(tmp_path):
    junk = tmp_path / "junk"
    junk.write_bytes(b"\x7fELF" + bytes(100))
    with pytest.raises(gp.FormatError):
        gp.Snapshot.load(str(junk))

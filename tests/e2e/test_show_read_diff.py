"""gebpf show / read / diff on real snapshots and traces, and bad input."""
import json
import struct
import subprocess

import pytest
from elftools.elf.elffile import ELFFile

from conftest import gebpf_path, prog_path, run_gebpf


@pytest.fixture(scope="module")
def snaps(gebpf, root, tmp_path_factory):
    d = tmp_path_factory.mktemp("srd")
    paths = {}
    for name, extra in (("a", ["--at", "snap_here"]), ("b", ["--after", "500"])):
        out = d / ("%s.core" % name)
        rc = subprocess.call([gebpf_path(), "snap", "-o", str(out)] + extra + ["--", prog_path("snap_det")],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, timeout=120)
        assert rc == 0
        paths[name] = out
    return paths


def loads(path):
    """(vaddr, bytes) of every PT_LOAD with bytes, read with pyelftools."""
    with open(path, "rb") as f:
        return [(s["p_vaddr"], s.data()) for s in ELFFile(f).iter_segments()
                if s["p_type"] == "PT_LOAD" and s["p_filesz"]]


def test_show(snaps):
    r = run_gebpf(["show", str(snaps["a"])])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    for k in ("version", "meta", "exe", "threads", "regs", "maps", "mem", "stacktrace", "fds", "vars"):
        assert k in doc, k
    raw = run_gebpf(["show", "--json", str(snaps["a"])])
    assert raw.returncode == 0 and json.loads(raw.stdout) == doc and raw.stdout.count("\n") == 1


def test_read_hexdump_raw_and_cross_map(snaps):
    segs = loads(snaps["a"])
    # Two adjacent PT_LOADs with bytes: read across their boundary.
    pair = next((a, b) for a, b in zip(segs, segs[1:]) if a[0] + len(a[1]) == b[0])
    addr = pair[1][0] - 8
    want = pair[0][1][-8:] + pair[1][1][:8]
    r = subprocess.run([gebpf_path(), "read", "--raw", str(snaps["a"]), hex(addr), "16"],
                       capture_output=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout == want
    r = run_gebpf(["read", str(snaps["a"]), hex(addr), "16"])
    assert r.returncode == 0
    assert r.stdout.startswith("0x%016x  %s" % (addr, " ".join("%02x" % b for b in want)))


def test_read_errors(snaps):
    doc = json.loads(run_gebpf(["show", "--json", str(snaps["a"])]).stdout)
    vvar = next(m for m in doc["maps"] if m[3] == "[vvar]")
    r = run_gebpf(["read", str(snaps["a"]), vvar[0], "4"])
    assert r.returncode == 1 and "no bytes" in r.stderr and r.stderr.startswith("gebpf: read:")
    r = run_gebpf(["read", str(snaps["a"]), "0x10", "4"])
    assert r.returncode == 1 and "0x10" in r.stderr and "not in any mapping" in r.stderr
    assert run_gebpf(["read", str(snaps["a"]), "zz", "4"]).returncode == 2
    assert run_gebpf(["read", str(snaps["a"]), "0x400000"]).returncode == 2


def test_bad_files(snaps, tmp_path):
    trunc = tmp_path / "trunc.core"
    trunc.write_bytes(snaps["a"].read_bytes()[:5000])
    for path, why in ((tmp_path / "missing.core", "No such file"), (trunc, "truncated"),
                      (prog_path("snap_det"), "not a core")):
        r = run_gebpf(["show", str(path)])
        assert r.returncode == 1 and why in r.stderr and str(path) in r.stderr, r.stderr
    text = tmp_path / "x.txt"
    text.write_text("hello\n" * 20)
    r = run_gebpf(["show", str(text)])
    assert r.returncode == 1 and "not an ELF" in r.stderr


def test_diff_snapshots(snaps):
    r = run_gebpf(["diff", str(snaps["a"]), str(snaps["a"])])
    assert r.returncode == 0 and r.stdout == ""
    r = run_gebpf(["diff", str(snaps["a"]), str(snaps["b"])])
    assert r.returncode == 1
    assert "thread 0 " in r.stdout and " rip 0x" in r.stdout
    a = json.loads(run_gebpf(["show", "--json", str(snaps["a"])]).stdout)
    b = json.loads(run_gebpf(["show", "--json", str(snaps["b"])]).stdout)
    assert "rip %s -> %s" % (a["regs"][0]["rip"], b["regs"][0]["rip"]) in r.stdout
    # Pages that differ are reported with their range (the stack, at least).
    assert "mem 0x" in r.stdout and "differs" in r.stdout


def write(path, lines):
    path.write_text("".join(json.dumps(l, separators=(",", ":")) + "\n" for l in lines))
    return path


def ex(pc, vt, vcpu=0):
    return {"t": "exec", "vcpu": vcpu, "pc": hex(pc), "vt": vt}


def acc(t, addr, size, pc, vt, vcpu=0):
    return {"t": t, "vcpu": vcpu, "addr": hex(addr), "size": size, "pc": hex(pc), "vt": vt}


def test_diff_traces(gebpf, tmp_path):
    a = write(tmp_path / "a.jsonl", [ex(0x1000, 0), acc("read", 0x2000, 8, 0x1000, 0), ex(0x1004, 1),
                                     acc("write", 0x3000, 4, 0x1004, 1)])
    b = write(tmp_path / "b.jsonl", [ex(0x1000, 0), acc("read", 0x2000, 8, 0x1000, 0), ex(0x1004, 1),
                                     acc("write", 0x3008, 4, 0x1004, 1)])
    assert run_gebpf(["diff", str(a), str(a)]).returncode == 0
    r = run_gebpf(["diff", str(a), str(b)])
    assert r.returncode == 1
    assert "record 4" in r.stdout and '- {"t":"write","vcpu":0,"addr":"0x3000"' in r.stdout
    assert '+ {"t":"write","vcpu":0,"addr":"0x3008"' in r.stdout
    assert "exec 2, read 1, write 1" in r.stdout
    # vcpu / vt differences are ignored on request only.
    c = write(tmp_path / "c.jsonl", [dict(l, vcpu=1) for l in map(json.loads, a.read_text().split())])
    assert run_gebpf(["diff", str(a), str(c)]).returncode == 1
    assert run_gebpf(["diff", "--ignore-vcpu", str(a), str(c)]).returncode == 0
    d = write(tmp_path / "d.jsonl", [dict(l, vt=l["vt"] + 5) for l in map(json.loads, a.read_text().split())])
    assert run_gebpf(["diff", "--ignore-vt", str(a), str(d)]).returncode == 0


def test_diff_normalise(gebpf, tmp_path):
    native = write(tmp_path / "n.jsonl", [
        ex(0x1000, 0), acc("read", 0x2000, 16, 0x1000, 0),                # movdqu
        ex(0x1004, 1), acc("read", 0x3000, 1, 0x1004, 1), acc("write", 0x4000, 1, 0x1004, 1),  # rep movsb x2
        ex(0x1004, 2), acc("read", 0x3001, 1, 0x1004, 2), acc("write", 0x4001, 1, 0x1004, 2),
        ex(0x1006, 3), acc("read", 0x5000, 8, 0x1006, 3), acc("write", 0x5000, 8, 0x1006, 3),  # lock xadd
    ])
    qemu = write(tmp_path / "q.jsonl", [
        ex(0x1000, 0), acc("read", 0x2000, 8, 0x1000, 0), acc("read", 0x2008, 8, 0x1000, 0),
        ex(0x1004, 1), acc("read", 0x3000, 1, 0x1004, 1), acc("write", 0x4000, 1, 0x1004, 1),
        ex(0x1004, 2), acc("read", 0x3001, 1, 0x1004, 2), acc("write", 0x4001, 1, 0x1004, 2),
        ex(0x1006, 3), acc("read", 0x5000, 8, 0x1006, 3), acc("write", 0x5000, 8, 0x1006, 3),
    ])
    lackey = write(tmp_path / "l.jsonl", [
        ex(0x1000, 0), acc("read", 0x2000, 16, 0x1000, 0),
        ex(0x1004, 1), acc("read", 0x3000, 1, 0x1004, 1), acc("write", 0x4000, 1, 0x1004, 1),
        ex(0x1004, 2), acc("read", 0x3001, 1, 0x1004, 2), acc("write", 0x4001, 1, 0x1004, 2),
        ex(0x1004, 3),                                                     # extra REP exec
        ex(0x1006, 4), acc("read", 0x5000, 8, 0x1006, 4), acc("read", 0x5000, 8, 0x1006, 4),
        acc("write", 0x5000, 8, 0x1006, 4),
    ])
    assert run_gebpf(["diff", str(native), str(qemu)]).returncode == 1
    assert run_gebpf(["diff", "--normalise", "qemu", str(native), str(qemu)]).returncode == 0
    assert run_gebpf(["diff", str(native), str(lackey)]).returncode == 1
    r = run_gebpf(["diff", "--normalise", "lackey", str(native), str(lackey)])
    assert r.returncode == 0, r.stdout
    # Normalisation undoes only the quirks: a real difference stays.
    bad = write(tmp_path / "bad.jsonl", [dict(l, addr="0x2010") if l.get("addr") == "0x2008" else l
                                         for l in map(json.loads, qemu.read_text().split())])
    assert run_gebpf(["diff", "--normalise", "qemu", str(native), str(bad)]).returncode == 1


def test_diff_usage(gebpf, snaps, tmp_path):
    t = write(tmp_path / "t.jsonl", [ex(0x1000, 0)])
    assert run_gebpf(["diff", str(t)]).returncode == 2
    assert run_gebpf(["diff", "--normalise", "bochs", str(t), str(t)]).returncode == 2
    r = run_gebpf(["diff", str(snaps["a"]), str(t)])
    assert r.returncode == 2 and "two snapshots or two traces" in r.stderr
    junk = tmp_path / "junk.jsonl"
    junk.write_text("not json\n")
    r = run_gebpf(["diff", str(t), str(junk)])
    assert r.returncode == 2 and "junk.jsonl:1" in r.stderr

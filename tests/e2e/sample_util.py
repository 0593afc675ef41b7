"""Helpers shared by the sample/faults e2e tests (BPF side of gebpf)."""
import fcntl
import json
import os
import subprocess
import time

import pytest
from elftools.elf.elffile import ELFFile

import conftest

SAMPLE_KEYS = ["t", "vcpu", "tid", "pid", "comm", "pc", "ns"]
FAULT_KEYS = ["t", "vcpu", "tid", "addr", "pc", "err", "ns"]
SUMMARY_KEYS = ["t", "seen", "kept", "filtered", "filtered_pid", "filtered_range", "lost",
                "event", "hz", "start", "end"]


def need_bpf():
    """Skip, with the reason, where BPF sampling cannot run."""
    if os.geteuid() != 0:
        pytest.skip("needs root: BPF programs and perf events (CAP_BPF, CAP_PERFMON)")
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        pytest.skip("kernel has no BTF (/sys/kernel/btf/vmlinux): the sampler needs CO-RE")


def func_range(path, name):
    """Inclusive [start, end] of function NAME in a static executable."""
    with open(path, "rb") as f:
        for sym in ELFFile(f).get_section_by_name(".symtab").iter_symbols():
            if sym.name == name and sym["st_info"]["type"] == "STT_FUNC":
                return sym["st_value"], sym["st_value"] + sym["st_size"] - 1
    raise AssertionError("%s: no function %s" % (path, name))


def parse_jsonl(text, faults=False):
    """Lines of `gebpf sample`: exact keys in order, canonical form; the
    summary last.  Returns (samples, faults, summary)."""
    raws = text.split("\n")
    assert raws[-1] == "", "output does not end with a newline"
    objs = []
    for raw in raws[:-1]:
        o = json.loads(raw)
        keys = {"sample": SAMPLE_KEYS, "fault": FAULT_KEYS, "summary": SUMMARY_KEYS}[o["t"]]
        got = list(o)
        if o["t"] == "summary" and got[-1] == "unwritten":
            got = got[:-1]
        if o["t"] == "summary" and faults:
            assert got[-2:] == ["faults", "faults_lost"], raw
            got = got[:-2]
        assert got == keys, "fields/order of %r" % raw
        assert json.dumps(o, separators=(",", ":")) == raw, "not canonical: %r" % raw
        for k in ("pc", "addr", "err"):
            if k in o:
                assert conftest.HEX.fullmatch(o[k]), raw
        objs.append(o)
    assert objs and objs[-1]["t"] == "summary", "no summary at the end"
    summary = objs[-1]
    samples = [o for o in objs[:-1] if o["t"] == "sample"]
    faults_ = [o for o in objs[:-1] if o["t"] == "fault"]
    assert all(o["t"] != "summary" for o in objs[:-1])
    s = summary
    assert s["seen"] == s["kept"] + s["filtered"] + s["lost"], s
    assert s["filtered"] == s["filtered_pid"] + s["filtered_range"], s
    assert s["kept"] == len(samples) + s.get("unwritten", 0), \
        "kept %d, %d sample lines" % (s["kept"], len(samples))
    if faults:
        assert s["faults"] == len(faults_), s
    return samples, faults_, summary


def sample(args, timeout=120):
    r = conftest.run_gebpf(["sample"] + list(args), timeout=timeout)
    return r


def bpf_prog_ids(settle=False):
    """IDs of gebpf's BPF programs (names gb_*) loaded now (bpftool prog
    show); other tools' programs are not ours to count.  settle: the kernel
    frees a closed program asynchronously, so poll for up to 3 s until none
    is left."""
    deadline = time.monotonic() + (3 if settle else 0)
    while True:
        out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                             check=True).stdout
        ids = {p["id"] for p in json.loads(out or "[]")
               if p.get("name", "").startswith("gb_")}
        if not ids or time.monotonic() >= deadline:
            return ids
        time.sleep(0.1)


def bpf_link_ids():
    out = subprocess.run(["bpftool", "-j", "link", "show"], capture_output=True, text=True,
                         check=True).stdout
    return {p["id"] for p in json.loads(out or "[]")}


def parse_folded(text):
    """Folded stacks: [(frames outermost first, count)]."""
    rows = []
    for ln in text.splitlines():
        stack, count = ln.rsplit(" ", 1)
        assert count.isdigit(), ln
        rows.append((stack.split(";"), int(count)))
    return rows


def counts_line(stderr):
    """The counts `gebpf sample` prints on stderr with --folded/--pprof."""
    import re
    m = re.search(r"sample: (\d+) kept, (\d+) seen, (\d+) filtered in the kernel, (\d+) lost"
                  r"(?:; (\d+) unwound, (\d+) truncated)?", stderr)
    assert m, stderr
    keys = ["kept", "seen", "filtered", "lost", "unwound", "truncated"]
    return {k: int(v) for k, v in zip(keys, m.groups()) if v is not None}


PPROF_SRC = "/usr/share/gocode/src/github.com/google/pprof"


def build_pprof():
    """Build Google's pprof offline from Debian's sources (GOPATH mode over
    /usr/share/gocode: golang-github-google-pprof-dev and its -dev
    dependencies, with golang-go).  Returns the binary's path, or skips.

    Built once per build output directory (GEBPF_OUTPUT/tests/pprof, under
    a lock: xdist workers and the modules that use it share it) and again
    only when Debian's sources are newer: a build is ~20 CPU s, and three
    modules built it each (docs/testing.md)."""
    go = "/usr/bin/go"
    if not os.path.exists(go) or not os.path.isdir(PPROF_SRC):
        pytest.skip("pprof sources or Go missing (golang-go, golang-github-google-pprof-dev)")
    tools = os.path.join(conftest.OUTPUT, "tests", "pprof")
    os.makedirs(tools, exist_ok=True)
    out = os.path.join(tools, "pprof")
    with open(os.path.join(tools, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(out) and os.path.getmtime(out) >= os.path.getmtime(PPROF_SRC):
            return out
        env = dict(os.environ, GOPATH="/usr/share/gocode", GO111MODULE="off", GOFLAGS="",
                   GOPROXY="off", GOCACHE=os.path.join(tools, "gocache"), CGO_ENABLED="0")
        r = subprocess.run([go, "build", "-o", out + ".new", "github.com/google/pprof"], env=env,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, "building pprof offline failed: " + r.stderr
        os.replace(out + ".new", out)
    return out

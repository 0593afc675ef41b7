"""values=on in gebpf's QEMU plugin (`gebpf qemu --values`, docs/qemu.md
"QEMU 10"): the plugin built for QEMU 9.2's API (gebpf-qemu10.so) under the
QEMU 10 that scripts/qemu10 builds gives, for the instructions both traces
have, the registers and access values of the native `gebpf trace --values`
trace (stack addresses rebased: QEMU's stack lies elsewhere); a syscall's
exec line lists rcx and r11 and a regs line follows it; values=off is the
plain trace; and a QEMU too old for values (Debian 12's 7.2), or the plugin
built for it, says so in one line.  The QEMU 10 tests skip until
`make qemu10` has built .output/qemu10 and gebpf-qemu10.so."""
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import OUTPUT, check_line, prog_path, run_gebpf
from test_values import said

QEMU10 = os.path.join(OUTPUT, "qemu10", "bin", "qemu-x86_64")
PLUGIN10 = os.path.join(OUTPUT, "gebpf-qemu10.so")
PLUGIN72 = os.path.join(OUTPUT, "gebpf-qemu.so")
TOO_OLD = ("gebpf: qemu: --values needs QEMU 9.2 or later (its plugin API gives register and "
           "memory values); this is QEMU %s: run scripts/qemu10 (docs/qemu.md)")
# registers QEMU's gdb stub does not give (written.h's names): left out
NOT_IN_QEMU = re.compile(r"(ymm|zmm)\d+|k[0-7]|xmm(1[6-9]|2\d|3[01])")


@pytest.fixture(scope="module")
def qemu10(gebpf):
    for path in (QEMU10, PLUGIN10):
        if not os.path.exists(path):
            pytest.skip("%s not built: `make qemu10` builds QEMU 10 user mode from Debian's "
                        "source (scripts/qemu10, 1-2 min) and its plugin (docs/qemu.md)" % path)
    return gebpf


def system_qemu_version():
    """(major, minor) of qemu-x86_64 on PATH, or None."""
    if not shutil.which("qemu-x86_64"):
        return None
    out = subprocess.run(["qemu-x86_64", "--version"], capture_output=True, text=True).stdout
    m = re.search(r"version (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def lines_of(path):
    raws = path.read_text().splitlines()
    lines = [check_line(x) for x in raws]
    s = lines[-1]
    assert s["t"] == "summary", raws[-1]
    body = lines[:-1]
    assert s["events"] == len(body) + s["dropped"], s
    assert s["insns"] == sum(o["t"] == "exec" for o in body), s
    assert s["mem"] == sum(o["t"] in ("read", "write") for o in body), s
    return body


def both(tmp_path, prog):
    n, q = tmp_path / "n.jsonl", tmp_path / "q.jsonl"
    r = run_gebpf(["trace", "--values", "--range", "traced", "-o", n, "--", prog_path(prog)])
    assert r.returncode == 0, r.stderr
    r = run_gebpf(["qemu", "--values", "--range", "traced", "-o", q, "--", prog_path(prog)],
                  timeout=300)
    assert r.returncode == 0, r.stderr
    return lines_of(n), lines_of(q)


def by_vt(lines):
    out = {}
    for o in lines:
        d = out.setdefault(o["vt"], {"regs": None, "exec": None, "acc": []})
        if o["t"] in ("exec", "regs"):
            d[o["t"]] = o
        else:
            d["acc"].append(o)
    return out


class Rebase:
    """Native and QEMU values equal as numbers, or as stack addresses (the
    two stacks lie a constant apart: the first regs lines' rsp)."""

    def __init__(self, n, q):
        self.delta = int(n["regs"]["regs"]["rsp"], 16) - int(q["regs"]["regs"]["rsp"], 16)

    def same(self, a, b):
        a, b = int(a, 16), int(b, 16)
        return a == b or a - b == self.delta


def qemu_bytes(accs, kind, addr, size):
    """The bytes QEMU's accesses of KIND gave at [addr, addr+size) (it splits
    and may widen accesses), as an integer, or None where it gave none."""
    have = {}
    for a in accs:
        if a["t"] == kind and "val" in a:
            v = int(a["val"], 16)
            base = int(a["addr"], 16)
            for k in range(a["size"]):
                have[base + k] = (v >> (8 * k)) & 0xff
    if not all(addr + k in have for k in range(size)):
        return None
    return sum(have[addr + k] << (8 * k) for k in range(size))


def states(lines, unsaid=None):
    """{vt: the registers the lines say before instruction vt} (regs lines
    give what changed, exec lines what they wrote; a syscall's rax is unsaid
    until the next regs line, and so is what UNSAID[vt] names after vt)."""
    state, out = {}, {}
    for o in lines:
        if o["t"] == "regs":
            state.update(o["regs"])
        elif o["t"] == "exec":
            out[o["vt"]] = dict(state)
            for name, v in o["regs"].items():
                said(state, name, v)
            if set(o["regs"]) == {"rcx", "r11"}:
                state.pop("rax", None)
            for name in (unsaid or {}).get(o["vt"], ()):
                state.pop(name, None)
    return out


@pytest.mark.parametrize("prog", ["simd", "bittest", "mem_sizes"])
def test_values_match_the_native_trace(trace_ready, qemu10, tmp_path, prog):
    """Each instruction's written registers (by gebpf's decoder on both
    sides; QEMU leaves out the ones it does not expose), each access's value,
    and every register both traces say at every instruction."""
    nl, ql = both(tmp_path, prog)
    n, q = by_vt(nl), by_vt(ql)
    assert sorted(n) == sorted(q), "instruction counts differ"
    assert q[0]["regs"] is not None and len(q[0]["regs"]["regs"]) >= 16 + 4 + 8 + 3 + 16
    rb = Rebase(n[0], q[0])
    # a ymm or zmm write (natively listed) leaves QEMU's xmm unsaid until its
    # next regs line
    ns = states(nl)
    qs = states(ql, {vt: {"xmm" + r[3:] for r in n[vt]["exec"]["regs"] if r[:3] in ("ymm", "zmm")}
                     for vt in n})
    checked = 0
    for vt in sorted(n):
        a, b = n[vt], q[vt]
        assert a["exec"]["pc"] == b["exec"]["pc"], vt
        where = "vt %d pc %s" % (vt, a["exec"]["pc"])
        for r, v in qs[vt].items():
            if r in ns[vt]:
                assert rb.same(ns[vt][r], v), "%s: before it %s is %s natively, %s under QEMU" % (
                    where, r, ns[vt][r], v)
                checked += 1
        ra, rq = a["exec"]["regs"], b["exec"]["regs"]
        assert set(rq) == {r for r in ra if not NOT_IN_QEMU.fullmatch(r)}, where
        for r, v in rq.items():
            assert rb.same(ra[r], v), "%s: %s native %s, QEMU %s" % (where, r, ra[r], v)
        for acc in a["acc"]:
            addr = int(acc["addr"], 16)
            got = qemu_bytes(b["acc"], acc["t"], addr, acc["size"])
            if got is None:
                got = qemu_bytes(b["acc"], acc["t"], addr - rb.delta, acc["size"])
            assert got is not None, "%s: no QEMU %s of %s" % (where, acc["t"], acc)
            assert rb.same(acc["val"], hex(got)), "%s: %s" % (where, acc)
    assert checked > 20 * len(n)


def test_syscall_lists_rcx_r11_and_a_regs_line_follows(trace_ready, qemu10, tmp_path):
    """QEMU user mode leaves rcx and r11 as they were (the kernel's
    sysret values are not emulated): listed with QEMU's values; the result
    (rax) is in the regs line before the next instruction, as natively."""
    nl, ql = both(tmp_path, "syscall_write")
    n, q = by_vt(nl), by_vt(ql)
    sys_vts = [vt for vt in sorted(q) if set(q[vt]["exec"]["regs"]) == {"rcx", "r11"}]
    assert sys_vts == [vt for vt in sorted(n) if set(n[vt]["exec"]["regs"]) == {"rcx", "r11"}]
    assert len(sys_vts) >= 2
    for vt in sys_vts:
        assert q[vt + 1]["regs"] is not None, "no regs line after the syscall at vt %d" % vt
        assert n[vt + 1]["regs"] is not None
    # write(1, "hello\n", 6) returned 6 on both sides (getpid: two pids)
    assert q[sys_vts[0] + 1]["regs"]["regs"]["rax"] == n[sys_vts[0] + 1]["regs"]["regs"]["rax"]
    for vt in sys_vts:
        # rcx, r11: what they held before it (the regs line's values, or
        # what the exec lines since wrote)
        before = {}
        for v in range(vt):
            before.update(q[v]["regs"]["regs"] if q[v]["regs"] else {})
            before.update(q[v]["exec"]["regs"])
        for r in ("rcx", "r11"):
            assert q[vt]["exec"]["regs"][r] == before[r], (vt, r)


def stack_relative(lines, high=0x7f0000000000):
    first = next((int(o["addr"], 16) for o in lines if "addr" in o and int(o["addr"], 16) >= high), 0)
    out = []
    for o in lines:
        o = dict(o)
        if "addr" in o and int(o["addr"], 16) >= high:
            o["addr"] = "stack%+d" % (int(o["addr"], 16) - first)
        out.append(o)
    return out


def test_values_off_is_the_plain_trace(qemu10, tmp_path):
    """The same plugin without values=on writes the lines of the one for QEMU
    7.2; with it, the same lines less the values and the regs lines."""
    plain, vals = tmp_path / "p.jsonl", tmp_path / "v.jsonl"
    for out, extra in ((plain, ""), (vals, ",values=on")):
        r = subprocess.run(["setarch", "-R", QEMU10, "-plugin",
                            "%s,range=traced,out=%s%s" % (PLUGIN10, out, extra),
                            prog_path("stack_ops")], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
    p = [json.loads(x) for x in plain.read_text().splitlines()]
    v = lines_of(vals)
    assert not any("regs" in o or "val" in o for o in p)
    stripped = [{k: x for k, x in o.items() if k not in ("regs", "val")} for o in v
                if o["t"] != "regs"]
    # (QEMU 10 maps the guest's stack among the host's own mappings: where
    # it lands can move between two runs, so stack addresses are compared
    # from the first one each trace touches)
    assert stack_relative(stripped) == stack_relative(p[:-1])


def test_too_old_qemu_is_one_line(gebpf, tmp_path):
    """gebpf with no QEMU 10 beside it: --values asks QEMU on PATH its version
    and refuses 7.2 in one line."""
    ver = system_qemu_version()
    if ver is None or ver >= (9, 2):
        pytest.skip("needs Debian 12's qemu-x86_64 7.2 on PATH (scripts/deps), got %s" % (ver,))
    lone = tmp_path / "gebpf"
    shutil.copy2(gebpf, lone)  # (nothing beside it: no qemu10/, no plugin)
    r = subprocess.run([str(lone), "qemu", "--values", "--range", "traced", "--",
                        prog_path("mem_sizes")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [TOO_OLD % ("%d.%d" % ver)], r.stderr
    assert r.stdout == ""


def test_plugin_for_72_refuses_values(gebpf):
    if not shutil.which("qemu-x86_64") or not os.path.exists(PLUGIN72):
        pytest.skip("needs qemu-x86_64 and %s (docs/qemu.md)" % PLUGIN72)
    r = subprocess.run(["qemu-x86_64", "-plugin", "%s,values=on" % PLUGIN72,
                        prog_path("mem_sizes")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    ours = [ln for ln in r.stderr.splitlines() if ln.startswith("gebpf: qemu plugin: ")]
    assert ours == ["gebpf: qemu plugin: values=on: needs QEMU 9.2 or later (its plugin API "
                    "gives register and memory values); this plugin is built for QEMU 7.2: run "
                    "scripts/qemu10 and use gebpf-qemu10.so (gebpf qemu --values; "
                    "docs/qemu.md)"], r.stderr
    assert r.stdout == ""


def test_diff_names_the_instruction_whose_result_differs_from_qemu(qemu10, trace_ready, tmp_path):
    """The README's flow on vals_x87, which computes a sine on the x87
    stack: natively and under QEMU 10 with values, `gebpf diff --normalise
    qemu` names fsin first, with both results as x87 extended numbers and
    the x87-transcendental hint; every other difference is one of the kinds
    an emulator is known to differ in, and once those are left out the two
    runs agree (exit 0), the stack's values rebased."""
    n, q = tmp_path / "n.jsonl", tmp_path / "q.jsonl"
    r = run_gebpf(["trace", "--values", "--range", "traced", "-o", str(n), "--",
                   prog_path("vals_x87")])
    assert r.returncode == 0, r.stderr
    native_sine = dict(x.split() for x in r.stdout.splitlines())["sine"]
    r = run_gebpf(["qemu", "--values", "--range", "traced", "-o", str(q), "--",
                   prog_path("vals_x87")])
    assert r.returncode == 0, r.stderr
    qemu_sine = dict(x.split() for x in r.stdout.splitlines())["sine"]
    assert native_sine != qemu_sine, "QEMU computed the same sine: nothing to find"
    r = run_gebpf(["diff", "--normalise", "qemu", str(n), str(q), "--binary",
                   prog_path("vals_x87")])
    assert r.returncode == 1, r.stdout + r.stderr
    first = r.stdout[r.stdout.index("[1] "):].splitlines()
    assert first[0].startswith("[1] value differs at traced+0x6"), first[0]
    assert first[1].strip() == "fsin"
    assert first[2].split()[:3] == ["st0", "-", native_sine] and "(x87 0.47942553860420" in first[2]
    assert first[3].split()[:2] == ["+", qemu_sine]
    assert any(x.startswith("    hint: x87-transcendental") for x in first[4:8])
    # the stored sine is the same difference carried on
    assert "[2] value differs at traced+0x8" in r.stdout and "hint: carried" in r.stdout
    r = run_gebpf(["diff", "--normalise", "qemu", str(n), str(q), "--binary",
                   prog_path("vals_x87"), "--ignore-values",
                   "x87-transcendental,carried,x87-flags,undefined-flags"])
    assert r.returncode == 0, r.stdout
    assert "values too" in r.stdout and "x87-transcendental 1" in r.stdout


# Single-threaded trace test programs whose range is `traced` and whose
# runs QEMU 10 reproduces instruction for instruction (not rep_string,
# rep_calls or page_cross: QEMU 10 runs a REP loop under one exec line,
# docs/qemu.md; not the threaded or signal programs: their interleaving is
# the host's).
BY_VALUE = ["mem_sizes", "stack_ops", "simd", "bittest", "atomics", "recursion", "switch",
            "qsort_cb", "setjmp", "tls", "vals_x87", "syscall_write"]
KNOWN = ("cpuid,rdtsc,rdrand,x87-transcendental,syscall,undefined-flags,x87-flags,"
         "address-flags,carried")
# QEMU 10's own deviations in shape (docs/qemu.md "QEMU 10"): the one
# divergence each program must show, and nothing else
SHAPE = {"simd": ("access differs at traced+0x54", "vinsertf128 ymm5, ymm5, xmmword ptr [rsi+0x10]")}


@pytest.mark.parametrize("prog", BY_VALUE)
def test_every_program_agrees_with_qemu10_by_value(qemu10, trace_ready, tmp_path, prog):
    """Native --values against QEMU 10's, each trace test program above:
    `gebpf diff --normalise qemu` finds the same instructions and accesses,
    and no value differs but in the kinds an emulator is known to differ in
    (docs/diff.md "Values"); those that do are counted."""
    n, q = tmp_path / "n.jsonl", tmp_path / "q.jsonl"
    r = run_gebpf(["trace", "--values", "--range", "traced", "--max-events", "0", "-o", str(n),
                   "--", prog_path(prog)])
    assert r.returncode == 0, r.stderr
    r = run_gebpf(["qemu", "--values", "--range", "traced", "--max-events", "0", "-o", str(q),
                   "--", prog_path(prog)])
    assert r.returncode == 0, r.stderr
    r = run_gebpf(["diff", "--normalise", "qemu", str(n), str(q), "--binary", prog_path(prog),
                   "--ignore-values", KNOWN])
    if prog in SHAPE:
        # (vinsertf128 reads 32 bytes under QEMU 10, 16 on the hardware)
        where, insn = SHAPE[prog]
        assert r.returncode == 1 and "summary: 1 divergence;" in r.stdout, r.stdout[-3000:]
        assert "[1] %s" % where in r.stdout and insn in r.stdout, r.stdout[-3000:]
        return
    assert r.returncode == 0, r.stdout[-3000:]
    assert "values too" in r.stdout

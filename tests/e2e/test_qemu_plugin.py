"""gebpf's QEMU TCG plugin (user/qemu/, docs/qemu.md) through `gebpf qemu`:
every trace test program's trace under qemu-x86_64 equals gebpf's native
trace after `gebpf diff --normalise qemu`; the budget and summary shape,
exec=off, symbol ranges (also in a PIE), several vCPUs, zstd output, bad
arguments, the guest's environment order and the cpu-ifunc hint on a static
program.  Skipped without qemu-x86_64 (Debian's qemu-user) or without the
plugin (make builds it when scripts/qemu-plugin-h can fetch qemu-plugin.h)."""
import json
import os
import re
import shutil
import subprocess

import pytest

import lackey
from conftest import (OUTPUT, PROGS, SUMMARY_KEYS, check_vt_order, prog_path, range_arg, read_trace,
                      run_gebpf, stable_env, trace_summary)

QEMU = "qemu-x86_64"
PLUGIN = os.path.join(OUTPUT, "gebpf-qemu.so")


@pytest.fixture(scope="module")
def qemu(gebpf):
    if not shutil.which(QEMU):
        pytest.skip("%s not installed (Debian: qemu-user; scripts/deps)" % QEMU)
    if not os.path.exists(PLUGIN):
        pytest.skip("%s not built: make builds it when scripts/qemu-plugin-h can get "
                    "qemu-plugin.h from Debian's qemu source package" % PLUGIN)
    return gebpf


def under_qemu(args, prog_args, out=None, expect=0):
    """gebpf qemu ARGS [-o OUT] -- PROG_ARGS; asserts the exit status."""
    cmd = ["qemu"] + list(args) + (["-o", str(out)] if out else []) + ["--"] + list(prog_args)
    r = run_gebpf(cmd, timeout=300)
    assert r.returncode == expect, "gebpf %s: exit %d: %s" % (" ".join(cmd), r.returncode, r.stderr)
    return r


def native(rng, prog_args, out, extra=()):
    """gebpf trace (whose exit status does not carry the target's)."""
    r = run_gebpf(["trace", "--range", rng, "-o", str(out)] + list(extra) + ["--"] + list(prog_args),
                  timeout=300)
    assert r.returncode == 0, r.stderr
    return r


def diff(a, b, *extra):
    return run_gebpf(["diff", "--normalise", "qemu"] + list(extra) + [str(a), str(b)], timeout=300)


def by_vcpu(path):
    """PATH's lines per vcpu, in order of first appearance, and its summary."""
    lines, summary = read_trace(path)
    per = {}
    for ln in lines:
        per.setdefault(ln["vcpu"], []).append(ln)
    return list(per.values()), summary


def write_stream(parts, summary, path):
    """The lines of PARTS (lists of lines) one after the other as one
    thread's trace: vcpu 0, vt renumbered, a summary of its own."""
    vt, out = -1, []
    for lns in parts:
        for ln in lns:
            ln = dict(ln, vcpu=0)
            if ln["t"] == "exec":
                vt += 1
            ln["vt"] = vt
            out.append(ln)
    s = dict(summary, insns=vt + 1, mem=sum(o["t"] != "exec" for o in out), events=len(out),
             dropped=0)
    path.write_text("".join(lackey.dumps(o) + "\n" for o in out + [s]))
    return path


@pytest.mark.parametrize("name", sorted(PROGS))
def test_same_as_native(qemu, trace_ready, name, tmp_path):
    """The plugin's trace of each trace test program, on the same range,
    equals gebpf's native trace after --normalise qemu (addresses rebased
    per region by gebpf diff)."""
    spec = PROGS[name]
    rng = range_arg(name)
    n, q = tmp_path / "n.jsonl", tmp_path / "q.jsonl"
    plain = subprocess.run([QEMU, prog_path(name)], capture_output=True, text=True, timeout=120,
                           env=stable_env())
    if plain.returncode != spec.get("exit", 0):
        # measured with Debian's 7.2: `signal` gets SIGSEGV (si_code SI_KERNEL)
        # from QEMU right after its SIGUSR1, with or without a plugin
        pytest.xfail("%s runs %s to exit status %d without any plugin (want %d): %s"
                     % (QEMU, name, plain.returncode, spec.get("exit", 0),
                        plain.stderr.strip().splitlines()[-1:] or ""))
    native(rng, [prog_path(name)], n)
    under_qemu(["--range", rng], [prog_path(name)], q, expect=spec.get("exit", 0))
    qlines, qsum = read_trace(q)
    nlines, nsum = read_trace(n)
    assert (qsum["start"], qsum["end"]) == (nsum["start"], nsum["end"])
    assert qsum["insns"] > 0 and nsum["insns"] > 0
    if not spec.get("threads"):
        r = diff(n, q)
        assert r.returncode == 0, "gebpf diff --normalise qemu: %s%s" % (r.stdout[-3000:], r.stderr)
        return
    # Threads: each trace orders the threads its own way (gebpf numbers them
    # by first appearance and lets one at a time into the range, QEMU runs
    # them at once and numbers them by vCPU index), so compare thread by
    # thread.  QEMU reuses a vCPU index once its thread has exited: two
    # workers that do not overlap are one vCPU, the second after the first.
    check_vt_order(qlines)
    nparts, ns = by_vcpu(n)
    qparts, qs = by_vcpu(q)
    assert len(nparts) == 2 and len(qparts) in (1, 2), (len(nparts), len(qparts))
    same = lambda a, b: diff(write_stream(a, ns, tmp_path / "n.part"),
                             write_stream(b, qs, tmp_path / "q.part")).returncode == 0
    if len(qparts) == 2:
        ok = (same([nparts[0]], [qparts[0]]) and same([nparts[1]], [qparts[1]])) or \
            (same([nparts[0]], [qparts[1]]) and same([nparts[1]], [qparts[0]]))
    else:
        ok = same(nparts, qparts) or same(nparts[::-1], qparts)
    assert ok, "no pairing of the threads compares equal (QEMU vCPUs: %d)" % len(qparts)


def test_budget_and_summary_shape(qemu, trace_ready, tmp_path):
    """max_events: the lines beyond it are counted in dropped, and the
    summary has gebpf's fields in gebpf's order with the same counts."""
    n, q = tmp_path / "n.jsonl", tmp_path / "q.jsonl"
    prog = prog_path("hot_loop")
    rn = native("hot_loop:hot", [prog], n, extra=["--max-events", "25"])
    rq = under_qemu(["--range", "hot_loop:hot", "--max-events", "25"], [prog], q)
    # said once on stderr, at the same vt as gebpf trace says it
    said = [ln for ln in rq.stderr.splitlines() if "max_events=25 reached at vt" in ln]
    assert len(said) == 1, rq.stderr
    vt = said[0].split(" reached at vt ")[1].split(":")[0]
    assert "--max-events 25 reached at vt %s:" % vt in rn.stderr, (rn.stderr, said)
    for path in (n, q):
        with open(path) as f:
            raws = f.read().splitlines()
        assert len(raws) == 26
    qlines, qsum = read_trace(q)
    nlines, nsum = read_trace(n)
    assert list(qsum) == list(nsum) == SUMMARY_KEYS
    assert qsum == nsum, (qsum, nsum)
    assert qsum["dropped"] == qsum["events"] - 25 > 0
    # the 25 lines written are the first 25 of an unlimited trace
    full = tmp_path / "full.jsonl"
    under_qemu(["--range", "hot_loop:hot", "--max-events", "0"], [prog], full)
    flines, fsum = read_trace(full)
    assert fsum["dropped"] == 0 and fsum["events"] == qsum["events"]
    assert flines[:25] == qlines


def test_default_budget(qemu, tmp_path):
    """Without --max-events the budget is gebpf's 1,000,000 lines."""
    q = tmp_path / "q.jsonl"
    under_qemu(["--range", "hot_loop:hot"], [prog_path("hot_loop")], q)
    s = trace_summary(q)
    assert s["events"] < 1000000 or s["dropped"] == s["events"] - 1000000


def test_exec_off(qemu, tmp_path):
    """exec=off: no exec line, insns 0, "exec":false, and the same access
    lines (same vt) as with exec lines."""
    on, off = tmp_path / "on.jsonl", tmp_path / "off.jsonl"
    prog = prog_path("mem_sizes")
    under_qemu(["--range", "traced"], [prog], on)
    under_qemu(["--range", "traced", "--exec", "off"], [prog], off)
    onl, ons = read_trace(on)
    offl, offs = read_trace(off)
    assert not any(o["t"] == "exec" for o in offl)
    assert offs["insns"] == 0 and offs["exec"] is False and ons["exec"] is True
    assert offl == [o for o in onl if o["t"] != "exec"]
    assert offs["mem"] == ons["mem"] > 0


def test_symbol_equals_hex(qemu, tmp_path):
    """range=SYMBOL gives the same bytes as the hex range of the symbol
    (read from the ELF here, with pyelftools)."""
    prog = prog_path("recursion")
    lo, hi = lackey.Program(prog).span(["traced"])
    a, b = tmp_path / "sym.jsonl", tmp_path / "hex.jsonl"
    under_qemu(["--range", "traced"], [prog], a)
    under_qemu(["--range", "%x-%x" % (lo, hi)], [prog], b)
    assert a.read_bytes() == b.read_bytes()
    s = trace_summary(a)
    assert (s["start"], s["end"]) == (hex(lo), hex(hi)) and s["insns"] > 0
    # the raw plugin syntax, start=/end= bounds, says the same
    c = tmp_path / "raw.jsonl"
    r = subprocess.run([QEMU, "-plugin", "%s,start=%#x,end=%#x,out=%s" % (PLUGIN, lo, hi, c), prog],
                       capture_output=True, text=True, timeout=120, env=stable_env())
    assert r.returncode == 0, r.stderr
    assert c.read_bytes() == b.read_bytes()


def test_pie_symbol(qemu, trace_ready, tmp_path):
    """A symbol of a dynamically linked PIE resolves at QEMU's load bias:
    the same instructions and accesses as gebpf's native trace, at other
    addresses (and only the function's own accesses: QEMU 7.2's stale
    memory callbacks after the range's ret are closed off)."""
    prog = prog_path("trap_dyn")
    n, q = tmp_path / "n.jsonl", tmp_path / "q.jsonl"
    native("trap_dyn:dyn_hot", [prog, "5", "10"], n)
    under_qemu(["--range", "trap_dyn:dyn_hot"], [prog, "5", "10"], q)
    nl, ns = read_trace(n)
    ql, qs = read_trace(q)
    assert int(qs["end"], 16) - int(qs["start"], 16) == int(ns["end"], 16) - int(ns["start"], 16)
    assert (qs["insns"], qs["mem"]) == (ns["insns"], ns["mem"]) == (25, 15)
    off = lambda lines, s: [(o["t"], int(o["pc"], 16) - int(s["start"], 16), o.get("size"))
                            for o in lines]
    assert off(ql, qs) == off(nl, ns)


def test_two_vcpus(qemu, tmp_path):
    """vcpu_pair: the main thread and a second one run `traced` together.
    vcpu is QEMU's vCPU index (0 and 1), vt strictly increasing in file
    order, each access right after its own instruction's exec line, and
    each vCPU's instructions in its own order (the same pc sequence)."""
    q = tmp_path / "q.jsonl"
    iters = 3000
    r = under_qemu(["--range", "traced", "--max-events", "0"], [prog_path("vcpu_pair"), str(iters)], q)
    native_out = subprocess.run([prog_path("vcpu_pair"), str(iters)], capture_output=True,
                                text=True, timeout=60).stdout
    assert r.stdout == native_out
    lines, s = read_trace(q)
    check_vt_order(lines)
    execs = [o for o in lines if o["t"] == "exec"]
    assert {o["vcpu"] for o in execs} == {0, 1}
    pcs = {v: [o["pc"] for o in execs if o["vcpu"] == v] for v in (0, 1)}
    assert pcs[0] == pcs[1] and len(pcs[0]) == s["insns"] // 2
    per_call = len(pcs[0]) // iters
    assert per_call * iters == len(pcs[0])
    accs = {v: [(o["t"], o["size"], o["pc"]) for o in lines if o["t"] != "exec" and o["vcpu"] == v]
            for v in (0, 1)}
    assert accs[0] == accs[1]


def test_zstd_output(qemu, tmp_path):
    """-o FILE.zst: zstd frames that decompress to the plain output's bytes."""
    if not shutil.which("zstd"):
        pytest.skip("zstd (the command) not installed (scripts/packages.txt)")
    plain, z = tmp_path / "q.jsonl", tmp_path / "q.jsonl.zst"
    prog = prog_path("hot_loop")
    under_qemu(["--range", "hot_loop:hot", "--max-events", "0"], [prog], plain)
    under_qemu(["--range", "hot_loop:hot", "--max-events", "0"], [prog], z)
    out = subprocess.run(["zstd", "-dc", str(z)], capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == plain.read_bytes()
    assert z.stat().st_size * 10 < plain.stat().st_size
    r = run_gebpf(["diff", str(plain), str(z)])
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("args,what", [
    (["--range", "nosuch"], "range=nosuch: "),
    (["--range", "10-5"], "range=10-5: START is above END"),
    (["--range", "zz-10"], "range=zz-10: expected START-END"),
    (["--range", "other:traced"], "other:traced: the plugin resolves symbols of the guest binary"),
    (["--exec", "maybe"], "exec=maybe: expected on or off"),
    (["--max-events", "-1"], "max_events=-1: expected a number"),
    (["--range", "traced", "--start", "401000"], "give range= or start=/end=, not both"),
    (["-o", "/nonexistent/dir/q.jsonl"], "/nonexistent/dir/q.jsonl: No such file or directory"),
])
def test_bad_argument(qemu, args, what):
    """A bad knob: the plugin says it in one line (QEMU adds its own line
    when the install fails) and QEMU exits 1 before the guest runs."""
    r = run_gebpf(["qemu"] + args + ["--", prog_path("mem_sizes")], timeout=60)
    assert r.returncode == 1, r.stderr
    ours = [ln for ln in r.stderr.splitlines() if ln.startswith("gebpf: qemu plugin: ")]
    others = [ln for ln in r.stderr.splitlines() if not ln.startswith("gebpf: qemu plugin: ")]
    assert len(ours) == 1 and what in ours[0], r.stderr
    assert all(ln.startswith("%s: Could not load plugin" % QEMU) for ln in others), r.stderr
    assert r.stdout == "", "the guest ran: %r" % r.stdout


def test_raw_bad_argument(qemu):
    """The raw -plugin syntax: an unknown NAME is one line too."""
    r = subprocess.run([QEMU, "-plugin", "%s,bogus=1" % PLUGIN, prog_path("mem_sizes")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    ours = [ln for ln in r.stderr.splitlines() if ln.startswith("gebpf: qemu plugin: ")]
    assert ours == ["gebpf: qemu plugin: bogus=1: unknown argument (range, start, end, exec, "
                    "max_events, out)"], r.stderr


def test_cli_usage(qemu):
    r = run_gebpf(["qemu", "--range", "traced"])
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "give -- PROG" in r.stderr
    r = run_gebpf(["qemu", "--qemu", "/nonexistent/qemu", "--", prog_path("mem_sizes")])
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "/nonexistent/qemu" in r.stderr
    r = run_gebpf(["qemu", "--help"])
    assert r.returncode == 0 and "-plugin" in r.stdout


def test_guest_environment_in_native_order(qemu, tmp_path):
    """QEMU 7.2 hands the guest the host environment reversed; gebpf qemu
    reverses it first, so the guest's envp is a native run's (glibc's
    tunables and a program reading its environment run the same code:
    docs/qemu.md).  --keep-env-order shows QEMU's own order."""
    env = dict(stable_env(), GEBPF_ENV_FIRST="1", GEBPF_ENV_LAST="2")
    env = {"GEBPF_ENV_FIRST": "1", **{k: v for k, v in env.items() if not k.startswith("GEBPF_ENV")},
           "GEBPF_ENV_LAST": "2"}
    native_env = subprocess.run(["/usr/bin/env"], capture_output=True, text=True, env=env).stdout.splitlines()
    assert native_env[0] == "GEBPF_ENV_FIRST=1" and native_env[-1] == "GEBPF_ENV_LAST=2", native_env
    r = run_gebpf(["qemu", "--range", "0x1-0x1", "-o", tmp_path / "q.jsonl", "--", "/usr/bin/env"], env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == native_env, r.stdout
    r = run_gebpf(["qemu", "--keep-env-order", "--range", "0x1-0x1", "-o", tmp_path / "k.jsonl", "--",
                   "/usr/bin/env"], env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == native_env[::-1], "QEMU 7.2 no longer reverses: " + r.stdout


def test_cpu_ifunc_hint_on_a_static_program(qemu, trace_ready, tmp_path):
    """A static program's whole .text: natively on an AVX-512 host glibc's
    ifuncs pick the evex/avx512 variants, under qemu-x86_64 7.2 (AVX2, no
    AVX-512) others; gebpf diff names those control-flow divergences
    cpu-ifunc, with its advice, and nothing normalises them."""
    with open("/proc/cpuinfo") as f:
        if " avx512f" not in f.read():
            pytest.skip("the host has no AVX-512: glibc picks the same variants as under QEMU")
    prog = prog_path("cmps_order")
    sec = subprocess.run(["readelf", "-SW", prog], capture_output=True, text=True, check=True).stdout
    m = re.search(r"\.text\s+PROGBITS\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", sec)
    lo, size = int(m.group(1), 16), int(m.group(2), 16)
    rng = "%#x-%#x" % (lo, lo + size - 1)
    n, q = tmp_path / "n.jsonl", tmp_path / "q.jsonl"
    native(rng, [prog], n, ["--max-events", "0"])
    r = run_gebpf(["qemu", "--range", rng, "--max-events", "0", "-o", q, "--", prog], timeout=300)
    assert q.exists() and r.returncode in (0, 1), r.stderr
    r = diff(n, q, "--binary", prog, "--json", "--max-diffs", "100000")
    assert r.returncode == 1, r.stderr
    d = json.loads(r.stdout)
    hinted = [x for x in d["divergences"] if x.get("hint", {}).get("quirk") == "cpu-ifunc"]
    assert hinted and d["hints"]["cpu-ifunc"] == len(hinted), d["hints"]
    assert all(x["kind"] == "control flow differs" for x in hinted), hinted[0]
    assert hinted[0]["hint"]["normalise"] is None and "docs/qemu.md" in hinted[0]["hint"]["advice"]
    syms = {x["symbol"].split("+")[0] for x in hinted}
    assert any(s.startswith("__") and ("evex" in s or "avx512" in s) for s in syms), syms
    r = diff(n, q, "--binary", prog, "--max-diffs", "0")
    assert re.search(r"hint cpu-ifunc +%d  not normalised" % len(hinted), r.stdout), r.stdout


def test_changed_access_named(qemu, trace_ready, tmp_path):
    """One access of the plugin's trace moved by 8 bytes: gebpf diff
    --normalise qemu names that instruction (symbol+offset, disassembly)
    and nothing else."""
    prog = prog_path("recursion")
    n, q, q2 = tmp_path / "n.jsonl", tmp_path / "q.jsonl", tmp_path / "q2.jsonl"
    native("traced", [prog], n)
    under_qemu(["--range", "traced"], [prog], q)
    raws = q.read_text().splitlines()
    i = next(i for i, r in enumerate(raws) if i > 40 and json.loads(r)["t"] == "read")
    o = json.loads(raws[i])
    o["addr"] = hex(int(o["addr"], 16) + 8)
    raws[i] = lackey.dumps(o)
    q2.write_text("\n".join(raws) + "\n")
    r = diff(n, q2, "--binary", prog)
    assert r.returncode == 1, r.stdout + r.stderr
    lo, _ = lackey.Program(prog).span(["traced"])
    head = "[1] access differs at traced+%#x (%s)" % (int(o["pc"], 16) - lo, o["pc"])
    assert head in r.stdout, r.stdout
    insn = r.stdout.split(head)[1].splitlines()[1]
    assert re.match(r"    [a-z]+ ", insn), "no disassembly after %r: %r" % (head, insn)
    assert "[2]" not in r.stdout, r.stdout

"""trace --values (docs/trace-format.md "Values"): each access line's value,
each exec line's written registers, a regs line where a thread's stretch
starts; checked against what the programs know they computed, against the
register file the regs lines give, and across the traps that take values."""
import json
import os
import re
import struct
import sys

import pytest

from conftest import PROGS, REPO, check_line, prog_path, range_arg, run_gebpf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "python"))
import gebpf as gp  # noqa: E402


def values_trace(tmp_path, prog, *extra, name="v.jsonl"):
    out = tmp_path / name
    r = run_gebpf(["trace", "--values", "--range", "traced", "-o", str(out)] + list(extra) +
                  ["--", prog_path(prog)])
    assert r.returncode == 0, r.stderr
    raws = out.read_text().splitlines()
    lines = [check_line(x) for x in raws]
    assert lines[-1]["t"] == "summary"
    s = lines[-1]
    assert s["events"] == len(lines) - 1 + s["dropped"], s
    return lines[:-1], r.stdout, out.read_bytes()


def known(stdout):
    """The program's own "name 0x..." lines."""
    return dict(line.split() for line in stdout.splitlines() if line.count(" ") == 1)


def by_vt(lines):
    out = {}
    for o in lines:
        d = out.setdefault(o["vt"], {"regs": None, "exec": None, "acc": []})
        if o["t"] == "exec":
            d["exec"] = o
        elif o["t"] == "regs":
            d["regs"] = o
        else:
            d["acc"].append(o)
    return out


def test_values_are_what_the_program_computed(trace_ready, tmp_path):
    lines, stdout, _ = values_trace(tmp_path, "vals_x87")
    k = known(stdout)
    ins = by_vt(lines)
    assert ins[0]["regs"] is not None, "no regs line before the first instruction"
    # fldl in_x: the read's value is the double 0.5's bits
    assert ins[0]["acc"][0]["val"] == k["x"] == hex(struct.unpack("<Q", struct.pack("<d", 0.5))[0])
    # fsin: st0 after it is the sine the program stored with fstpt
    assert ins[1]["exec"]["regs"]["st0"] == k["sine"]
    # fstpt: a 10-byte write of that value; the stack moved (all of it listed)
    w = ins[2]["acc"][0]
    assert (w["t"], w["size"], w["val"]) == ("write", 10, k["sine"])
    assert set(ins[2]["exec"]["regs"]) == {"st%d" % i for i in range(8)} | {"fstat"}
    # sqrtsd: xmm0 holds the root (movsd zeroed its upper half), mxcsr listed
    assert ins[4]["exec"]["regs"]["xmm0"] == k["root"]
    assert "mxcsr" in ins[4]["exec"]["regs"]
    assert ins[5]["acc"][0]["val"] == k["root"]
    # imul: rax and the flags it changes
    assert ins[7]["exec"]["regs"]["rax"] == k["product"]
    assert set(ins[7]["exec"]["regs"]) == {"rax", "eflags"}
    assert ins[7]["acc"][0]["val"] == "0xabcdef"
    assert ins[8]["acc"][0]["val"] == k["product"]
    # a store lists no register
    assert ins[8]["exec"]["regs"] == {}


VEC = {"xmm": 16, "ymm": 32, "zmm": 64}


def said(state, name, v):
    """An exec line's write into the registers the lines say: a vector
    register's narrower views follow, its wider ones are unsaid (SSE keeps
    the upper bits, VEX zeroes them), as docs/trace-format.md "Values".
    (test_qemu_values.py replays QEMU's lines with it too.)"""
    kind, num = name[:3], name[3:]
    if kind in VEC:
        for other, size in VEC.items():
            if size < VEC[kind]:
                state[other + num] = hex(int(v, 16) & ((1 << (8 * size)) - 1))
            elif size > VEC[kind]:
                state.pop(other + num, None)
    state[name] = v


def replay(lines):
    """Every register's value at every instruction, from the regs lines and
    the exec lines alone.  A regs line lists the registers whose values
    differ from what the trace said so far (all of them the first time):
    each one it lists must be new or changed.  A syscall's result (rax) is
    known only from the regs line after it.  The count of registers the
    regs lines said again unchanged (0 when the lines are minimal)."""
    state = {}
    repeated = 0
    first = True
    for o in lines:
        if o["t"] == "regs":
            if first:
                assert {"rax", "rsp", "rip", "eflags", "st0", "xmm0", "mxcsr"} <= set(o["regs"])
                first = False
            for name, v in o["regs"].items():
                repeated += state.get(name) == v
            state.update(o["regs"])
        elif o["t"] == "exec":
            assert state, "an exec line before any regs line"
            regs = o["regs"]
            for name, v in regs.items():
                said(state, name, v)
            if set(regs) == {"rcx", "r11"} and int(regs["rcx"], 16) == int(o["pc"], 16) + 2:
                state.pop("rax", None)  # a syscall
    return repeated, state


def test_syscall_result_is_in_the_next_regs_line(trace_ready, tmp_path):
    lines, stdout, _ = values_trace(tmp_path, "syscall_write")
    assert stdout == "hello\n"
    execs = [o for o in lines if o["t"] == "exec"]
    sys1 = execs[5]  # write(1, msg, 6)
    assert set(sys1["regs"]) == {"rcx", "r11"}, sys1
    assert int(sys1["regs"]["rcx"], 16) == int(sys1["pc"], 16) + 2  # the return address
    after = [o for o in lines if o["vt"] == sys1["vt"] + 1]
    assert after[0]["t"] == "regs", "no regs line after the syscall"
    assert after[0]["regs"]["rax"] == "0x6", "write's result"
    # the next instruction stores it: its write's value is rax
    store = [o for o in after if o["t"] == "write"][0]
    assert store["val"] == "0x6"
    repeated, _ = replay(lines)
    assert repeated == 0
    # after the write, only what the kernel changed: rax (and rip, where it is)
    assert set(after[0]["regs"]) == {"rax", "rip"}, after[0]


def test_regs_lines_say_only_what_changed(trace_ready, tmp_path):
    # vzeroupper loads part of the file: a regs line follows it, with the
    # upper halves it cleared, and nothing the exec lines already said
    lines, _, _ = values_trace(tmp_path, "simd")
    regs = [o for o in lines if o["t"] == "regs"]
    assert len(regs) == 2
    repeated, _ = replay(lines)
    assert repeated == 0
    assert "rax" not in regs[1]["regs"] and any(n.startswith("ymm") for n in regs[1]["regs"])
    # a callback entered again and again: each line is short
    lines, _, _ = values_trace(tmp_path, "qsort_cb", name="q.jsonl")
    by_vcpu = {}
    for o in lines:
        by_vcpu.setdefault(o["vcpu"], []).append(o)
    for v in by_vcpu.values():
        assert replay(v)[0] == 0
    later = [o for o in lines if o["t"] == "regs"][1:]
    assert later and max(len(o["regs"]) for o in later) < 20, later[:2]


@pytest.mark.parametrize("prog", ["vals_x87", "simd", "mem_sizes", "stack_ops", "qsort_cb",
                                  "recursion", "atomics"])
def test_every_trap_that_takes_values_gives_the_same_bytes(trace_ready, tmp_path, prog):
    """The default (the probe trap where every entry gives its values once
    it ran, else the page trap), --trap probes, --trap pages and --trap none:
    the same bytes."""
    _, _, dflt = values_trace(tmp_path, prog, name="d.jsonl")
    _, _, pages = values_trace(tmp_path, prog, "--trap", "pages", name="p.jsonl")
    _, _, none = values_trace(tmp_path, prog, "--trap", "none", name="n.jsonl")
    _, _, probes = values_trace(tmp_path, prog, "--trap", "probes", name="b.jsonl")
    assert dflt == pages == none == probes


@pytest.mark.parametrize("prog,trap", [("mem_sizes", "probe"), ("qsort_cb", "probe"),
                                       ("vals_x87", "page")])
def test_values_take_the_probe_trap_where_every_entry_gives_them(trace_ready, tmp_path, prog,
                                                                 trap):
    """vals_x87's entry is an fldl, which writes st0: once it ran, the stack
    before it is gone, so the page trap traces it, and -v names the entry."""
    out = tmp_path / "v.jsonl"
    r = run_gebpf(["trace", "-v", "--values", "--range", "traced", "-o", str(out), "--",
                   prog_path(prog)])
    assert r.returncode == 0, r.stderr
    assert ("trace: %s trap: " % trap) in r.stderr, r.stderr
    if trap == "page":
        assert "writes a register the probe's BPF program does not see (--values); using the " \
               "page trap" in r.stderr


def test_values_leave_the_rest_of_the_lines_alone(trace_ready, tmp_path):
    """Without the value fields and the regs lines, a --values trace is the
    plain trace (its vts, addresses, sizes, order)."""
    lines, _, _ = values_trace(tmp_path, "mem_sizes")
    plain = tmp_path / "plain.jsonl"
    r = run_gebpf(["trace", "--range", "traced", "--trap", "pages", "-o", str(plain), "--",
                   prog_path("mem_sizes")])
    assert r.returncode == 0, r.stderr
    want = [json.loads(x) for x in plain.read_text().splitlines()][:-1]
    got = [{k: v for k, v in o.items() if k not in ("regs", "val")} for o in lines
           if o["t"] != "regs"]
    assert got == want


def test_values_refused_where_they_cannot_be_taken(gebpf):
    r = run_gebpf(["trace", "--values", "--range", "traced", "--trap", "patch", "--",
                   prog_path("vals_x87")])
    assert r.returncode == 2
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "the patch trap's code cache" in err[0], r.stderr


def _engine_trace(tmp_path, prog, engine, trap=None):
    out = tmp_path / ("%s.%s.%s.jsonl" % (prog, engine, trap))
    r = run_gebpf(["trace", "-v", "--values", "--engine", engine, "--range", range_arg(prog)] +
                  (["--trap", trap] if trap else []) + ["-o", str(out), "--", prog_path(prog)])
    assert r.returncode == PROGS[prog].get("exit", 0) or r.returncode == 0, r.stderr
    return out.read_bytes(), r.stderr


def _flat(data):
    out = []
    for n, raw in enumerate(data.splitlines()):
        o = json.loads(raw)
        for k, v in o.items():
            if isinstance(v, dict):
                out += [((n, k, r), x) for r, x in v.items()]
            else:
                out.append(((n, k), v))
    return out


def _differing(a, b):
    fa, fb = _flat(a), _flat(b)
    assert [k for k, _ in fa] == [k for k, _ in fb], "not the same shape"
    return {k for (k, x), (_, y) in zip(fa, fb) if x != y}


# The values that differ from run to run (a pid in a register after kill or
# getpid; setjmp's mangled pointers, glibc's random pointer guard).
RUN_VARYING = ("syscall_write", "signal", "setjmp")


@pytest.mark.parametrize("prog", sorted(p for p in PROGS if p != "threads"))
def test_translating_engine_gives_the_step_engines_values(trace_ready, tmp_path, prog):
    """The code cache takes the values itself (user/jit/vals.c): each
    PROGS program under --engine jit gives the step engine's bytes (where a
    value differs from run to run, as it does between two step runs, that
    value aside), and its instructions ran translated."""
    step, _ = _engine_trace(tmp_path, prog, "step")
    jit, err = _engine_trace(tmp_path, prog, "jit")
    if prog in RUN_VARYING:
        again, _ = _engine_trace(tmp_path, prog, "step", "none")
        varying = _differing(step, again)
        assert varying, "nothing differs between two runs of %s" % prog
        assert _differing(step, jit) <= varying
    else:
        assert jit == step
    m = re.search(r"jit: \d+ runs, \d+ stops, (\d+) instructions translated-run", err)
    assert m and int(m.group(1)) > 0, err


def test_translating_engine_values_agree_on_the_corpus(trace_ready, tmp_path):
    """The random-instruction corpus (tests/corpus, 10,000 sequences) with
    --values: the step and translating engines give the same bytes."""
    sys.path.insert(0, os.path.join(REPO, "tests", "corpus"))
    import corpus_run as corpus
    ok, text = corpus.run(["step", "jit"], 13, 10000, str(tmp_path), values=True,
                          log=lambda *_: None)
    assert ok, text


def test_diff_by_value_names_the_first_instruction_and_goes_on(trace_ready, tmp_path):
    """Two --values traces of vals_x87, B's sine changed in its last bits
    (as QEMU computes fsin): the diff names fsin with both values as x87
    extended numbers and the kind, the fstpt that stores it as carried, and
    goes on to agree again (exit 1)."""
    _, stdout, raw = values_trace(tmp_path, "vals_x87")
    sine = known(stdout)["sine"]
    other = sine[:-2] + ("00" if sine[-2:] != "00" else "01")
    a = tmp_path / "a.jsonl"
    b = tmp_path / "b.jsonl"
    a.write_bytes(raw)
    b.write_bytes(raw.replace(sine.encode(), other.encode()))
    r = run_gebpf(["diff", str(a), str(b), "--binary", prog_path("vals_x87")])
    assert r.returncode == 1, r.stdout + r.stderr
    out = r.stdout
    first = out.index("[1] value differs at traced+0x6")
    assert "fsin" in out[first:first + 200]
    assert "st0      - %s  (x87 0.4794255386042030" % sine in out
    assert "hint: x87-transcendental" in out
    assert "[2] value differs at traced+0x8" in out and "hint: carried" in out
    assert "[3]" not in out, "the later instructions agree again"
    assert "value differs                     2" in out
    # the kinds can be left out, and are counted
    r = run_gebpf(["diff", str(a), str(b), "--binary", prog_path("vals_x87"),
                   "--ignore-values", "x87-transcendental,carried"])
    assert r.returncode == 0, r.stdout
    assert "values too" in r.stdout
    assert "left out (--ignore-values): x87-transcendental 1, carried 1" in r.stdout
    # the same trace: identical, values compared
    r = run_gebpf(["diff", str(a), str(a)])
    assert r.returncode == 0 and "values too" in r.stdout, r.stdout
    # --json has both values and their reading
    r = run_gebpf(["diff", "--json", str(a), str(b), "--binary", prog_path("vals_x87")])
    doc = json.loads(r.stdout)
    v = doc["divergences"][0]["values"][0]
    assert (v["what"], v["a"], v["b"]) == ("st0", sine, other)
    assert v["a_as"].startswith("x87 0.479425538604203")
    assert doc["divergences"][0]["hint"]["kind"] == "x87-transcendental"


def test_diff_ignore_values_refuses_an_unknown_kind(gebpf, tmp_path):
    r = run_gebpf(["diff", "a", "b", "--ignore-values", "pid"])
    assert r.returncode == 2
    assert "'pid' is not a kind of value difference (cpuid, rdtsc" in r.stderr


def test_python_steps_and_show_give_the_values(trace_ready, tmp_path):
    lines, stdout, raw = values_trace(tmp_path, "syscall_write", name="s.jsonl")
    steps = list(gp.Trace.open(str(tmp_path / "s.jsonl")).steps())
    assert [s.vt for s in steps] == list(range(12))
    # mov $1, %eax: before it rax was whatever, after it rax is 1
    assert steps[1].written == {"rax": 1}
    assert steps[2].before["rax"] == 1
    # the syscall's result is not known until the regs line after it
    assert steps[5].before["rax"] == 1 and set(steps[5].written) == {"rcx", "r11"}
    assert steps[6].before["rax"] == 6 and steps[6].writes[0].value == 6
    assert steps[0].writes[0].size == 8 and steps[0].before["rsp"] - 8 == steps[0].writes[0].addr
    r = run_gebpf(["show", str(tmp_path / "s.jsonl")])
    assert r.returncode == 0
    assert "values: 12 of 12 exec lines with registers, 5 of 5 accesses with a value" in r.stdout
    r = run_gebpf(["show", "--json", str(tmp_path / "s.jsonl")])
    v = json.loads(r.stdout)["values"]
    assert v["regs_lines"] == sum(o["t"] == "regs" for o in lines)
    assert v["registers_written"]["rax"] == 2  # the syscalls list rcx and r11
    with pytest.raises(ValueError):
        plain = tmp_path / "plain.jsonl"
        run_gebpf(["trace", "--range", "traced", "-o", str(plain), "--", prog_path("mem_sizes")])
        list(gp.Trace.open(str(plain)).steps())

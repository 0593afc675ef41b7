"""Tests of the kmatrix judge's verdicts (pass / skip / fail), on result
directories written the way smoke.sh and the guest's serial channel write
them.  Run: /usr/bin/python3 -m pytest -q scripts/kmatrix.d/test_judge.py
"""
import base64
import gzip
import hashlib
import importlib.util
import json
import re
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("judge", os.path.join(HERE, "judge.py"))
sys.path.insert(0, HERE)  # judge.py's own modules (judge_python, pprof_decode)
judge = importlib.util.module_from_spec(spec)
spec.loader.exec_module(judge)
import judge_python  # noqa: E402

EXPECT = open(os.path.join(HERE, "expect", "kmtrace.jsonl")).read()
# trace --values of kmtrace: a first regs line (the file before work), the
# valued lines of expect/kmtrace_values.jsonl, the summary
VALUES_BODY = open(os.path.join(HERE, "expect", "kmtrace_values.jsonl")).read()
VALUES = ('{"t":"regs","vcpu":0,"regs":{"rax":"0x0","rsp":"0x404ff8","rip":"0x401016",'
          '"eflags":"0x202","xmm0":"0x0"},"vt":0}\n' + VALUES_BODY +
          '{"t":"summary","insns":20,"mem":17,"events":38,"dropped":0,"exec":true,'
          '"start":"0x401016","end":"0x401052"}\n')
ENV = {"WORK_START": 0x401016, "WORK_LAST": 0x401052, "AFTER_WORK": 0x40100c, "PATTERN": 0x402000,
       "COUNTER": 0x402010, "PAGE1": 0x405000, "PAGE2": 0x406000, "SPIN_START": 0x40105f,
       "SPIN_LAST": 0x401068, "TICK_START": 0x401083, "TICK_LAST": 0x40108b,
       "ALARM_START": 0x4010b8, "ALARM_LAST": 0x4010c8, "LOOP_START": 0x401005, "LOOP_LAST": 0x401018}
STRICT = "".join('{"t":"exec","vcpu":0,"pc":"%s","vt":%d}\n' % (("0x401083", "0x40108b")[i % 2], i)
                 for i in range(4)) + \
    '{"t":"summary","insns":4,"mem":0,"events":4,"dropped":0,"exec":true,"start":"0x401083","end":"0x40108b"}\n'
STRICT_WARN = ("gebpf: warning: pid 9: thread 9 is in strict seccomp mode: it would kill the thread on "
               "the mmap of the code cache; tracing with the step engine and the probe trap instead, "
               "which make it run no system call\n")
RESUMED = "".join('{"t":"exec","vcpu":0,"pc":"0x%x","vt":%d}\n' % (0x40100c + d, i)
                  for i, d in enumerate((0, 1, 6, 8))) + \
    '{"t":"summary","insns":4,"mem":0,"events":4,"dropped":0,"exec":true,"start":null,"end":null}\n'
ALARM_PCS = ["0x4010b8"] + ["0x4010bd", "0x4010c4", "0x4010c6"] * 2 + ["0x4010c8"]
ALARM = "".join('{"t":"exec","vcpu":0,"pc":"%s","vt":%d}\n' % (pc, i)
                for i, pc in enumerate(ALARM_PCS * 3)) + \
    '{"t":"summary","insns":24,"mem":0,"events":24,"dropped":0,"exec":true,"start":"0x4010b8","end":"0x4010c8"}\n'
STOPPED_PCS = ["0x401013", "0x401015", "0x401017"] + \
    ["0x401005", "0x40100a", "0x401011", "0x401013", "0x401015", "0x401017"] * 6
STOPPED = "".join('{"t":"exec","vcpu":0,"pc":"%s","vt":%d}\n' % (pc, i)
                  for i, pc in enumerate(STOPPED_PCS)) + \
    '{"t":"summary","insns":39,"mem":0,"events":39,"dropped":0,"exec":true,"start":"0x401005","end":"0x401018"}\n'
STOPPED_WARN = ("gebpf: warning: pid 9 is stopped (SIGSTOP, job control): nothing runs until it gets "
                "SIGCONT; what runs then is traced, and it is left stopped if it still is at the end\n")
ELF_CORE_HEAD = "7f 45 4c 46 02 01 01 00 00 00 00 00 00 00 00 00 04 00 3e 00\n"


def faults_output(faults=((1, "0x405000", "0x6"), (14, "0x402010", "0x7"), (18, "0x406000", "0x6"))):
    """expect/kmtrace.jsonl with fault lines after their instruction's lines."""
    lines = EXPECT.splitlines()
    body, summ = lines[:-1], lines[-1]
    out = []
    for i, l in enumerate(body):
        out.append(l)
        o = json.loads(l)
        if i + 1 == len(body) or json.loads(body[i + 1])["vt"] != o["vt"]:
            out += ['{"t":"fault","vcpu":0,"addr":"%s","pc":"%s","err":"%s","vt":%d}' % (a, o["pc"], e, vt)
                    for vt, a, e in faults if vt == o["vt"]]
    # Fault lines are lines: the summary's "events" counts them.
    nfault = sum(1 for l in out if '"t":"fault"' in l)
    summ = re.sub(r'"events":(\d+)', lambda m: '"events":%d' % (int(m.group(1)) + nfault), summ)
    out.append(summ[:-1] + ',"faults":%d}' % len(faults))
    return "\n".join(out) + "\n"


# The range ending at kmtrace's return site (the judge compares the two runs).
SHORT = "\n".join(EXPECT.splitlines()[:5]) + "\n"
# kmsighere's trace (both runs the same: the judge compares them)
SIGHERE = "".join('{"t":"exec","vcpu":0,"pc":"0x%x","vt":%d}\n' % (0x40105c + i % 7 * 4, i)
                  for i in range(123)) + '{"t":"summary","insns":123,"mem":0,"events":123}\n'
# trace_direct / trace_buffered: 60000 exec lines of kmbusy's loop and the summary
BUSY = "".join('{"t":"exec","vcpu":0,"pc":"0x%x","vt":%d}\n' % (0x401000 + i % 3 * 4, i)
               for i in range(60000)) + '{"t":"summary","insns":60000}\n'

# The python check: kmpy.py under sample --folded --pprof, Python frames in
# the native stacks as gebpf merges them (judge_python.py)
KMPY_LINES = judge_python.func_lines(open(os.path.join(HERE, "progs", "kmpy.py")).read())
PY_ROOT = ("_start;__libc_start_main;__libc_start_call_main;Py_BytesMain;Py_RunMain;"
           "_PyRun_AnyFileObject;_PyRun_SimpleFileObject;python3.11+0x251770;PyEval_EvalCode;"
           "kmpy.<module>;kmpy.work")
PY_STACKS = [
    (PY_ROOT + ";kmpy.sort;python3.11+0x1c7194;PyObject_CallOneArg;_PyFunction_Vectorcall;"
     "kmpy.key;PyNumber_Remainder", 400),
    (PY_ROOT + ";kmpy.digest;_hashlib.cpython-311-x86_64-linux-gnu.so+0x68a2;SHA256_Update;"
     "libcrypto.so.3+0x29c41f", 150),
    (PY_ROOT + ";kmpy.sort;python3.11+0x1c7194", 100),
    ("_start;__libc_start_main;__libc_start_call_main;Py_BytesMain;python3.11+0x2a0000", 50),
]
PY_ERR = "gebpf: sample: pid 9: Python 3.11.2 (/usr/bin/python3.11): Python frames on\n" \
    "gebpf: sample: 700 kept, 900 seen, 200 filtered in the kernel, 0 lost; 690 unwound, 10 truncated\n"


def folded(stacks):
    return "".join("%s %d\n" % (s, n) for s, n in stacks)


def pb_varint(n):
    out = bytearray()
    while True:
        b, n = n & 0x7f, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def pb(num, v):
    """One protobuf field: a varint (int) or length-delimited (bytes)."""
    if isinstance(v, int):
        return pb_varint(num << 3) + pb_varint(v)
    return pb_varint(num << 3 | 2) + pb_varint(len(v)) + v


def pprof(stacks, line_of=lambda name: KMPY_LINES.get(name.split(".", 1)[1], (0,))[0] + 1
          if name.startswith("kmpy.") else 0):
    """A gzipped profile.proto of the folded stacks: one function and one
    location per frame name, kmpy's frames in kmpy.py at line_of(name)."""
    strings, funcs = [""], {}

    def sid(t):
        if t not in strings:
            strings.append(t)
        return strings.index(t)

    body = pb(1, pb(1, sid("samples")) + pb(2, sid("count")))
    samples = b""
    for stack, n in stacks:
        ids = []
        for name in reversed(stack.split(";")):
            if name not in funcs:
                funcs[name] = len(funcs) + 1
            ids.append(funcs[name])
        samples += pb(2, pb(1, b"".join(pb_varint(i) for i in ids)) + pb(2, pb_varint(n)))
    for name, i in funcs.items():
        f = "/kmatrix/progs/kmpy.py" if name.startswith("kmpy.") else ""
        body += pb(4, pb(1, i) + pb(4, pb(1, i) + pb(2, line_of(name))))
        body += pb(5, pb(1, i) + pb(2, sid(name)) + pb(4, sid(f)))
    body += samples + b"".join(pb(6, t.encode()) for t in strings)
    return gzip.compress(body)


KILLED_RETRACE = ("gebpf: trace: pid 40: a code cache gebpf 41 left at 0x3ebff000-0x40400000 "
                  "(range 0x4010b8-0x4010c8 of /kmprogs/kmalarm): marked gone, its ring's memory "
                  "given back, 1 patched places written back from their files, 0 threads inside it\n")


CUT_LOADED = ("gebpf: probe trap: BPF program loaded in 8.1 ms (the kernel's BTF cut to its types: "
              "docs/trace.md \"Start-up cost\")\n")


def write_good(d):
    files = {
        "kernel": "6.1.0-test\n",
        "features": "btf=yes\ntracefs=yes\nfsgsbase=yes\nbpftool=yes\n",
        "trace.rc": "0\n", "trace.jsonl": EXPECT,
        "trace.err": "gebpf: probe trap: 2 entries in /kmprogs/kmtrace 0x401010-0x40105a\n",
        "trace_pages.rc": "0\n", "trace_pages.err": "", "trace_pages.jsonl": EXPECT,
        "trace_values.rc": "0\n", "trace_values.jsonl": VALUES,
        "trace_values.err": "gebpf: trace: jit: 2 runs, 3 stops, 19 instructions translated-run, "
                            "3 blocks\n"
                            "gebpf: trace: probe trap: 0 single-steps, 20 in-range instructions, "
                            "1 range entries\n",
        "trace_values_step.rc": "0\n", "trace_values_step.jsonl": VALUES,
        "trace_values_step.err": "gebpf: trace: probe trap: 19 single-steps, 20 in-range "
                                 "instructions, 1 range entries\n",
        "trace_values_pages.rc": "0\n", "trace_values_pages.jsonl": VALUES,
        "trace_values_pages.err": "gebpf: trace: page trap: 21 single-steps, 20 in-range "
                                  "instructions, 2 range entries\n",
        "trace_jit.rc": "0\n", "trace_jit.jsonl": EXPECT,
        "trace_jit.err": CUT_LOADED +
        "gebpf: trace: jit: 2 runs, 3 stops, 20 instructions translated-run, 3 blocks\n",
        "trace_patch.rc": "0\n", "trace_patch.jsonl": EXPECT,
        "trace_patch.err": "gebpf: patch trap: 2 entries patched, 0 probed, threads run natively\ngebpf: patch trap: the owner check in 2 of 2 entry blocks\n",
        "trace_patch_probe.rc": "0\n", "trace_patch_probe.jsonl": SHORT,
        "trace_patch_probe.err": "gebpf: patch trap: its uprobes stop the thread after the kernel "
                                 "ran the entry's instruction out of line (no ip writes)\n"
                                 "gebpf: patch trap: 1 entries patched, 1 probed, threads run natively\n"
                                 "gebpf: trace: the patch trap: 1 entries through its 1 uprobes (0 "
                                 "waited for the cache's lock), 0 sent straight into the cache\n",
        "trace_short.rc": "0\n", "trace_short.err": "", "trace_short.jsonl": SHORT,
        "trace_patch_exec.rc": "0\n", "trace_patch_exec.jsonl": EXPECT,
        "trace_patch_exec.err": "gebpf: patch trap: 2 entries patched, 0 probed, threads run natively\n"
                                "gebpf: patch trap: the owner check in 2 of 2 entry blocks\n",
        "trace_direct.rc": "0\n", "trace_direct.jsonl": BUSY,
        "trace_direct.err": "gebpf: trace: pid 80: the kernel's uprobe page mapped first (the same "
                            "layout under every trap) in 19.3 ms, its uprobe removed once the "
                            "program ran past it\n"
                            "gebpf: output: 2.9 MB written, 100% direct (O_DIRECT), the way changed 0 "
                            "times; last measured 0 MB/s direct, 0 MB/s buffered\n",
        "trace_buffered.rc": "0\n", "trace_buffered.out": BUSY, "trace_buffered.err": "",
        "trace_exec_thread.rc": "0\n", "trace_exec_thread.jsonl": EXPECT.replace('"vcpu":0,', '"vcpu":1,'),
        "trace_exec_thread.err": "gebpf: probe trap: 2 probes attached again for pid 9 (an exec from "
                                 "another thread than the main one) in 20.0 ms\n",
        "trace_sighere.rc": "0\n", "trace_sighere.jsonl": SIGHERE, "trace_sighere.out": "kmsighere ok\n",
        "trace_sighere.err": "gebpf: trace: thread 9: a handler on the range returns through its "
                             "restorer at 0x401088: followed to its rt_sigreturn\n",
        "trace_sighere_ref.rc": "0\n", "trace_sighere_ref.jsonl": SIGHERE,
        "trace_sighere_ref.out": "kmsighere ok\n", "trace_sighere_ref.err": "",
        "snap.rc": "0\n",
        "snap.err": "gebpf: snap: freeze 2.0 ms (registers, maps, copy-on-write copy pid 9); the process runs again\n", "snap.head": ELF_CORE_HEAD,
        "snap_attach.rc": "0\n", "snap_attach.target": "0\n",
        "snap_attach.err": "gebpf: snap: freeze 1.0 ms (registers, maps, copy-on-write copy pid 12); the process runs again\n",
        "read.rc": "0\n", "read.err": "",
        "read.out": "0x0000000000406000  67 65 62 70 66 2d 6b 6d 61 74 72 69 78 2d 6f 6b  |gebpf-kmatrix-ok|\n",
        "resume.rc": "0\n", "resume.err": "", "resume.jsonl": RESUMED,
        "snap_mt.rc": "0\n", "snap_mt.err": "", "resume_mt.rc": "0\n", "resume_mt.err": "",
        "resume_mt.out": "kmthreads ok\n",
        "faults.rc": "0\n", "faults.err": "", "faults.jsonl": faults_output(),
        "sample.rc": "0\n", "sample.err": "",
        "sample.jsonl": "".join('{"t":"sample","vcpu":0,"tid":9,"pc":"0x401064","ns":%d}\n' % i for i in range(500))
        + '{"t":"summary","seen":600,"kept":500}\n',
        "probe.rc": "0\n", "probe.err": "",
        "probe.out": "native push: stop SIGURG at +1, record rip == probe\n"
                     "probecheck: ok: 6 kinds stop after the instruction\n",
        "stacks.rc": "0\n",
        "stacks.err": "gebpf: sample: 500 kept, 600 seen, 100 filtered in the kernel, 0 lost; "
                      "480 unwound, 20 truncated\n",
        "stacks.folded": "_start;__libc_start_main;__libc_start_call_main;main;chain1;chain2;"
                         "chain3;chain4;chain5;leaf_hot 480\nleaf_hot 20\n",
        "detach.rc": "0\n", "detach.err": "", "detach.target": "0\n",
        "stopped_snap.rc": "0\n", "stopped_snap.state": "T\n",
        "stopped_snap.rbx": '\t\t\t"rbx":\t"0x7",\n\t\t\t"rax":\t"0xfffffffffffffdfc",\n',
        "stopped_snap.err": "gebpf: snap: freeze 1.0 ms (registers, maps, copy-on-write copy pid 12); "
                            "the process is let go, stopped as it was found\n",
        "stopped_wait.rc": "0\n", "stopped_wait.state": "T\n", "stopped_wait.err": STOPPED_WARN,
        "stopped_wait.jsonl": '{"t":"summary","insns":0,"mem":0,"events":0,"dropped":0,"exec":true,'
                              '"start":"0x401005","end":"0x401018"}\n',
        "stopped.rc": "1\n", "stopped.state": "t\n", "stopped.target": "0\n", "stopped.jsonl": STOPPED,
        "stopped.err": STOPPED_WARN + "gebpf: pid 9: exited with status 0 during the trace\n",
        "strict.rc": "0\n", "strict.err": STRICT_WARN, "strict.jsonl": STRICT,
        "strict.target": "0\n", "strict.target.out": "kmstrict ok\n",
        "alarm.rc": "0\n", "alarm.err": "", "alarm.jsonl": ALARM,
        "alarm.target": "0\n", "alarm.target.out": "kmalarm ok\n",
        "killed.err": "gebpf: patch trap: 1 entries patched, 0 probed, threads run natively\n",
        "killed.rc": "137\n", "killed.worker": " 41\n",
        "killed.target": "0\n", "killed.target.out": "kmalarm ok\n",
        "killed_retrace.rc": "0\n", "killed_retrace.jsonl": ALARM,
        "killed_retrace.err": KILLED_RETRACE,
        "python.rc": "0\n", "python.err": PY_ERR, "python.out": "",
        "python.target": "0\n", "python.target.out": "kmpy ok 1234\n",
        "python.folded": folded(PY_STACKS),
    }
    with open(os.path.join(d, "python.pb.gz"), "wb") as f:
        f.write(pprof(PY_STACKS))
    for name, text in files.items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    with open(os.path.join(d, "row.env"), "w") as f:
        f.write("NAME=t\nSUITE=test\nMODE=host\n")


def verdicts(d):
    _, _, _, res = judge.judge_row(str(d), EXPECT.splitlines(), ENV)
    return res


def put(d, name, text):
    with open(os.path.join(d, name), "w") as f:
        f.write(text)


@pytest.fixture
def good(tmp_path):
    write_good(tmp_path)
    return tmp_path


def test_good_results_pass(good):
    assert {k: v[0] for k, v in verdicts(good).items()} == dict.fromkeys(judge.CHECKS, "pass")


def test_probe_program_loaded_without_the_btf_cut_fails(good):
    put(good, "trace_jit.err", "gebpf: probe trap: BPF program loaded in 90.1 ms\n"
        "gebpf: trace: jit: 2 runs, 3 stops, 20 instructions translated-run, 3 blocks\n")
    v, why = verdicts(good)["trace"]
    assert v == "fail" and "cut of the kernel's BTF" in why and "90.1 ms" in why
    # a guest without bpftool: the kernel's whole BTF, as before
    put(good, "features", "btf=yes\ntracefs=yes\nfsgsbase=yes\nbpftool=no\n")
    assert verdicts(good)["trace"][0] == "pass"


VEX_ERR = ("gebpf: warning: probe trap: the entry at /kmatrix/progs/uprobe_vex+0x27f5 is "
           "VEX/EVEX-encoded (a uprobe there runs another instruction: docs/bpf.md \"What a "
           "uprobe runs\"); using the page trap\n")


def test_probe_trap_with_a_uprobe_on_a_vex_entry_fails(good):
    # (a guest without uprobe_vex: nothing judged; with it, the native output)
    assert "VEX" not in verdicts(good)["probe"][1]
    for name, text in (("vex_native.rc", "0\n"), ("vex_native.out", "eda4bc5e804bde00\n"),
                       ("vex.rc", "0\n"), ("vex.out", "eda4bc5e804bde00\n"), ("vex.err", VEX_ERR)):
        put(good, name, text)
    v, why = verdicts(good)["probe"]
    assert v == "pass" and "VEX entry left to the page trap" in why
    put(good, "vex.out", "0\n")   # the store undone: a uprobe ran another instruction
    v, why = verdicts(good)["probe"]
    assert v == "fail" and "uprobe_vex printed '0'" in why
    put(good, "vex.out", "eda4bc5e804bde00\n")
    put(good, "vex.err", "")
    assert verdicts(good)["probe"][0] == "fail"
    put(good, "vex_native.rc", "2\n")   # no AVX2 in the guest
    v, why = verdicts(good)["probe"]
    assert v == "pass" and "no AVX2" in why


def test_jit_that_translated_nothing_fails(good):
    put(good, "trace_jit.err", "gebpf: trace: jit: 0 runs, 0 stops, 0 instructions translated-run, 0 blocks\n")
    v, why = verdicts(good)["trace"]
    assert v == "fail" and "translated" in why


def test_patch_trap_not_used_fails(good):
    put(good, "trace_patch.err", "gebpf: warning: range 0x1-0x2: the patch trap does not apply (x): "
        "using the probe trap\n")
    v, why = verdicts(good)["trace"]
    assert v == "fail" and "patch trap was not used" in why


def test_patch_trap_without_the_owner_check_fails(good):
    put(good, "trace_patch.err", "gebpf: patch trap: 2 entries patched, 0 probed, threads run "
        "natively\ngebpf: patch trap: the owner check in 0 of 2 entry blocks\n")
    v, why = verdicts(good)["trace"]
    assert v == "fail" and "no owner check" in why


def test_patch_trap_not_following_the_exec_fails(good):
    put(good, "trace_patch_exec.err", "gebpf: warning: trace: pid 9 exec'd: the patch trap does not "
        "follow it (the new image is not traced)\n")
    put(good, "trace_patch_exec.jsonl", EXPECT.splitlines()[-1].replace('"insns":20', '"insns":0') + "\n")
    v, why = verdicts(good)["trace"]
    assert v == "fail" and "across an exec" in why


def test_probe_trap_blind_after_an_exec_from_a_thread_fails(good):
    # (before the re-attach: the new image ran unseen, only the summary)
    put(good, "trace_exec_thread.err", "")
    put(good, "trace_exec_thread.jsonl", EXPECT.splitlines()[-1].replace('"insns":20', '"insns":0')
        + "\n")
    v, why = verdicts(good)["trace"]
    assert v == "fail" and "exec from a second thread" in why


def test_probe_trap_losing_a_handlers_return_into_the_range_fails(good):
    # (before the restorer was followed: the trace stopped at the first ud2)
    put(good, "trace_sighere.err", "")
    put(good, "trace_sighere.jsonl", "".join(SIGHERE.splitlines(True)[:8]) +
        '{"t":"summary","insns":8,"mem":0,"events":8}\n')
    v, why = verdicts(good)["trace"]
    assert v == "fail" and "handler in the range" in why


def test_probe_trap_not_following_the_restorer_fails(good):
    put(good, "trace_sighere.err", "")
    v, why = verdicts(good)["trace"]
    assert v == "fail" and "rt_sigreturn" in why


def test_sighere_program_not_ok_fails(good):
    put(good, "trace_sighere_ref.out", "")
    v, why = verdicts(good)["trace"]
    assert v == "fail" and "kmsighere did not say" in why


def test_patch_trap_without_its_probed_entry_fails(good):
    put(good, "trace_patch_probe.err", "gebpf: patch trap: 1 entries patched, 1 probed, threads run "
        "natively\ngebpf: trace: the patch trap: 0 entries through its 1 uprobes\n")
    v, why = verdicts(good)["trace"]
    assert v == "fail" and "entered uprobe" in why
    put(good, "trace_patch_probe.err", "")
    put(good, "trace_patch_probe.jsonl", SHORT.replace('"vt":0', '"vt":9', 1))
    v, why = verdicts(good)["trace"]
    assert v == "fail" and "differs from the probe trap's" in why


REDIRECTED = ("gebpf: patch trap: 1 of its 1 uprobes send the thread straight into the code cache "
              "(the BPF program writes ip: no stop)\n"
              "gebpf: patch trap: 1 entries patched, 1 probed, threads run natively\n"
              "gebpf: trace: the patch trap: %d entries through its 1 uprobes (0 waited for the "
              "cache's lock), %d sent straight into the cache\n")


def test_patch_probe_fallback_and_redirect_are_named(good):
    """The trace cell says which way the probed entry went: the fallback
    (a stop) on kernels whose uprobe programs cannot write ip, the BPF
    program's redirect (no stop) where they can."""
    v, why = verdicts(good)["trace"]
    assert v == "pass" and "a stop: no ip writes" in why
    put(good, "trace_patch_probe.err", REDIRECTED % (0, 1))
    v, why = verdicts(good)["trace"]
    assert v == "pass" and "redirected, no stop" in why


def test_redirect_that_still_stops_fails(good):
    put(good, "trace_patch_probe.err", REDIRECTED % (1, 0))
    v, why = verdicts(good)["trace"]
    assert v == "fail" and "not sent straight into the cache" in why


def test_one_wrong_trace_line_fails(good):
    put(good, "trace.jsonl", EXPECT.replace('"size":16', '"size":8', 1))
    v, why = verdicts(good)["trace"]
    assert v == "fail" and "line 33" in why


def test_not_built_yet_is_a_fail_not_a_skip(good):
    put(good, "snap.rc", "1\n")
    put(good, "snap.err", "gebpf: snap: not built yet\n")
    assert verdicts(good)["snap"] == ("fail", "gebpf: snap: not built yet (exit 1)")


def test_snap_without_the_copy_on_write_copy_fails(good):
    line = "gebpf: warning: snap: pid 2: no copy-on-write copy (clone: Invalid argument): capturing with the process stopped"
    put(good, "snap.err", line + "\n")
    assert verdicts(good)["snap"] == ("fail", "snap: no copy-on-write copy: " + line)


def test_snap_attach_target_killed_fails(good):
    put(good, "snap_attach.target", "133\n")
    assert verdicts(good)["snap"] == (
        "fail", "kmsleep, snapshotted while blocked in nanosleep, then exited 133")


def test_missing_kernel_feature_is_a_skip_with_gebpfs_line(good):
    line = "gebpf: sample: perf_event_open cpu-clock: not supported by this kernel"
    put(good, "sample.rc", "1\n")
    put(good, "sample.err", "gebpf: warning: something else\n" + line + "\n")
    assert verdicts(good)["sample"] == ("skip", line)


def test_feature_warning_then_other_error_is_a_fail(good):
    put(good, "sample.rc", "1\n")
    put(good, "sample.err", "gebpf: warning: faults: kernel BTF lacks page_fault_user\n"
                            "gebpf: sample: ring buffer: Cannot allocate memory\n")
    assert verdicts(good)["sample"][0] == "fail"


def test_degraded_faults_without_lines_skip_but_silent_zero_fails(good):
    put(good, "faults.jsonl", faults_output(()))
    v, why = verdicts(good)["faults"]
    assert v == "fail" and "no fault lines" in why
    put(good, "faults.err", "gebpf: warning: faults: page_fault_user tracepoint unavailable on this kernel\n")
    assert verdicts(good)["faults"] == (
        "skip", "gebpf: warning: faults: page_fault_user tracepoint unavailable on this kernel")


def test_fault_outside_the_expected_ones_fails(good):
    put(good, "faults.jsonl", faults_output(((1, "0x405000", "0x6"), (14, "0x402010", "0x7"),
                                             (18, "0x406000", "0x6"), (12, "0x404ff0", "0x6"))))
    v, why = verdicts(good)["faults"]
    assert v == "fail" and "unexpected fault" in why


def test_missing_expected_fault_fails(good):
    put(good, "faults.jsonl", faults_output(((1, "0x405000", "0x6"), (18, "0x406000", "0x6"))))
    v, why = verdicts(good)["faults"]
    assert v == "fail" and "vt 14" in why


def test_optional_read_fault_and_page_aligned_addresses_pass(good):
    put(good, "faults.jsonl", faults_output(((0, "0x402000", "0x4"), (1, "0x405000", "0x6"),
                                             (14, "0x402000", "0x7"), (18, "0x406000", "0x6"))))
    assert verdicts(good)["faults"][0] == "pass"


def test_sample_outside_range_or_too_few_fails(good):
    put(good, "sample.jsonl", '{"t":"sample","vcpu":0,"tid":9,"pc":"0x401000","ns":1}\n{"t":"summary"}\n')
    assert "outside the range" in verdicts(good)["sample"][1]
    put(good, "sample.jsonl", '{"t":"sample","vcpu":0,"tid":9,"pc":"0x401060","ns":1}\n{"t":"summary","kept":1}\n')
    assert "only 1 samples" in verdicts(good)["sample"][1]


def test_read_showing_other_bytes_fails(good):
    put(good, "read.out", "0x406000  00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n")
    assert verdicts(good)["snap"][0] == "fail"


def test_timeout_is_reported(good):
    put(good, "trace.rc", "1\n")
    put(good, "trace.timeout", "30\n")
    put(good, "trace.err", "gebpf: trace: stopped by SIGTERM after 20 in-range instructions\n")
    v, why = verdicts(good)["trace"]
    assert v == "fail" and "still running after 30 s" in why


def test_probe_fail_line_and_missing_uprobes(good):
    put(good, "probe.rc", "1\n")
    put(good, "probe.out", "probecheck: FAIL: native push: stopped at +0, expected +1 (after the instruction)\n")
    v, why = verdicts(good)["probe"]
    assert v == "fail" and why.startswith("FAIL: native push: stopped at +0")
    put(good, "probe.out", "")
    line = "gebpf: warning: probe trap: pid 9: uprobes are not available (no uprobe PMU, no tracefs uprobe_events)"
    put(good, "probe.err", line + "\n")
    assert verdicts(good)["probe"] == ("skip", line)
    put(good, "probe.rc", "0\n")
    put(good, "probe.err", "")
    assert verdicts(good)["probe"][0] == "fail"


def frame(d, names, done=True, corrupt=None, gz=True):
    """The guest's channel (smoke.sh's flush): each file gzipped (gz), or
    plain as older suites sent it."""
    out = []
    for n in names:
        data = open(os.path.join(d, n), "rb").read()
        h = hashlib.sha256(data).hexdigest()
        b = base64.encodebytes(gzip.compress(data) if gz else data).decode()
        if n == corrupt:
            b = "AAAA" + b
        out.append("@@KM-FILE %s %s%s\r\n%s@@KM-END %s\r\n" % (n, h, " gz" if gz else "",
                                                                b.replace("\n", "\r\n"), n))
    if done:
        out.append("@@KM-DONE\r\n")
    return "".join(out)


def test_guest_channel_is_decoded_and_a_dead_guest_fails_the_rest(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    write_good(str(src))
    vm = tmp_path / "vm"
    vm.mkdir()
    put(vm, "row.env", "NAME=9.9\nSUITE=test\nMODE=vm\nVM_RC=0\n")
    put(vm, "console.log", "[    2.9] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI\n")
    put(vm, "serial.txt", frame(str(src), ["kernel", "trace.rc", "trace.err", "trace.jsonl", "trace_pages.rc",
                                          "trace_pages.err", "trace_pages.jsonl", "trace_values.rc",
                                          "trace_values.err", "trace_values.jsonl",
                                          "trace_values_step.rc", "trace_values_step.err",
                                          "trace_values_step.jsonl", "trace_values_pages.rc", "trace_values_pages.err",
                                          "trace_values_pages.jsonl", "trace_jit.rc",
                                          "trace_jit.err", "trace_jit.jsonl", "trace_patch.rc",
                                          "trace_patch.err", "trace_patch.jsonl",
                                          "trace_patch_probe.rc", "trace_patch_probe.err",
                                          "trace_patch_probe.jsonl", "trace_short.rc",
                                          "trace_short.err", "trace_short.jsonl",
                                          "trace_patch_exec.rc", "trace_patch_exec.err", "trace_patch_exec.jsonl",
                                          "trace_exec_thread.rc", "trace_exec_thread.err",
                                          "trace_exec_thread.jsonl", "trace_sighere.rc",
                                          "trace_sighere.err", "trace_sighere.jsonl",
                                          "trace_sighere.out", "trace_sighere_ref.rc",
                                          "trace_sighere_ref.err", "trace_sighere_ref.jsonl",
                                          "trace_sighere_ref.out", "trace_direct.rc",
                                          "trace_direct.err", "trace_direct.jsonl",
                                          "trace_buffered.rc", "trace_buffered.err",
                                          "trace_buffered.out", "killed.err", "killed.rc",
                                          "killed.worker", "killed.target", "killed.target.out",
                                          "killed_retrace.rc", "killed_retrace.err",
                                          "killed_retrace.jsonl"],
                                  done=False))
    res = verdicts(vm)
    assert res["trace"][0] == "pass"
    for ck in ("snap", "faults", "sample", "probe", "detach", "stopped", "strict", "alarm", "python"):
        assert res[ck][0] == "fail" and "Oops: int3" in res[ck][1]


@pytest.mark.parametrize("gz", [True, False], ids=["gzipped", "plain"])
def test_corrupt_channel_file_is_detected(tmp_path, gz):
    src = tmp_path / "src"
    src.mkdir()
    write_good(str(src))
    vm = tmp_path / "vm"
    vm.mkdir()
    put(vm, "row.env", "NAME=9.9\nSUITE=test\nMODE=vm\nVM_RC=0\n")
    put(vm, "serial.txt", frame(str(src), sorted(os.listdir(src)), corrupt="trace.jsonl", gz=gz))
    res = verdicts(vm)
    assert res["trace"][0] == "fail" and "corrupt" in res["trace"][1]


@pytest.mark.parametrize("gz", [True, False], ids=["gzipped", "plain"])
def test_a_whole_channel_judges_as_the_files(tmp_path, good, gz):
    """Every file sent on the channel (gzipped, as smoke.sh sends them, or
    plain, as older suites did) gives the verdicts the files themselves give."""
    vm = tmp_path / "vm"
    vm.mkdir()
    put(vm, "row.env", "NAME=9.9\nSUITE=test\nMODE=vm\nVM_RC=0\n")
    put(vm, "serial.txt", frame(str(good), sorted(n for n in os.listdir(good) if n != "row.env"
                                                  and os.path.isfile(os.path.join(good, n))),
                                gz=gz))
    assert verdicts(vm) == verdicts(good)


def test_resume_must_run_the_snapshot_s_next_instructions(good):
    put(good, "resume.jsonl", RESUMED.replace("0x40100c", "0x401000"))
    assert verdicts(good)["resume"][0] == "fail"
    put(good, "resume.jsonl", "")
    assert verdicts(good)["resume"][0] == "fail"
    put(good, "resume.rc", "1\n")
    put(good, "resume.err", "gebpf: --from snap.core: prctl PR_SET_MM_MAP (brk 0x0-0x0, auxv): Invalid argument\n")
    assert verdicts(good)["resume"] == (
        "fail", "gebpf: --from snap.core: prctl PR_SET_MM_MAP (brk 0x0-0x0, auxv): Invalid argument (exit 1)")


def test_resume_must_bring_back_both_threads(good):
    """kmthreads resumed must print its line: a resume that lost the second
    thread (or its clear_child_tid) hangs and is stopped by the time limit."""
    put(good, "resume_mt.out", "")
    assert verdicts(good)["resume"][0] == "fail"
    put(good, "resume_mt.rc", "124\n")
    put(good, "resume_mt.timeout", "30\n")
    v = verdicts(good)["resume"]
    assert v[0] == "fail" and "resume_mt" in v[1] and "still running" in v[1]
    os.remove(os.path.join(str(good), "snap_mt.rc"))
    v = verdicts(good)["resume"]
    assert v[0] == "fail" and "snap_mt: no result" in v[1]


FDS_OUT = ("epoll 2 ready 0x22221111\neventfd 8 5 nonblock 1\npipe 5 hello nonblock 1 0\n"
           "timerfd armed 1 interval 1\nsignalfd 128 10\ncloexec 1 0 0 1 1 1\n")


def test_resume_in_a_new_pid_namespace_must_bring_back_both_threads(good):
    put(good, "resume_mt_ns.rc", "0\n")
    put(good, "resume_mt_ns.out", "kmthreads ok\n")
    put(good, "resume_mt_ns.err", "")
    v = verdicts(good)["resume"]
    assert v[0] == "pass" and "new pid namespace" in v[1], v
    put(good, "resume_mt_ns.rc", "1\n")
    put(good, "resume_mt_ns.err", "gebpf: launch: /kmprogs/kmthreads in a new pid namespace as "
        "pid 9: Invalid argument\n")
    v = verdicts(good)["resume"]
    assert v[0] == "fail" and "new pid namespace" in v[1], v


def test_resume_must_make_the_fd_kinds_again(good):
    """resume_fds resumed must print its own run's lines and say nothing; a
    guest without the program (not built) judges the rest alone."""
    for n, out in (("resume_fds_native", FDS_OUT), ("snap_fds", ""), ("resume_fds", FDS_OUT)):
        put(good, n + ".rc", "0\n")
        put(good, n + ".out", out)
        put(good, n + ".err", "")
    v = verdicts(good)["resume"]
    assert v[0] == "pass" and "epoll, eventfd, timerfd, signalfd and a pipe" in v[1], v
    put(good, "resume_fds.out", FDS_OUT.replace("eventfd 8 5", "eventfd -1 0"))
    v = verdicts(good)["resume"]
    assert v[0] == "fail" and "resume_fds" in v[1], v
    put(good, "resume_fds.out", FDS_OUT)
    # an fd the harness left open (a host row's fd 251) is not the program's
    put(good, "resume_fds.err", "gebpf: warning: resume: fd 251 (pipe:[221458]): a pipe whose "
        "other end is not in the process; replaced by /dev/null\n")
    assert verdicts(good)["resume"][0] == "pass"
    put(good, "resume_fds.err", "gebpf: warning: resume: fd 8 (anon_inode:[eventpoll]): not a file "
        "that can be reopened; replaced by /dev/null\n")
    v = verdicts(good)["resume"]
    assert v[0] == "fail" and "replaced by /dev/null" in v[1], v
    for n in ("resume_fds_native", "snap_fds", "resume_fds"):
        for ext in (".rc", ".out", ".err"):
            os.remove(os.path.join(str(good), n + ext))
    assert verdicts(good)["resume"][0] == "pass"


def test_target_killed_after_detach_fails(good):
    put(good, "detach.target", "133\n")
    v = verdicts(good)["detach"]
    assert v[0] == "fail" and "signal 5" in v[1]


def test_stopped_target_must_stay_stopped_and_be_traced_from_sigcont(good):
    """stopped: a snap or a trace that let kmsleep run (or hung), a trace with
    lines before the SIGCONT or missing some after it, fail."""
    assert verdicts(good)["stopped"][0] == "pass"
    put(good, "stopped_snap.state", "S\n")
    v = verdicts(good)["stopped"]
    assert v[0] == "fail" and "stopped_snap left kmsleep in state S" in v[1]
    write_good(str(good))
    put(good, "stopped_snap.rc", "124\n")
    put(good, "stopped_snap.timeout", "30\n")
    v = verdicts(good)["stopped"]
    assert v[0] == "fail" and "still running" in v[1]
    write_good(str(good))
    os.remove(os.path.join(str(good), "stopped_snap.timeout"))
    put(good, "stopped_wait.err", "")
    assert "no line saying" in verdicts(good)["stopped"][1]
    write_good(str(good))
    put(good, "stopped.state", "S\n")
    assert "ran while stopped" in verdicts(good)["stopped"][1]
    write_good(str(good))
    put(good, "stopped.jsonl", STOPPED.split("\n", 1)[1])
    v = verdicts(good)["stopped"]
    assert v[0] == "fail" and "38 instructions, expected 39" in v[1]
    # ... unless the SIGSTOP came as the sleep ended (rax 0 in the snapshot):
    # then nothing restarts and the trace begins at the dec.
    put(good, "stopped_snap.rbx", '\t\t\t"rbx":\t"0x7",\n\t\t\t"rax":\t"0x0",\n')
    assert verdicts(good)["stopped"] == ("pass", "left stopped twice; 38 instructions after SIGCONT "
                                         "(6 rounds)")
    put(good, "stopped.jsonl", STOPPED)
    v = verdicts(good)["stopped"]
    assert v[0] == "fail" and "39 instructions, expected 38 (the end of the sleep" in v[1]
    write_good(str(good))
    # A round missed (gebpf let it run untraced meanwhile).
    lines = STOPPED.splitlines()
    put(good, "stopped.jsonl", "\n".join(lines[:9] + lines[15:]) + "\n")
    v = verdicts(good)["stopped"]
    assert v[0] == "fail" and "33 instructions, expected 39" in v[1]
    # A slow guest's kmsleep stopped in its second sleep (rbx 6): five rounds.
    put(good, "stopped_snap.rbx", '\t\t\t"rbx":\t"0x6",\n')
    assert verdicts(good)["stopped"] == ("pass", "left stopped twice; 33 instructions after SIGCONT "
                                         "(5 rounds)")
    put(good, "stopped_snap.rbx", "")
    assert "no rbx" in verdicts(good)["stopped"][1]
    # kmsleep makes 12 sleeps: a count above them is not kmsleep's
    put(good, "stopped_snap.rbx", '\t\t\t"rbx":\t"0xd",\n')
    assert "no rbx of kmsleep in its sleep (1 to 12)" in verdicts(good)["stopped"][1]
    write_good(str(good))
    put(good, "stopped.rc", "0\n")
    put(good, "stopped.err", STOPPED_WARN)
    assert verdicts(good)["stopped"][0] == "fail"


def test_alarm_needs_a_growing_trace_and_the_target_ok(good):
    """kmalarm: a trace that stopped growing (one call), or the target not
    finishing, fails."""
    assert verdicts(good)["alarm"][0] == "pass"
    put(good, "alarm.jsonl", "".join(ALARM.splitlines(True)[:len(ALARM_PCS) + 2]) +
        '{"t":"summary","insns":10,"mem":0,"events":10,"dropped":0,"exec":true,"start":"0x4010b8","end":"0x4010c8"}\n')
    v = verdicts(good)["alarm"]
    assert v[0] == "fail" and "stopped growing" in v[1], v
    put(good, "alarm.jsonl", ALARM)
    put(good, "alarm.target", "133\n")
    v = verdicts(good)["alarm"]
    assert v[0] == "fail" and "signal 5" in v[1], v


def test_both_killed_needs_the_program_to_finish_and_the_next_trace_to_take_over(good):
    """gebpf and its worker SIGKILLed under the patch trap (the trace cell):
    kmalarm must finish by itself, and the next trace must say it wrote the
    entries back and trace whole calls of work."""
    assert verdicts(good)["trace"][0] == "pass", verdicts(good)["trace"]
    put(good, "killed.target", "137\n")
    v = verdicts(good)["trace"]
    assert v[0] == "fail" and "SIGKILLed" in v[1] and "signal 9" in v[1], v
    put(good, "killed.target", "0\n")
    put(good, "killed_retrace.err", "gebpf: range work = 0x4010b8-0x4010c8\n")
    v = verdicts(good)["trace"]
    assert v[0] == "fail" and "not taken over" in v[1], v
    # gebpf outlived its worker long enough to write the entries back (the
    # two SIGKILLs are two signals): the takeover had none left to write
    put(good, "killed_retrace.err", KILLED_RETRACE.replace("1 patched places", "0 patched places"))
    v = verdicts(good)["trace"]
    assert v[0] == "fail" and "not taken over" in v[1], v
    put(good, "killed.err", (judge.read(os.path.join(good, "killed.err")) or "") +
        "gebpf: pid 40: the tracing process was killed: 1 of 1 patched places written back\n")
    assert verdicts(good)["trace"][0] == "pass", verdicts(good)["trace"]
    put(good, "killed_retrace.err", KILLED_RETRACE)
    put(good, "killed.err", "gebpf: trace: pid 40 stopped 3 ms for the set-up\n")
    v = verdicts(good)["trace"]
    assert v[0] == "fail" and "before the kill" in v[1], v


def test_strict_target_killed_fails(good):
    """kmstrict SIGKILLed (an injected system call in strict seccomp mode)."""
    put(good, "strict.target", "137\n")
    put(good, "strict.target.out", "")
    v = verdicts(good)["strict"]
    assert v[0] == "fail" and "signal 9" in v[1], v


def test_strict_needs_the_warning_and_tick_only(good):
    put(good, "strict.err", "")
    assert "no warning" in verdicts(good)["strict"][1]
    put(good, "strict.err", STRICT_WARN)
    put(good, "strict.jsonl", STRICT.replace("0x40108b", "0x40108c", 1))
    v = verdicts(good)["strict"]
    assert v[0] == "fail" and "outside tick" in v[1], v


def test_direct_trace_that_differs_fails(good):
    """trace_direct's file (written with O_DIRECT) must equal trace_buffered's."""
    put(good, "trace_direct.jsonl", BUSY.replace('"vt":59990}', '"vt":5999}'))
    res = verdicts(good)
    assert res["trace"][0] == "fail" and "O_DIRECT differs" in res["trace"][1], res["trace"]


def test_stacks_judges_each_sample_s_unwinding_not_the_count(good):
    """A starved guest gives few samples: 4 in the leaf, all unwound, pass
    (saying so); 2, or 4 of which one unwound, fail."""
    chain = "_start;__libc_start_main;__libc_start_call_main;main;chain1;chain2;chain3;chain4;chain5;leaf_hot"
    for folded, kept, verdict in ((chain + " 4\n", 4, "pass"), (chain + " 2\n", 2, "fail"),
                                  (chain + " 1\nleaf_hot 3\n", 4, "fail")):
        put(good, "stacks.folded", folded)
        put(good, "stacks.err", "gebpf: sample: %d kept, %d seen, 0 filtered in the kernel, 0 lost; "
            "%d unwound, 0 truncated\n" % (kept, kept, kept))
        v = verdicts(good)["stacks"]
        assert v[0] == verdict, (folded, v)
        assert verdict == "fail" or "few samples" in v[1], v


def test_python_native_stacks_only_fails_saying_so(good):
    """A gebpf that does not read CPython frames: the interpreter's stacks only."""
    native = [(s.replace("kmpy.<module>;kmpy.work", "_PyEval_EvalFrameDefault")
               .replace(";kmpy.sort", "").replace("kmpy.key", "_PyEval_EvalFrameDefault")
               .replace(";kmpy.digest", ""), n) for s, n in PY_STACKS]
    put(good, "python.folded", folded(native))
    v, why = verdicts(good)["python"]
    assert v == "fail" and "native stacks only" in why and "in 700 samples" in why, why
    # -v's count of the code objects gebpf could not read is quoted
    line = "gebpf: sample: Python: 1 processes, 650 samples with 0 Python frames (2000 code objects unreadable)"
    put(good, "python.err", PY_ERR + line + "\n")
    v, why = verdicts(good)["python"]
    assert v == "fail" and why.endswith("(%s)" % line), why


def test_python_missing_function_or_interleaving_fails(good):
    put(good, "python.folded", folded([(s.replace("kmpy.digest", "kmpy.other"), n) for s, n in PY_STACKS]))
    v, why = verdicts(good)["python"]
    assert v == "fail" and "no kmpy.digest frame" in why, why
    # Python frames stacked outermost, not where the interpreter runs them
    put(good, "python.folded", folded([(";".join(sorted(s.split(";"), key=lambda f: not f.startswith("kmpy."))), n)
                                       for s, n in PY_STACKS]))
    v, why = verdicts(good)["python"]
    assert v == "fail" and "from _start" in why, why
    # key straight under sort: the native frames of the C sort lost
    put(good, "python.folded", folded([(s.replace("python3.11+0x1c7194;PyObject_CallOneArg;_PyFunction_Vectorcall;", ""), n)
                                       for s, n in PY_STACKS]))
    v, why = verdicts(good)["python"]
    assert v == "fail" and "kmpy.sort;<native" in why, why
    # digest without libcrypto below it
    put(good, "python.folded", folded([(s.replace("SHA256_Update;libcrypto.so.3", "python3.11"), n)
                                       for s, n in PY_STACKS]))
    v, why = verdicts(good)["python"]
    assert v == "fail" and "libcrypto" in why, why


def test_python_share_below_80_percent_fails(good):
    stacks = PY_STACKS[:3] + [(PY_STACKS[3][0], 200)]   # 650 of 850: 76%
    put(good, "python.folded", folded(stacks))
    put(good, "python.err", PY_ERR.replace("700 kept", "850 kept"))
    with open(os.path.join(str(good), "python.pb.gz"), "wb") as f:
        f.write(pprof(stacks))
    v, why = verdicts(good)["python"]
    assert v == "fail" and "650 of 850 samples (76%)" in why, why
    # ... and the folded stacks must hold every kept sample
    put(good, "python.err", PY_ERR)
    v, why = verdicts(good)["python"]
    assert v == "fail" and "counts say 700 kept" in why, why


def test_python_pprof_lines_and_samples_checked(good):
    def write(data):
        with open(os.path.join(str(good), "python.pb.gz"), "wb") as f:
            f.write(data)
    write(pprof(PY_STACKS, line_of=lambda name: 1))   # line 1: the docstring
    v, why = verdicts(good)["python"]
    assert v == "fail" and "pprof: kmpy." in why and "expected kmpy.py:" in why, why
    write(pprof(PY_STACKS[:2]))
    v, why = verdicts(good)["python"]
    assert v == "fail" and "holds 550 samples" in why, why
    write(b"not gzip")
    v, why = verdicts(good)["python"]
    assert v == "fail" and "not a gzipped profile" in why, why


def test_python_program_must_finish_and_be_there(good):
    put(good, "python.target.out", "")
    v, why = verdicts(good)["python"]
    assert v == "fail" and "kmpy ok N" in why, why
    put(good, "python.target.out", "kmpy ok 12\n")
    put(good, "python.target", "137\n")
    v, why = verdicts(good)["python"]
    assert v == "fail" and "kmpy exited 137" in why, why
    put(good, "python.rc", "127\n")
    put(good, "python.err", "kmatrix: /usr/bin/python3.11: not here (scripts/kmatrix stages ...)\n")
    v, why = verdicts(good)["python"]
    assert v == "fail" and "python3.11: not here" in why, why


def test_patch_trap_without_fsgsbase_checks_by_fs0(good):
    """A CPU that hides FSGSBASE (features: fsgsbase=no): the entry blocks
    check the owner by the TCB at fs:0, and -v must say so; it must not say
    so where the CPU has FSGSBASE."""
    tcb = ("gebpf: patch trap: 2 entries patched, 0 probed, threads run natively\n"
           "gebpf: patch trap: the owner check in 2 of 2 entry blocks (by the TCB at fs:0: "
           "no FSGSBASE)\n")
    for name in ("trace_patch", "trace_patch_exec"):
        put(good, name + ".err", tcb)
    v, why = verdicts(good)["trace"]
    assert v == "fail" and "fsgsbase=yes" in why, why
    put(good, "features", "btf=yes\ntracefs=yes\nfsgsbase=no\n")
    v, why = verdicts(good)["trace"]
    assert v == "pass" and "hides FSGSBASE" in why, why
    put(good, "trace_patch.err", "gebpf: patch trap: 2 entries patched, 0 probed, threads run "
        "natively\ngebpf: patch trap: the owner check in 2 of 2 entry blocks\n")
    v, why = verdicts(good)["trace"]
    assert v == "fail" and "fsgsbase=no" in why, why


def test_uprobe_page_probe_removed_before_the_program_ran_fails(good):
    """trace_direct's launch must have removed the uprobe page's uprobe after
    kmbusy ran past its entry (its range is far from it: trace/xol.h)."""
    put(good, "trace_direct.err", "gebpf: trace: pid 80: the kernel's uprobe page mapped first "
        "(the same layout under every trap) in 52.0 ms\n")
    res = verdicts(good)
    assert res["trace"][0] == "fail" and "ran past it" in res["trace"][1], res["trace"]


def test_values_trace_is_judged_by_its_values(tmp_path):
    """trace_values: a value that is not kmtrace's (the counter read as 40),
    a missing first regs line, or a summary that does not count the regs
    line fail the trace cell."""
    good = tmp_path / "good"
    good.mkdir()
    write_good(str(good))
    assert verdicts(good)["trace"][0] == "pass"
    put(good, "trace_values.jsonl", VALUES.replace('"size":4,"val":"0x29"', '"size":4,"val":"0x28"'))
    res = verdicts(good)["trace"]
    assert res[0] == "fail" and "expect/kmtrace_values.jsonl" in res[1], res
    put(good, "trace_values.jsonl", VALUES.split("\n", 1)[1])
    res = verdicts(good)["trace"]
    assert res[0] == "fail" and "no regs line first" in res[1], res
    put(good, "trace_values.jsonl", VALUES.replace('"events":38', '"events":37'))
    res = verdicts(good)["trace"]
    assert res[0] == "fail" and "summary" in res[1], res
    # the probe trap must have taken them, and given the page trap's bytes
    put(good, "trace_values.jsonl", VALUES)
    put(good, "trace_values.err", "gebpf: trace: page trap: 21 single-steps\n")
    res = verdicts(good)["trace"]
    assert res[0] == "fail" and "the probe trap was not used" in res[1], res
    # the default takes them in the code cache; the step engine's are the same bytes
    put(good, "trace_values.err", "gebpf: trace: jit: 1 runs, 1 stops, 0 instructions "
        "translated-run, 1 blocks\ngebpf: trace: probe trap: 20 single-steps\n")
    res = verdicts(good)["trace"]
    assert res[0] == "fail" and "no instruction ran in the code cache" in res[1], res
    write_good(str(good))
    put(good, "trace_values_step.jsonl", VALUES.replace('"size":4,"val":"0x29"', '"size":4,"val":"0x28"'))
    res = verdicts(good)["trace"]
    assert res[0] == "fail" and "trace_values_step" in res[1], res

#!/usr/bin/python3
"""Judge the kmatrix smoke-suite results and print the matrix table.

    judge.py EXPECT_DIR KM_ENV TABLE_OUT RESULT_DIR...

Each RESULT_DIR holds row.env (written by scripts/kmatrix: NAME, SUITE,
PACKAGE, MODE=vm|host, VM_RC, VM_SECONDS) and either the files smoke.sh wrote
(host) or serial.txt, the guest's framed results channel, which is decoded
here first (smoke.sh: "@@KM-FILE NAME SHA256 gz", the base64 of the gzipped
file, "@@KM-END NAME", "@@KM-DONE"; without "gz" the file's own base64).

Verdicts (docs/kmatrix.md): pass; skip only when gebpf reported a missing
kernel feature in one clear line (FEATURE_RE) and did not produce what the
check needs; fail otherwise, with the line gebpf printed.  Exit status 1 when
any check failed (except those named in $KMATRIX_OPTIONAL) or a guest gave
no results, else 0.
"""
import base64
import gzip
import hashlib
import json
import os
import re
import sys

import judge_python

CHECKS = ("trace", "snap", "resume", "faults", "sample", "probe", "stacks", "detach", "stopped",
          "strict", "alarm", "python")
HERE = os.path.dirname(os.path.abspath(__file__))

# A gebpf line that reports a kernel feature the kernel lacks.  gebpf's rooms
# phrase these as "gebpf: <what>: <feature> not supported by this kernel ..."
# (or unavailable / missing); "not built yet" is never a skip.
FEATURE_RE = re.compile(
    r"^gebpf: .*\b(not supported|unsupported|unavailable|not available|"
    r"missing|lacks|no BTF|not present)\b", re.I)

TIMEOUT_RCS = (124, 137, 143)
# Samples a sampling cell needs to mean something.  Not a rate: a guest at
# nice 19 beside the host's tests is starved, its vCPU off the host's CPUs
# for long stretches, and its sampling timer then fires once per stretch
# (5.10's stacks cell: 47 samples in leaf_hot over 1 s of the program's CPU
# time, where an idle guest gives ~1000).
MIN_SAMPLES = 20
# ... but the stacks cell judges each sample's unwinding, which a handful
# shows as well as a thousand: it asks this many in the leaf, 90% of them
# unwound (the 5.10 guest gave 4 of ~1000 in a clean CI run of 2026-12-08,
# all 4 unwound to _start; 20 failed it).
STACK_MIN_SAMPLES = 3
CELL = 44  # widest table cell; longer reasons are listed in full below the table


def read(path, default=None, mode="r"):
    try:
        with open(path, mode) as f:
            return f.read()
    except OSError:
        return default


def load_env(path):
    env = {}
    for line in (read(path, "") or "").splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            k, v = line.split("=", 1)
            env[k.strip()] = v.strip().strip("'\"")
    return env


def decode_serial(rdir):
    """Unpack serial.txt into rdir.  Returns None when the guest sent
    everything, else what went wrong (files that arrived are kept)."""
    text = read(os.path.join(rdir, "serial.txt"), None, "rb")
    if text is None:
        return "no results channel output"
    lines = text.decode("ascii", "replace").replace("\r", "").split("\n")
    cur, buf, done, bad = None, [], False, []
    for line in lines:
        if line.startswith("@@KM-FILE "):
            parts = line.split()
            # (NAME SHA256, or NAME SHA256 gz: the base64 of the gzipped file)
            ok = len(parts) == 3 or (len(parts) == 4 and parts[3] == "gz")
            cur, buf = ((parts[1], parts[2], len(parts) == 4) if ok else None), []
            if cur is None:
                bad.append("bad header: %.40s" % line)
        elif line.startswith("@@KM-END ") and cur is not None:
            name, want, gz = cur
            try:
                data = base64.b64decode("".join(buf), validate=True)
                if gz:
                    data = gzip.decompress(data)
            except (ValueError, OSError, EOFError):
                data = None
            if data is None or hashlib.sha256(data).hexdigest() != want:
                bad.append(name)
            else:
                with open(os.path.join(rdir, os.path.basename(name)), "wb") as f:
                    f.write(data)
            cur = None
        elif line.startswith("@@KM-DONE"):
            done = True
        elif cur is not None:
            buf.append(line.strip())
    if bad:
        return "corrupt result files on the serial channel: " + ", ".join(bad)
    return None if done else "the guest stopped before the end of the suite"


def console_hint(rdir):
    """The line of the guest console that says why it stopped."""
    lines = [l.strip() for l in (read(os.path.join(rdir, "console.log"), "") or "").splitlines() if l.strip()]
    for l in lines:
        if re.search(r"Kernel panic|BUG:|Oops|general protection|WARNING:|not syncing", l):
            return l
    return lines[-1] if lines else "(empty console)"


class Check:
    """What one gebpf command did in one result directory."""

    # Why a check has no result, when the guest stopped early (judge_row).
    missing = None

    def __init__(self, rdir, name):
        self.name = name
        rc = read(os.path.join(rdir, name + ".rc"))
        self.ran = rc is not None
        self.rc = int(rc) if rc and rc.strip().lstrip("-").isdigit() else None
        self.err = (read(os.path.join(rdir, name + ".err"), "") or "").splitlines()
        self.timeout = (read(os.path.join(rdir, name + ".timeout"), "") or "").strip()

    def gebpf_line(self):
        """The last one-line gebpf error, else the last stderr line."""
        mine = [l for l in self.err if l.startswith("gebpf:")]
        errs = [l for l in mine if "warning:" not in l] or mine
        if errs:
            return errs[-1]
        rest = [l for l in self.err if l.strip()]
        return rest[-1] if rest else "(nothing on stderr)"

    def feature_line(self):
        for line in self.err:
            if FEATURE_RE.search(line) and "not built yet" not in line:
                return line
        return None

    def failed_run(self):
        """A verdict for a command that did not exit 0, else None."""
        if not self.ran:
            return ("fail", "%s: no result: %s" % (self.name, Check.missing or "did not run"))
        if self.timeout or self.rc in TIMEOUT_RCS:
            return ("fail", "%s: still running after %s s, stopped by SIGTERM (exit %s): %s"
                    % (self.name, self.timeout or "the time limit", self.rc, self.gebpf_line()))
        if self.rc != 0:
            # A skip only when the error gebpf stopped with names the
            # missing kernel feature (an earlier warning does not count).
            last = self.gebpf_line()
            if self.rc != 2 and FEATURE_RE.search(last) and "not built yet" not in last:
                return ("skip", last)
            return ("fail", "%s (exit %s)" % (last, self.rc))
        return None


def jsonl(path):
    """Parsed lines, or raise ValueError naming the bad line."""
    out = []
    text = read(path)
    if text is None:
        raise ValueError("%s: no output file" % os.path.basename(path))
    for i, line in enumerate(text.splitlines(), 1):
        try:
            out.append(json.loads(line))
        except ValueError:
            raise ValueError("%s line %d is not JSON: %.60s" % (os.path.basename(path), i, line))
    return out, text.splitlines()


def first_diff(got, want):
    for i, (g, w) in enumerate(zip(got, want), 1):
        if g != w:
            return "line %d: got %s, expected %s" % (i, g, w)
    if len(got) != len(want):
        return "%d lines, expected %d" % (len(got), len(want))
    return None


OWNER_RE = re.compile(r"the owner check in [1-9]\d* of ")
TCB_SAYS = "(by the TCB at fs:0: no FSGSBASE)"
DIRECT_RE = re.compile(r"gebpf: output: [0-9.]+ MB written, ([0-9]+)% direct")
JIT_RE = re.compile(r"jit: (\d+) runs, \d+ stops, (\d+) instructions translated-run")


def no_fsgsbase(rdir):
    """The CPU hides FSGSBASE (features: fsgsbase=no, from /proc/cpuinfo)."""
    return "fsgsbase=no" in (read(os.path.join(rdir, "features"), "") or "").split()


CUT_SAID = "the kernel's BTF cut to its types"


def judge_btf_cut(rdir):
    """The probe trap's program loaded with the cached cut of the kernel's
    BTF (docs/trace.md "Start-up cost"): the first trace of the boot
    (`trace`) made it with the guest's bpftool, a later one (trace_jit,
    the probe trap again) loaded with it.  (trace_patch patches every
    entry of kmtrace: it loads no uprobe program.)"""
    if "bpftool=yes" not in (read(os.path.join(rdir, "features"), "") or "").split():
        return None
    for name in ("trace_jit",):
        c = Check(rdir, name)
        if not any("BPF program loaded" in l and CUT_SAID in l for l in c.err):
            return ("fail", "%s: the probe trap's program was not loaded with the cut of the "
                    "kernel's BTF: %s" % (name, next((l.strip() for l in c.err
                                                       if "BPF program loaded" in l),
                                                      c.gebpf_line())))
    return None


def judge_trace(rdir, exp, env):
    """The exact trace under the probe trap (which must have been used: its
    -v line names the entries it probed), under the page trap, by the
    translating engine (which must have run instructions translated), and
    under the patch trap (its -v line says it patched the entries), also
    when the program is exec'd by a shell (trace_patch_exec)."""
    for name, trap in (("trace", "probe"), ("trace_pages", "page"), ("trace_jit", "jit"),
                       ("trace_patch", "patch"), ("trace_patch_exec", "patch")):
        c = Check(rdir, name)
        bad = c.failed_run()
        if bad:
            return bad
        got = (read(os.path.join(rdir, name + ".jsonl")) or "").splitlines()
        if not got:
            return ("fail", "%s: empty output" % name)
        diff = first_diff(got, exp)
        if diff:
            return ("fail", "%s trap%s: trace differs from expect/kmtrace.jsonl: %s" % (
                trap, " across an exec" if name == "trace_patch_exec" else "", diff))
        if trap == "probe" and not any("probe trap: " in l and " entries in " in l for l in c.err):
            return ("fail", "the probe trap was not used: %s" % c.gebpf_line())
        if trap == "jit":
            m = next((JIT_RE.search(l) for l in c.err if JIT_RE.search(l)), None)
            if not m or int(m.group(2)) == 0:
                return ("fail", "--engine jit ran nothing translated: %s" % c.gebpf_line())
        if trap == "patch" and not any("entries patched" in l for l in c.err):
            return ("fail", "the patch trap was not used%s: %s" % (
                " across an exec" if name == "trace_patch_exec" else "", c.gebpf_line()))
        # the owner check (docs/trace.md "The owner check") in every entry
        # block: by rdfsbase (FSGSBASE, Linux 5.9) where the CPU has it, by
        # the TCB at fs:0 where a CPU (a hypervisor) hides it, as -v says
        if trap == "patch":
            line = next((l for l in c.err if OWNER_RE.search(l)), None)
            if not line:
                return ("fail", "the patch trap's entry blocks have no owner check: %s" % next(
                    (l for l in c.err if "owner check" in l), c.gebpf_line()))
            if no_fsgsbase(rdir) != (TCB_SAYS in line):
                return ("fail", "the owner check's form does not match the CPU (fsgsbase=%s): "
                        "%s" % ("no" if no_fsgsbase(rdir) else "yes", line.strip()))
    bad = (judge_patch_probe(rdir) or judge_exec_thread(rdir, exp) or judge_sighere(rdir) or
           judge_direct(rdir) or judge_killed(rdir, env) or judge_btf_cut(rdir) or
           judge_values(rdir, env))
    if bad:
        return bad
    return ("pass", "%d lines exact: probe trap (also after an exec from a second thread, and "
            "through a handler in the range that steps over a ud2), page "
            "trap (and with --values, by the probe and the page trap: every value), jit, patch trap (across an exec, and with an entry on a uprobe: %s; written %s; "
            "gebpf and its worker killed: the program finished, the next trace took over%s)"
            % (len(got), patch_probe_way(rdir), direct_way(rdir),
               "; the owner check by fs:0: this CPU hides FSGSBASE" if no_fsgsbase(rdir) else ""))


VALUES_EXP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "expect", "kmtrace_values.jsonl")


def judge_values(rdir, env):
    """trace --values, under the probe trap (the default with values where
    every entry gives its values once it ran: kmtrace's do) and under the
    page trap, in the translating engine's code cache, and single-stepped
    (--engine step): the same bytes, every exec and access line with its
    value as expect/kmtrace_values.jsonl has them (kmtrace's values are
    fixed by its data and km.ld), and a first regs line giving the file
    before `work` (rip at its start, rsp on the private stack); the summary
    counts it.  The default ran instructions translated."""
    for name, trap in (("trace_values_pages", "page"), ("trace_values", "probe"),
                       ("trace_values_step", "probe")):
        bad = judge_values_one(rdir, env, name)
        if bad:
            return bad
        c = Check(rdir, name)
        if not any(("trace: %s trap: " % trap) in l for l in c.err):
            return ("fail", "%s: the %s trap was not used: %s" % (name, trap, c.gebpf_line()))
    pages = read(os.path.join(rdir, "trace_values_pages.jsonl"))
    for name in ("trace_values", "trace_values_step"):
        if read(os.path.join(rdir, name + ".jsonl")) != pages:
            return ("fail", "%s: its values trace differs from the page trap's" % name)
    m = [re.search(r"jit: \d+ runs, \d+ stops, (\d+) instructions translated-run", l)
         for l in Check(rdir, "trace_values").err]
    if not any(x and int(x.group(1)) > 0 for x in m):
        return ("fail", "trace_values: no instruction ran in the code cache: %s"
                % Check(rdir, "trace_values").gebpf_line())
    return None


def judge_values_one(rdir, env, name):
    c = Check(rdir, name)
    bad = c.failed_run()
    if bad:
        return bad
    try:
        objs, raw = jsonl(os.path.join(rdir, name + ".jsonl"))
    except ValueError as e:
        return ("fail", "%s: %s" % (name, e))
    if not objs or objs[0].get("t") != "regs":
        return ("fail", "%s: no regs line first: %.120s" % (name, raw[0] if raw else "(empty)"))
    first = objs[0]["regs"]
    start = env.get("WORK_START", 0)
    want_rip = "0x%x" % (int(start, 16) if isinstance(start, str) else start)
    if first.get("rip") != want_rip or first.get("rsp") != "0x404ff8" or "xmm0" not in first:
        return ("fail", "%s: the first regs line is not the file before work (rip %s, "
                "rsp %s, expected %s and 0x404ff8)" % (name, first.get("rip"), first.get("rsp"),
                                                       want_rip))
    body = [r for o, r in zip(objs, raw) if o.get("t") not in ("regs", "summary")]
    diff = first_diff(body, (read(VALUES_EXP) or "").splitlines())
    if diff:
        return ("fail", "%s: differs from expect/kmtrace_values.jsonl: %s" % (name, diff))
    summ = objs[-1]
    if summ.get("t") != "summary" or summ.get("events") != len(objs) - 1:
        return ("fail", "%s: the summary does not count the lines: %.120s" % (name, raw[-1]))
    return None


WROTE_BACK_RE = re.compile(r"the tracing process was killed: (\d+) of \1 patched places written back")
LEFT_RE = re.compile(r"a code cache gebpf \d+ left at 0x[0-9a-f]+-0x[0-9a-f]+ \(range "
                     r"0x[0-9a-f]+-0x[0-9a-f]+ of [^)]*\): marked gone, its ring's memory given "
                     r"back, (\d+) patched places written back from their files")


def judge_killed(rdir, env):
    """gebpf and its worker SIGKILLed together while the patch trap traced
    kmalarm: kmalarm finishes by itself (the kernel marked the cache's
    liveness word), and the next trace writes the entries back and traces
    whole calls of work."""
    err = (read(os.path.join(rdir, "killed.err"), "") or "")
    if "entries patched" not in err:
        return ("fail", "killed: the patch trap was not set up before the kill: %s"
                % (err.strip().splitlines() or ["(nothing on stderr)"])[-1])
    if not (read(os.path.join(rdir, "killed.worker"), "") or "").strip():
        return ("fail", "killed: gebpf's worker was not found to be killed")
    bad = target_said(rdir, "killed", "kmalarm (gebpf and its worker SIGKILLed)", "kmalarm ok")
    if bad:
        return bad
    c = Check(rdir, "killed_retrace")
    bad = c.failed_run()
    if bad:
        return bad
    m = next((LEFT_RE.search(l) for l in c.err if LEFT_RE.search(l)), None)
    # (the two kills are two signals: where gebpf saw its worker die before
    # its own SIGKILL landed, as on a loaded host, it wrote the entries back
    # itself, and the takeover has none left to write)
    wrote = any(WROTE_BACK_RE.search(l)
                for l in (read(os.path.join(rdir, "killed.err"), "") or "").splitlines())
    if not m or (int(m.group(1)) < 1 and not wrote):
        return ("fail", "killed_retrace: the cache left by the killed gebpf was not taken over: %s"
                % c.gebpf_line())
    try:
        objs, _ = jsonl(os.path.join(rdir, "killed_retrace.jsonl"))
    except ValueError as e:
        return ("fail", str(e))
    pcs = [int(o["pc"], 16) for o in objs[:-1] if o.get("t") == "exec"]
    if not objs or objs[-1].get("t") != "summary" or pcs.count(env["ALARM_START"]) < 1:
        return ("fail", "killed_retrace: no whole call of work traced after the takeover")
    return None


def judge_direct(rdir):
    """The trace written with O_DIRECT (where the guest's tmpfs takes it)
    equals the same trace written buffered through -o /dev/stdout.  Its
    launch removed the uprobe that mapped the kernel's uprobe page once the
    program ran past it (kmbusy's range is far from its entry point:
    trace/xol.h), the program unharmed (it exited 0)."""
    for name in ("trace_direct", "trace_buffered"):
        bad = Check(rdir, name).failed_run()
        if bad:
            return bad
    if not any(XOL_LATER in l for l in Check(rdir, "trace_direct").err):
        return ("fail", "trace_direct: the uprobe page's uprobe was not removed after the "
                "program ran past it: %s" % next((l.strip() for l in Check(rdir, "trace_direct").err
                                                  if "mapped first" in l), "no -v line"))
    got = (read(os.path.join(rdir, "trace_direct.jsonl")) or "").splitlines()
    want = (read(os.path.join(rdir, "trace_buffered.out")) or "").splitlines()
    if len(want) < 60000:
        return ("fail", "trace_buffered: %d lines, expected 60000 and more" % len(want))
    diff = first_diff(got, want)
    if diff:
        return ("fail", "the trace written with O_DIRECT differs from the buffered one: %s" % diff)
    return None


XOL_LATER = "its uprobe removed once the program ran past it"


def direct_way(rdir):
    """How trace_direct's file was written: its -v `output:` line (only where
    the file system took O_DIRECT)."""
    m = next((DIRECT_RE.search(l) for l in Check(rdir, "trace_direct").err if DIRECT_RE.search(l)),
             None)
    return "%s%% direct" % m.group(1) if m else "buffered: no O_DIRECT on the guest's tmpfs"


def judge_exec_thread(rdir, exp):
    """kmexecthr's second thread execs kmtrace: the probe trap attaches its
    probes again (-v says so) and traces the new image exactly, on the
    exec'ing thread's vcpu 1."""
    c = Check(rdir, "trace_exec_thread")
    bad = c.failed_run()
    if bad:
        return bad
    got = [l.replace('"vcpu":1,', '"vcpu":0,') for l in
           (read(os.path.join(rdir, "trace_exec_thread.jsonl")) or "").splitlines()]
    diff = first_diff(got, exp)
    if diff:
        return ("fail", "probe trap after an exec from a second thread: trace differs from "
                "expect/kmtrace.jsonl (vcpu 1 read as 0): %s" % diff)
    if not any("probes attached again" in l for l in c.err):
        return ("fail", "the probe trap did not attach its probes again at the exec: %s" %
                c.gebpf_line())
    return None


def judge_sighere(rdir):
    """kmsighere: a SIGILL handler in the range steps over a ud2 and returns
    through its restorer, off the range, into the range's middle: the probe
    trap follows it to the frame's rt_sigreturn (-v says so) and its trace
    is --trap none's, the program's result right."""
    for name in ("trace_sighere", "trace_sighere_ref"):
        bad = Check(rdir, name).failed_run()
        if bad:
            return bad
        if "kmsighere ok" not in (read(os.path.join(rdir, name + ".out"), "") or ""):
            return ("fail", "%s: kmsighere did not say it was ok (its handler ran %s)" % (
                name, "under the probe trap" if name == "trace_sighere" else "under --trap none"))
    got = (read(os.path.join(rdir, "trace_sighere.jsonl")) or "").splitlines()
    ref = (read(os.path.join(rdir, "trace_sighere_ref.jsonl")) or "").splitlines()
    if not ref or not got:
        return ("fail", "trace_sighere: empty output")
    diff = first_diff(got, ref)
    if diff:
        return ("fail", "probe trap, a handler in the range returning into its middle: the trace "
                "differs from --trap none's: %s" % diff)
    if not any("followed to its rt_sigreturn" in l for l in Check(rdir, "trace_sighere").err):
        return ("fail", "the handler's return was not followed to its rt_sigreturn: %s" %
                Check(rdir, "trace_sighere").gebpf_line())
    return None


PROBED_RE = re.compile(r"patch trap: (\d+) entries patched, (\d+) probed")
THROUGH_RE = re.compile(r"the patch trap: (\d+) entries through its (\d+) uprobes"
                        r"(?: \(\d+ waited for the cache's lock\), (\d+) sent straight)?")
REDIRECT_RE = re.compile(r"patch trap: \d+ of its \d+ uprobes send the thread straight into")
STOPS_RE = re.compile(r"patch trap: its uprobes stop the thread")


def judge_patch_probe(rdir):
    """The range ending at kmtrace's return site (inside its 5 bytes): the
    patch trap patches the start, keeps that entry on a uprobe, which the
    return enters, and its trace is the probe trap's on the same range."""
    outs = {}
    for name in ("trace_patch_probe", "trace_short"):
        c = Check(rdir, name)
        bad = c.failed_run()
        if bad:
            return bad
        outs[name] = (read(os.path.join(rdir, name + ".jsonl")) or "").splitlines()
        if not outs[name]:
            return ("fail", "%s: empty output" % name)
    diff = first_diff(outs["trace_patch_probe"], outs["trace_short"])
    if diff:
        return ("fail", "patch trap with a probed entry: trace differs from the probe trap's: %s"
                % diff)
    err = Check(rdir, "trace_patch_probe").err
    m = next((PROBED_RE.search(l) for l in err if PROBED_RE.search(l)), None)
    t = next((THROUGH_RE.search(l) for l in err if THROUGH_RE.search(l)), None)
    sent = next((REDIRECT_RE.search(l) for l in err if REDIRECT_RE.search(l)), None)
    stops = next((STOPS_RE.search(l) for l in err if STOPS_RE.search(l)), None)
    if not m or m.group(1) == "0" or m.group(2) != "1" or not t or not (sent or stops):
        return ("fail", "the patch trap did not keep the return site on an entered uprobe: %s"
                % Check(rdir, "trace_patch_probe").gebpf_line())
    # Where the kernel lets the uprobe program write ip (Linux 6.18), the
    # hit goes straight into the cache: no stop; elsewhere a stop each.
    redirected = int(t.group(3) or 0)
    if sent and (redirected == 0 or t.group(1) != "0"):
        return ("fail", "the probed entry was not sent straight into the cache (%s stops, %d "
                "redirected)" % (t.group(1), redirected))
    if stops and (t.group(1) == "0" or redirected):
        return ("fail", "the patch trap did not keep the return site on an entered uprobe: %s"
                % Check(rdir, "trace_patch_probe").gebpf_line())
    return None


def patch_probe_way(rdir):
    """How the probed entry was entered: the BPF program's redirect (no
    stop) or the kernel's out-of-line run and a stop (the fallback)."""
    err = Check(rdir, "trace_patch_probe").err
    if any(REDIRECT_RE.search(l) for l in err):
        return "redirected, no stop"
    return "a stop: no ip writes"


def ran_jsonl(rdir, name):
    """(check, verdict, None) when check NAME did not exit 0 or NAME.jsonl
    is not JSON lines, else (check, None, (objs, lines))."""
    c = Check(rdir, name)
    bad = c.failed_run()
    if bad:
        return c, bad, None
    try:
        return c, None, jsonl(os.path.join(rdir, name + ".jsonl"))
    except ValueError as e:
        return c, ("fail", str(e)), None


def judge_faults(rdir, exp, env):
    c, bad, out = ran_jsonl(rdir, "faults")
    if bad:
        return bad
    objs, lines = out
    faults = [o for o in objs if o.get("t") == "fault"]
    rest = [l for o, l in zip(objs, lines) if o.get("t") != "fault"]
    summ = objs[-1] if objs else {}
    if not faults:
        feat = c.feature_line()
        if feat:
            return ("skip", feat)
        return ("fail", "no fault lines (expected writes to 0x%x, 0x%x, 0x%x); summary %s; stderr: %s"
                % (env["PAGE1"], env["COUNTER"], env["PAGE2"],
                   lines[-1] if lines else "missing", c.gebpf_line()))
    if summ.get("t") != "summary" or summ.get("faults") != len(faults):
        return ("fail", "summary faults=%s but %d fault lines" % (summ.get("faults"), len(faults)))
    # Apart from the fault lines and the summary's trailing ,"faults":N the
    # output is the plain trace (docs/trace-format.md); fault lines are lines, so the
    # summary's "events" counts them too.
    if rest:
        rest[-1] = re.sub(r',"faults":\d+}$', "}", rest[-1])
        rest[-1] = re.sub(r'"events":(\d+)', lambda m: '"events":%d' % (int(m.group(1)) - len(faults)),
                          rest[-1])
    diff = first_diff(rest, exp)
    if diff:
        return ("fail", "non-fault lines differ from expect/kmtrace.jsonl: " + diff)
    # Each first write to a page inside the range faults: page1 (vt1) and
    # page2 (vt18) are fresh .bss pages, counter (vt14) a private file page
    # (copy-on-write).  The read of pattern (vt0) faults unless the page was
    # already mapped.  Nothing else in the range may fault.
    want = {1: env["PAGE1"], 14: env["COUNTER"], 18: env["PAGE2"]}
    optional = {0: env["PATTERN"]}
    seen = set()
    for f in faults:
        try:
            vt, addr, err = f["vt"], int(f["addr"], 16), int(f["err"], 16)
        except (KeyError, ValueError, TypeError):
            return ("fail", "bad fault line: %s" % json.dumps(f, separators=(",", ":")))
        exp_addr = want.get(vt, optional.get(vt))
        if exp_addr is None or addr not in (exp_addr, exp_addr & ~0xfff) or not err & 4 \
                or (vt in want and not err & 2) or f.get("vcpu") != 0:
            return ("fail", "unexpected fault line: %s" % json.dumps(f, separators=(",", ":")))
        seen.add(vt)
    missing = sorted(set(want) - seen)
    if missing:
        return ("fail", "no fault line for the write at vt %s" % ", ".join(map(str, missing)))
    return ("pass", "%d faults, trace exact" % len(faults))


def judge_snap(rdir, exp, env):
    c = Check(rdir, "snap")
    bad = c.failed_run()
    if bad:
        return bad
    head = bytes.fromhex((read(os.path.join(rdir, "snap.head")) or "").replace(" ", "").replace("\n", ""))
    if len(head) < 18:
        return ("fail", "snap: exit 0 but no snapshot file")
    if head[:4] != b"\x7fELF" or head[4] != 2 or int.from_bytes(head[16:18], "little") != 4:
        return ("fail", "snap: not an ELF64 core file (header %s)" % head[:18].hex())
    # The memory must have come from the injected copy-on-write clone.
    if not any("copy-on-write copy pid" in l for l in c.err):
        return ("fail", "snap: no copy-on-write copy: %s" % c.gebpf_line())
    # The copy made from a running process's thread blocked in nanosleep
    # (smoke.sh 2c), which then runs to its end.
    a = Check(rdir, "snap_attach")
    bad = a.failed_run()
    if bad:
        return bad
    if not any("copy-on-write copy pid" in l for l in a.err):
        return ("fail", "snap -p: no copy-on-write copy: %s" % a.gebpf_line())
    st = (read(os.path.join(rdir, "snap_attach.target"), "") or "").strip()
    if st != "0":
        return ("fail", "kmsleep, snapshotted while blocked in nanosleep, then exited %s" % (st or "?"))
    r = Check(rdir, "read")
    bad = r.failed_run()
    if bad:
        return bad
    out = read(os.path.join(rdir, "read.out"), b"", "rb")
    want = b"gebpf-kmatrix-ok"
    flat = re.sub(rb"\s", b"", out).lower()
    if out.rstrip(b"\n") == want or want.hex().encode() in flat or want in out:
        return ("pass", "read 0x%x: %s (copy-on-write)" % (env["PAGE2"], want.decode()))
    return ("fail", "read 0x%x 16 printed %.60r, expected the bytes of %r"
            % (env["PAGE2"], out, want.decode()))


def judge_resume(rdir, exp, env):
    _c, bad, out = ran_jsonl(rdir, "resume")
    if bad:
        return bad
    objs = out[0]
    # after_work: nop (1 byte); mov $60,%eax (5); xor %edi,%edi (2); syscall.
    a = env["AFTER_WORK"]
    want = [a, a + 1, a + 6, a + 8]
    got = [int(o["pc"], 16) for o in objs if o.get("t") == "exec"]
    if got != want or [o.get("vt") for o in objs if o.get("t") == "exec"] != [0, 1, 2, 3]:
        return ("fail", "resumed trace ran %s, expected %s (vt 0-3)"
                % (" ".join("0x%x" % p for p in got[:6]), " ".join("0x%x" % p for p in want)))
    if not objs or objs[-1].get("t") != "summary":
        return ("fail", "resume: no summary line at the end")
    # kmthreads: two threads snapshotted with -p, resumed with gebpf resume.
    for name in ("snap_mt", "resume_mt"):
        bad = Check(rdir, name).failed_run()
        if bad:
            return bad
    out = read(os.path.join(rdir, "resume_mt.out"), "") or ""
    if out.strip() != "kmthreads ok":
        return ("fail", "resumed two-thread kmthreads printed %.60r, expected 'kmthreads ok'" % out)
    # ... again with --new-pidns (a guest of an older harness has no such run)
    ns = ""
    if os.path.exists(os.path.join(rdir, "resume_mt_ns.rc")):
        bad = Check(rdir, "resume_mt_ns").failed_run()
        if bad:
            return bad
        out = read(os.path.join(rdir, "resume_mt_ns.out"), "") or ""
        if out.strip() != "kmthreads ok":
            return ("fail", "kmthreads resumed with --new-pidns printed %.60r, expected "
                    "'kmthreads ok'" % out)
        ns = " (also in a new pid namespace)"
    # resume_fds (where the host built it): its fds that are kernel objects
    # made again, its lines those of its uninterrupted run, nothing said
    fds = ""
    if os.path.exists(os.path.join(rdir, "resume_fds_native.rc")):
        for name in ("resume_fds_native", "snap_fds", "resume_fds"):
            bad = Check(rdir, name).failed_run()
            if bad:
                return bad
        want = read(os.path.join(rdir, "resume_fds_native.out"), "") or ""
        got = read(os.path.join(rdir, "resume_fds.out"), "") or ""
        if not want.startswith("epoll 2 ready 0x22221111") or got != want:
            return ("fail", "resumed resume_fds printed %.80r, its own run %.80r" % (got, want))
        # (an fd the harness left open in the program, above its own 3-10, is
        # named and replaced: not the program's)
        own = [ln for ln in (read(os.path.join(rdir, "resume_fds.err"), "") or "").splitlines()
               if "warning" in ln and not re.search(r"resume: fd (1[1-9]|[2-9]\d|\d{3,}) ", ln)]
        if own:
            return ("fail", "resume_fds: resume said: %s" % own[0])
        fds = "; epoll, eventfd, timerfd, signalfd and a pipe made again"
    return ("pass", "4 instructions from after_work to exit; 2 threads resumed" + ns + fds)


def judge_sample(rdir, exp, env):
    c = Check(rdir, "sample")
    bad = c.failed_run()
    if bad:
        return bad
    try:
        objs, lines = jsonl(os.path.join(rdir, "sample.jsonl"))
    except ValueError as e:
        return ("fail", str(e))
    lo, hi = env["SPIN_START"], env["SPIN_LAST"]
    samples = [o for o in objs if "pc" in o and o.get("t") not in ("summary", "fault")]
    outside = [o for o in samples if not lo <= int(o["pc"], 16) <= hi]
    if outside:
        return ("fail", "sample outside the range 0x%x-0x%x: %s"
                % (lo, hi, json.dumps(outside[0], separators=(",", ":"))))
    if not samples:
        feat = c.feature_line()
        if feat:
            return ("skip", feat)
        return ("fail", "no samples in 0x%x-0x%x (the program spins there ~1.5 s); stderr: %s"
                % (lo, hi, c.gebpf_line()))
    if not objs or objs[-1].get("t") != "summary":
        return ("fail", "sample: no summary line at the end")
    kept = objs[-1].get("kept")
    if kept is not None and kept != len(samples):
        return ("fail", "summary kept=%s but %d sample lines" % (kept, len(samples)))
    # kmbusy spins >= 1.5 s of its CPU time in the range: ~1500 samples at
    # 997 Hz in an idle guest, far fewer in a starved one (MIN_SAMPLES).
    if len(samples) < MIN_SAMPLES:
        return ("fail", "only %d samples in 1.5 s at 997 Hz (want >= %d): %s"
                % (len(samples), MIN_SAMPLES, lines[-1]))
    return ("pass", "%d samples in range" % len(samples))


def judge_probe(rdir, exp, env):
    """probecheck (scripts/kmatrix.d/probecheck.c): its own verdict lines."""
    c = Check(rdir, "probe")
    out = (read(os.path.join(rdir, "probe.out"), "") or "").splitlines()
    fails = [l for l in out if l.startswith("probecheck: FAIL")]
    if fails and not c.timeout:
        return ("fail", fails[0][len("probecheck: "):])
    bad = c.failed_run()
    if bad:
        return bad
    ok = [l for l in out if l.startswith("probecheck: ok")]
    if not ok:
        return ("fail", "probecheck exited 0 without its ok line")
    vex = judge_vex(rdir)
    if vex and vex[0] == "fail":
        return vex
    return ("pass", ok[-1][len("probecheck: "):] + (vex[1] if vex else ""))


def judge_vex(rdir):
    """The probe trap over uprobe_vex's traced_vex (a VEX-encoded store at
    the entry): the program's native output, the entry left to the page
    trap.  None where the guest had no uprobe_vex; ('pass', note) or
    ('fail', why)."""
    rc = read(os.path.join(rdir, "vex_native.rc"), None)
    if rc is None:
        return None
    if rc.strip() == "2":
        return ("pass", "; no AVX2 in this guest: the VEX entry not tried")
    want = read(os.path.join(rdir, "vex_native.out"), "")
    got = read(os.path.join(rdir, "vex.out"), "")
    err = read(os.path.join(rdir, "vex.err"), "") or ""
    if (read(os.path.join(rdir, "vex.rc"), "") or "").strip() != "0":
        return ("fail", "trace --trap probes of uprobe_vex failed: %s" % err.strip()[-200:])
    if got != want:
        return ("fail", "uprobe_vex printed %r under the probe trap, natively %r (a uprobe on its "
                        "VEX entry?)" % (got.strip(), (want or "").strip()))
    if "VEX/EVEX-encoded" not in err:
        return ("fail", "the probe trap did not refuse uprobe_vex's VEX entry")
    return ("pass", "; VEX entry left to the page trap")


COUNTS_RE = re.compile(r"sample: (\d+) kept, \d+ seen, \d+ filtered in the kernel, (\d+) lost; "
                       r"(\d+) unwound, (\d+) truncated")


CHAIN = ["main", "chain1", "chain2", "chain3", "chain4", "chain5", "leaf_hot"]


def judge_stacks(rdir, exp, env):
    """sample --folded --kernel (DWARF mode) of unwind_chain: the programs
    load and run (register and stack copy, kernel stacks, fork following),
    every sample is counted, and the samples in the hot leaf unwind through
    the whole chain (built without frame pointers) to _start.  (Start-up
    in ld.so, slow under TCG, is not judged.)"""
    c = Check(rdir, "stacks")
    bad = c.failed_run()
    if bad:
        return bad
    m = None
    for line in c.err:
        m = COUNTS_RE.search(line) or m
    if not m:
        return ("fail", "no counts line on stderr: %s" % c.gebpf_line())
    kept, lost, unwound, truncated = (int(x) for x in m.groups())
    if unwound + truncated != kept:
        return ("fail", "unwound %d + truncated %d != kept %d" % (unwound, truncated, kept))
    rows = []
    for line in (read(os.path.join(rdir, "stacks.folded"), "") or "").splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            return ("fail", "stacks.folded: not a folded line: %.60r" % line)
        rows.append((stack.split(";"), int(n)))
    total = sum(n for _, n in rows)
    if total != kept:
        return ("fail", "stacks.folded holds %d samples, counts say %d kept" % (total, kept))
    leaf = sum(n for s, n in rows if s[-1] == CHAIN[-1])
    whole = sum(n for s, n in rows if s[0] == "_start" and s[-len(CHAIN):] == CHAIN)
    if leaf < STACK_MIN_SAMPLES or whole < 0.9 * leaf:
        return ("fail", "%d samples in %s, %d of them through _start;...;%s"
                % (leaf, CHAIN[-1], whole, ";".join(CHAIN)))
    return ("pass", "%d of %d in %s unwound to _start, %d lost%s" % (
        whole, leaf, CHAIN[-1], lost, " (few samples: a starved guest)" if leaf < MIN_SAMPLES else ""))


def judge_detach(rdir, exp, env):
    c = Check(rdir, "detach")
    bad = c.failed_run()
    if bad:
        return bad
    st = (read(os.path.join(rdir, "detach.target"), "") or "").strip()
    if st != "0":
        sig = int(st) - 128 if st.isdigit() and int(st) > 128 else None
        return ("fail", "kmsleep, detached while blocked in a stepped nanosleep, then exited %s%s"
                % (st or "?", " (signal %d)" % sig if sig else ""))
    return ("pass", "target ran on after detach")


# kmsleep.S: its sleeps (rbx at the start), the most a snapshot can count
KMSLEEP_ROUNDS = 12

# kmsleep's loop, from `loop` (smoke.sh "stopped"): mov, lea, xor, syscall,
# dec, jnz; the syscall, the dec and the jnz are at these offsets.
LOOP_INSNS = (0x0, 0x5, 0xc, 0xe, 0x10, 0x12)
STOPPED_SAID = "is stopped (SIGSTOP, job control)"


def judge_stopped(rdir, exp, env):
    """kmsleep stopped by SIGSTOP in a sleep: snapped and traced for 0.5 s,
    each leaving it stopped (T); then traced from its SIGCONT on, with gebpf
    attached while it was stopped (it did not run: state t, a ptrace stop),
    to its exit: its restarted sleep's syscall and the rounds of its loop
    left, nothing before, none missed; kmsleep exits 0."""
    for name in ("stopped_snap", "stopped_wait"):
        c = Check(rdir, name)
        bad = c.failed_run()
        if bad:
            return bad
        st = (read(os.path.join(rdir, name + ".state"), "") or "").strip()
        if st != "T":
            return ("fail", "%s left kmsleep %s, not stopped (T)" % (name, "in state " + st if st
                                                                     else "gone"))
    if not any("stopped as it was found" in l for l in Check(rdir, "stopped_snap").err):
        return ("fail", "stopped_snap: -v does not say it let the process go stopped: %s"
                % Check(rdir, "stopped_snap").gebpf_line())
    wait = Check(rdir, "stopped_wait")
    if not any(STOPPED_SAID in l for l in wait.err):
        return ("fail", "stopped_wait: no line saying the target is stopped: %s" % wait.gebpf_line())
    try:
        objs, _ = jsonl(os.path.join(rdir, "stopped_wait.jsonl"))
    except ValueError as e:
        return ("fail", str(e))
    if not objs or objs[-1].get("t") != "summary" or len(objs) != 1:
        return ("fail", "stopped_wait.jsonl: %d lines, expected the summary alone (nothing ran)"
                % len(objs))
    c = Check(rdir, "stopped")
    if not c.ran or c.timeout or c.rc in TIMEOUT_RCS:
        return c.failed_run()
    # The target exits during the trace: exit 1, saying so.
    if c.rc != 1 or not c.gebpf_line().endswith("exited with status 0 during the trace"):
        return ("fail", "%s (exit %s)" % (c.gebpf_line(), c.rc))
    st = (read(os.path.join(rdir, "stopped.state"), "") or "").strip()
    if st not in ("t", "T"):
        return ("fail", "kmsleep ran while stopped, attached (state %s before the SIGCONT)" % st)
    st = (read(os.path.join(rdir, "stopped.target"), "") or "").strip()
    if st != "0":
        return ("fail", "kmsleep exited %s after the SIGCONT" % (st or "?"))
    try:
        objs, _ = jsonl(os.path.join(rdir, "stopped.jsonl"))
    except ValueError as e:
        return ("fail", str(e))
    # The sleep it was stopped in restarted (its syscall instruction, where
    # the kernel rewinds it: nothing ran before the SIGCONT), then the rounds
    # left, to its exit: one fewer than the sleeps its rbx counted in the
    # snapshot (eleven after its first sleep, fewer in a guest slow enough to
    # have finished that one before the SIGSTOP), none missed.
    m = re.search(r'"rbx":\s*"0x([0-9a-f]+)"', read(os.path.join(rdir, "stopped_snap.rbx"), "") or "")
    if not m or not 1 <= int(m.group(1), 16) <= KMSLEEP_ROUNDS:
        return ("fail", "stopped_snap: no rbx of kmsleep in its sleep (1 to %d) in the snapshot: %s"
                % (KMSLEEP_ROUNDS, m.group(0) if m else "none"))
    rounds = int(m.group(1), 16) - 1
    # A SIGSTOP that came as the sleep's timer fired stops it on the way out
    # of a nanosleep that returned 0 (its rax): nothing restarts, the trace
    # begins at the dec after the syscall.
    ax = re.search(r'"rax":\s*"0x([0-9a-f]+)"', read(os.path.join(rdir, "stopped_snap.rbx"), "") or "")
    done = ax is not None and int(ax.group(1), 16) == 0
    lo = env["LOOP_START"]
    got = [int(o["pc"], 16) for o in objs if o.get("t") == "exec"]
    want = ([] if done else [lo + 0xe]) + [lo + 0x10, lo + 0x12] + [lo + d for d in LOOP_INSNS] * rounds
    if got != want:
        i = next((k for k, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))
        return ("fail", "stopped.jsonl: %d instructions, expected %d (%s, "
                "then %d rounds of the loop): they differ from vt %d"
                % (len(got), len(want), "the end of the sleep it was stopped leaving (rax 0)" if done
                   else "the restarted sleep's syscall", rounds, i))
    return ("pass", "left stopped twice; %d instructions after SIGCONT (%d rounds)"
            % (len(got), rounds))


def target_said(rdir, check, who, want):
    """The check's target (CHECK.target: its exit status, CHECK.target.out:
    what it printed) exited 0 saying WANT: None, else the failure."""
    st = (read(os.path.join(rdir, check + ".target"), "") or "").strip()
    said = (read(os.path.join(rdir, check + ".target.out"), "") or "").strip()
    if st == "0" and said == want:
        return None
    sig = int(st) - 128 if st.isdigit() and int(st) > 128 else None
    return ("fail", "%s exited %s%s, printed %.40r"
            % (who, st or "?", " (signal %d)" % sig if sig else "", said))


def judge_strict(rdir, exp, env):
    """kmstrict in strict seccomp mode, attached: gebpf must say so and
    inject nothing; the program finishes; the trace holds whole `tick`s."""
    c = Check(rdir, "strict")
    bad = c.failed_run()
    if bad:
        return bad
    bad = target_said(rdir, "strict", "kmstrict (strict seccomp)", "kmstrict ok")
    if bad:
        return bad
    if not any("warning:" in l and "strict seccomp mode" in l for l in c.err):
        return ("fail", "no warning that the target is in strict seccomp mode: %s" % c.gebpf_line())
    try:
        objs, _ = jsonl(os.path.join(rdir, "strict.jsonl"))
    except ValueError as e:
        return ("fail", str(e))
    if not objs or objs[-1].get("t") != "summary":
        return ("fail", "strict.jsonl: no summary line")
    # tick is `addq $1, counter(%rip)` (8 bytes) and `ret`
    lo, hi = env["TICK_START"], env["TICK_LAST"]
    pcs = {int(o["pc"], 16) for o in objs[:-1] if o.get("t") == "exec"}
    if not pcs <= {lo, hi}:
        return ("fail", "strict.jsonl: exec lines outside tick 0x%x-0x%x: %s"
                % (lo, hi, ", ".join("0x%x" % p for p in sorted(pcs - {lo, hi})[:3])))
    return ("pass", "%d instructions traced, nothing injected" % objs[-1].get("insns", 0))


def judge_alarm(rdir, exp, env):
    """kmalarm (1 ms SIGALRM, handler outside the range), attached: the
    program finishes and the trace keeps growing (whole calls of `work`
    while the timer runs; before the handler ran natively: 1 instruction in
    2 s); every exec line is in `work`."""
    c = Check(rdir, "alarm")
    bad = c.failed_run()
    if bad:
        return bad
    bad = target_said(rdir, "alarm", "kmalarm", "kmalarm ok")
    if bad:
        return bad
    try:
        objs, _ = jsonl(os.path.join(rdir, "alarm.jsonl"))
    except ValueError as e:
        return ("fail", str(e))
    if not objs or objs[-1].get("t") != "summary":
        return ("fail", "alarm.jsonl: no summary line")
    lo, hi = env["ALARM_START"], env["ALARM_LAST"]
    pcs = [int(o["pc"], 16) for o in objs[:-1] if o.get("t") == "exec"]
    out = [p for p in pcs if not lo <= p <= hi]
    if out:
        return ("fail", "alarm.jsonl: exec lines outside work: 0x%x" % out[0])
    calls = pcs.count(lo)
    if calls < 3:
        return ("fail", "the trace stopped growing: %d calls of work (%d instructions) in 2 s"
                % (calls, objs[-1].get("insns", 0)))
    return ("pass", "%d calls of work traced under a 1 ms timer" % calls)


def judge_python_frames(rdir, exp, env):
    """Debian 12's python3.11 running progs/kmpy.py under sample --folded
    --pprof: Python frames among the native ones (judge_python.py)."""
    c = Check(rdir, "python")
    bad = c.failed_run()
    if bad:
        return bad
    return judge_python.judge(rdir, c.err, read(os.path.join(HERE, "progs", "kmpy.py"), ""))


JUDGES = {"trace": judge_trace, "snap": judge_snap, "resume": judge_resume, "faults": judge_faults,
          "sample": judge_sample, "probe": judge_probe, "stacks": judge_stacks, "detach": judge_detach,
          "stopped": judge_stopped,
          "strict": judge_strict, "alarm": judge_alarm, "python": judge_python_frames}


def judge_row(rdir, exp, env):
    row = load_env(os.path.join(rdir, "row.env"))
    name = row.get("NAME", os.path.basename(rdir))
    kernel = (read(os.path.join(rdir, "kernel"), "") or "").strip()
    res = {}
    Check.missing = None
    if row.get("MODE") == "vm":
        problem = decode_serial(rdir)
        kernel = (read(os.path.join(rdir, "kernel"), "") or "").strip() or row.get("RELEASE", "?")
        if problem:
            rc = row.get("VM_RC", "?")
            Check.missing = "%s (qemu exit %s%s); console: %s" % (
                problem, rc, ", killed after the guest timeout" if rc in ("124", "137") else "",
                console_hint(rdir))
    elif row.get("MODE") == "skip":
        res = {ck: ("skip", row.get("WHY", "not run")) for ck in CHECKS}
    elif row.get("MODE") != "host":
        res = {ck: ("fail", row.get("WHY", "not run")) for ck in CHECKS}
    if not res:
        for ck in CHECKS:
            try:
                res[ck] = JUDGES[ck](rdir, exp, env)
            except Exception as e:  # a judge bug must show, not pass
                res[ck] = ("fail", "judge error: %r" % e)
    if Check.missing and Check.missing.startswith("corrupt"):
        res = {ck: v if v[0] == "pass" else ("fail", "%s [%s]" % (v[1], Check.missing))
               for ck, v in res.items()}
    label = name if name == "host" else "%s (%s)" % (name, row.get("SUITE", "?"))
    return label, kernel, row, res


def main(argv):
    if len(argv) < 5:
        sys.stderr.write(__doc__)
        return 2
    expect_dir, env_path, table_out = argv[1:4]
    exp = (read(os.path.join(expect_dir, "kmtrace.jsonl")) or "").splitlines()
    raw = load_env(env_path)
    env = {k: int(v, 16) for k, v in raw.items() if v.startswith("0x")}
    summ = json.loads(exp[-1]) if exp else {}
    if summ.get("start") != hex(env.get("WORK_START", -1)) or summ.get("end") != hex(env.get("WORK_LAST", -1)):
        sys.stderr.write("gebpf: kmatrix: %s: made for range %s-%s but kmtrace has work at %s-%s; "
                         "the toolchain laid it out differently (docs/kmatrix.md)\n"
                         % (os.path.join(expect_dir, "kmtrace.jsonl"), summ.get("start"), summ.get("end"),
                            raw.get("WORK_START"), raw.get("WORK_LAST")))
        return 1
    rows = [judge_row(d, exp, env) for d in argv[4:]]

    def cell(v):
        return v[0] if v[0] == "pass" else "%s: %s" % (v[0], v[1])

    head = ["kernel", "release"] + list(CHECKS)
    table = [head] + [[label, kernel] + [cell(res[ck]) for ck in CHECKS] for label, kernel, _, res in rows]
    width = [min(CELL, max(len(r[i]) for r in table)) for i in range(len(head))]

    def fmt(r):
        return "| " + " | ".join((c if len(c) <= CELL else c[:CELL - 3] + "...").ljust(w)
                                 for c, w in zip(r, width)) + " |"

    out = [fmt(table[0]), "|" + "|".join("-" * (w + 2) for w in width) + "|"]
    out += [fmt(r) for r in table[1:]]
    details = []
    for label, kernel, row, res in rows:
        if len(set(res.values())) == 1 and len(cell(res[CHECKS[0]])) > CELL:
            details.append("  %s, every check: %s: %s" % ((label,) + res[CHECKS[0]]))
            continue
        for ck in CHECKS:
            v, why = res[ck]
            if len(cell(res[ck])) > CELL:
                details.append("  %s %s: %s: %s" % (label, ck, v, why))
    # Checks named in KMATRIX_OPTIONAL still show their failures, but do not
    # fail the matrix.
    optional = {c for c in os.environ.get("KMATRIX_OPTIONAL", "").replace(",", " ").split() if c}
    failed = any(v == "fail" for _, _, _, res in rows for ck, (v, _) in res.items() if ck not in optional)
    opt_failed = sorted({ck for _, _, _, res in rows for ck, (v, _) in res.items()
                         if v == "fail" and ck in optional})
    text = "\n".join(out) + "\n"
    if details:
        text += "\nfull reasons of the shortened cells:\n" + "\n".join(details) + "\n"
    retries = ["  %s: %s; booted again" % (label, row["RETRY"])
               for label, _, row, _ in rows if row.get("RETRY")]
    if retries:
        text += "\nguests booted twice:\n" + "\n".join(retries) + "\n"
    text += "\nkmatrix: %s\n" % ("FAIL (a required check failed)" if failed else
                                  "ok (failed, but optional: %s)" % ", ".join(opt_failed) if opt_failed else "ok")
    sys.stdout.write(text)
    with open(table_out, "w") as f:
        f.write(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

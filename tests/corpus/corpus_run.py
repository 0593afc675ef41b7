#!/usr/bin/env python3
"""Run the random-instruction corpus (gen.py) under two engines and compare.

    GEBPF_OUTPUT=$PWD/.output /usr/bin/python3 tests/corpus/corpus_run.py \\
        [--engines step,jit] [--seed 13] [--count 10000] [--lackey] [--trap T[,T]]

An engine is a `gebpf trace --engine NAME` value (`step` is passed as no
option at all while gebpf has no --engine), or `lackey`: valgrind's lackey
through the oracle of tests/e2e/lackey.py (its normalisations; generate with
--lackey so the corpus holds only what valgrind runs).  Two gebpf engines
must give byte-identical JSONL; against lackey the normalised lines must be
equal.

--trap names the trap of both engines, or of each (pages,patch).  A run under
the patch trap must be the patch trap's: its -v line "entries patched" and no
in-range miss, or the run is a harness error (a fallback to the probe trap
would compare nothing new).  Such a run generates the corpus without what the
stop-free mode still refuses (gen.py --nostop, gen.NOSTOP) and traces it in
programs of PATCH_CHUNK sequences each (see there).

A target killed under one engine (gebpf exits non-zero after writing the
summary) is a difference like any other.  On a difference: the sequence
holding the first differing line is found, a program with that sequence
alone is built (or, if that alone does not differ, after the fewest earlier
sequences it needs, found by delta debugging over them), and its items are
removed by delta debugging while the two engines still differ and the
program still exits 0 natively.  The shortest reproducer is printed as
assembly and written to WORKDIR/repro.S.  Exit status: 0 identical, 1
different, 2 harness error.
"""
import argparse
import bisect
import concurrent.futures
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))

import gen  # noqa: E402
import lackey  # noqa: E402

OUTPUT = os.path.abspath(os.environ.get("GEBPF_OUTPUT", os.path.join(REPO, ".output")))
GEBPF = os.path.join(OUTPUT, "gebpf")
RANGE = "corpus"
# The probe trap's set-up and tear-down cost ~55 ms per entry address on
# the development VM (a uprobe link each, released with an RCU grace
# period), and the corpus has one entry per call target: thousands (the jit
# engine over the probe trap took 3.5 min on 10,000 sequences, nearly all of
# it there).  The page trap enters once, and both engines run over it; the
# trace is the same whatever the trap (docs/trace-format.md).
# GEBPF_CORPUS_TRAP (or --trap) picks another.
DEFAULT_TRAP = os.environ.get("GEBPF_CORPUS_TRAP", "pages")
# The patch trap translates every instruction up front only for ranges of up
# to 8192 instructions (trap/patch/new.c); in a larger range the
# corpus's indirect calls (`lea f(%rip), %rax; call *%rax`) miss in the
# cache's lookup and their callees run natively, unrecorded (docs/trace.md,
# "In-range misses"), and 10,000 sequences fill its code cache.  Its lookup
# table is direct-mapped on 16 bits of the address, so a range past 64 KiB
# also evicts.  400 sequences are ~6,000 instructions in ~30 KiB: the corpus
# runs under it in programs of that many.
PATCH_CHUNK = 400
CC = os.environ.get("CC", "cc")

_HELP = []


class HarnessError(Exception):
    pass


def trace_help():
    if not _HELP:
        r = subprocess.run([GEBPF, "trace", "--help"], capture_output=True, text=True, timeout=30)
        _HELP.append(r.stdout + r.stderr)
    return _HELP[0]


def engine_listed(name):
    """Whether `gebpf trace --help` lists NAME as an --engine value."""
    return any(re.search(r"\b%s\b" % re.escape(name), ln)
               for ln in trace_help().splitlines() if "--engine" in ln)


def engine_args(name):
    if "--engine" not in trace_help():
        if name == "step":
            return []         # before --engine existed, step was the only engine
        raise HarnessError("gebpf trace has no --engine option (wanted --engine %s)" % name)
    return ["--engine", name]


def build(seqs, path, names=None):
    """Assemble seqs into the static program PATH (PATH.S beside it)."""
    src = path + ".S"
    with open(src, "w") as f:
        f.write(gen.program(seqs, names))
    r = subprocess.run([CC, "-static", "-no-pie", "-nostdlib", src, "-o", path],
                       capture_output=True, text=True)
    if r.returncode:
        raise HarnessError("assembling %s: %s" % (src, r.stderr.strip()[-2000:]))
    return path


def runs_natively(path):
    try:
        return subprocess.run([path], capture_output=True, timeout=20).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def trace(engine, binary, out, trap=DEFAULT_TRAP, timeout=900, values=False):
    """gebpf trace --engine ENGINE --range corpus ... -o OUT -- BINARY
    (values: with --values)."""
    cmd = [GEBPF, "trace"] + engine_args(engine) + (["--trap", trap] if trap else []) + (
        ["-v"] if trap == "patch" else []) + (["--values"] if values else []) + [
        "--range", RANGE, "--max-events", "0", "-o", out, "--", binary]
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if trap == "patch":
        patch_traced(" ".join(cmd), r.stderr)
    if r.returncode:
        # a target killed under one engine is a difference, not a harness
        # error, when the trace (with its summary) was written
        if not os.path.exists(out) or not _has_summary(out):
            raise HarnessError("%s: exit %d: %s" % (" ".join(cmd), r.returncode,
                                                   r.stderr.strip()[-800:]))
        NOTES[out] = "exit %d: %s" % (r.returncode, r.stderr.strip()[-300:])
    return out


NOTES = {}      # trace path -> how its gebpf ended, when not with exit 0


def patch_traced(cmd, stderr):
    """Raise unless -v's stderr says the patch trap traced it all: entries
    patched, no fallback, no in-range miss (a stretch run natively)."""
    warn = [ln for ln in stderr.splitlines() if "warning:" in ln]
    m = re.search(r"the patch trap: \d+ entries, (\d+) in-range misses", stderr)
    if "entries patched" not in stderr or warn or not m or m.group(1) != "0":
        raise HarnessError("%s: not traced by the patch trap alone: %s" % (
            cmd, "; ".join(warn) or "no \"entries patched\" or misses line in -v"))


def _has_summary(path):
    with open(path, "rb") as f:
        data = f.read()
    return data.endswith(b"\n") and data.rstrip(b"\n").rsplit(b"\n", 1)[-1].startswith(
        b'{"t":"summary"')


def seq_starts(binary):
    """Sorted [(address, sequence label)] of the cseq_N labels."""
    out = subprocess.run(["nm", binary], capture_output=True, text=True, check=True).stdout
    v = []
    for ln in out.splitlines():
        p = ln.split()
        if len(p) == 3 and p[2].startswith("cseq_"):
            v.append((int(p[0], 16), int(p[2][5:])))
    return sorted(v)


def seq_of(starts, pc):
    i = bisect.bisect_right([a for a, _ in starts], pc) - 1
    return starts[i][1] if i >= 0 else None


# ---------------------------------------------------------------- comparing

def _pc_of(raw):
    m = re.search(rb'"pc":"(0x[0-9a-f]+)"', raw)
    return int(m.group(1), 16) if m else None


def diff_files(a, b, name_a, name_b):
    """None if the files are byte-identical, else (pc or None, text)."""
    with open(a, "rb") as f:
        la = f.read().split(b"\n")
    with open(b, "rb") as f:
        lb = f.read().split(b"\n")
    if la == lb:
        return None
    n = next((i for i, (x, y) in enumerate(zip(la, lb)) if x != y), min(len(la), len(lb)))
    pc = None
    for k in range(min(n, len(la) - 1, len(lb) - 1), -1, -1):
        pc = _pc_of(la[k] if k < len(la) else b"") or _pc_of(lb[k] if k < len(lb) else b"")
        if pc is not None:
            break
    show = lambda ls: "\n".join("  %s%d: %s" % (">" if i == n else " ", i, ls[i].decode())
                                for i in range(max(0, n - 3), min(len(ls), n + 3)))
    ends = "".join("\n%s: gebpf %s" % (nm, NOTES[p]) for nm, p in ((name_a, a), (name_b, b))
                   if p in NOTES)
    return pc, "first difference at line %d\n%s:\n%s\n%s:\n%s%s" % (n, name_a, show(la), name_b,
                                                                  show(lb), ends)


def diff_lackey(trace_path, binary):
    """gebpf's trace against the lackey oracle (tests/e2e/lackey.py):
    None, or (pc or None, text)."""
    res = lackey.oracle(binary, (), RANGE)
    if res["returncode"] != 0:
        raise HarnessError("%s exits %d under valgrind" % (binary, res["returncode"]))
    with open(trace_path) as f:
        lines = [lackey.json.loads(ln) for ln in f if ln.strip()][:-1]
    mine, problems = lackey.fold_rep_lods(lackey.group(lines), res["rep_lods"], check=True)
    if problems:
        return None, "\n".join(problems)
    theirs, _ = lackey.fold_rep_lods(lackey.group(res["lines"]), res["rep_lods"], check=False)
    a = lackey.normalise(mine, res["program"])
    b = lackey.normalise(theirs, res["program"])
    text = lackey.first_difference(a, b)
    if text is None:
        return None
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    row = (a[n] if n < len(a) else b[n]) if n < max(len(a), len(b)) else a[-1]
    return int(row[2], 16), text


class Pair:
    """Two engines (gebpf --engine values or "lackey") compared in workdir."""

    def __init__(self, a, b, workdir, trap=DEFAULT_TRAP, values=False):
        ta, tb = traps(trap)
        self.values = values
        if a == "lackey":
            a, b, ta, tb = b, a, tb, ta
        if a == "lackey":
            raise HarnessError("lackey against lackey compares nothing")
        self.a, self.b, self.dir, self.trap, self.trap_b = a, b, workdir, ta, tb
        self.name_a, self.name_b = name(a, ta, tb), name(b, tb, ta)
        os.makedirs(workdir, exist_ok=True)

    def compare(self, binary, tag):
        """None when the engines agree on binary, else (pc, text).  The two
        gebpf runs run side by side (two processes, nothing shared)."""
        out = lambda n: os.path.join(self.dir, "%s.%s.jsonl" % (tag, n))
        if self.b == "lackey":
            return diff_lackey(trace(self.a, binary, out(self.name_a), self.trap), binary)
        with concurrent.futures.ThreadPoolExecutor(2) as ex:
            fa = ex.submit(trace, self.a, binary, out(self.name_a), self.trap, values=self.values)
            fb = ex.submit(trace, self.b, binary, out(self.name_b), self.trap_b,
                           values=self.values)
            ta, tb = fa.result(), fb.result()
        return diff_files(ta, tb, self.name_a, self.name_b)


def traps(trap):
    """(trap of A, trap of B) from "T" or "TA,TB"."""
    t = (trap or "").split(",")
    if len(t) > 2:
        raise HarnessError("--trap takes one trap or two (A,B): %s" % trap)
    return (t[0] or None, t[-1] or None)


def name(engine, trap, other):
    """engine, or engine-trap when the two traps differ (file names, reports)."""
    return engine if trap == other or engine == "lackey" else "%s-%s" % (engine, trap)


# ---------------------------------------------------------------- shrinking

def ddmin(items, fails):
    """Delta debugging (Zeller): a 1-minimal sublist of items (order kept)
    for which fails(sublist) holds; fails(items) must hold."""
    n = 2
    while len(items) >= 2:
        chunk = -(-len(items) // n)
        parts = [items[i:i + chunk] for i in range(0, len(items), chunk)]
        for i in range(len(parts)):
            rest = [x for j, p in enumerate(parts) if j != i for x in p]
            if fails(parts[i]):
                items, n = parts[i], 2
                break
            if fails(rest):
                items, n = rest, max(n - 1, 2)
                break
        else:
            if n >= len(items):
                break
            n = min(n * 2, len(items))
    return items


def shrink(pair, seqs, idx, log=print, base=0):
    """Smallest program on which pair still differs: sequence idx reduced
    by delta debugging, after it the fewest earlier sequences it needs
    (none when it differs alone).  Returns (prefix, items, last difference);
    prefix is [(index, sequence)].  base: the corpus index of seqs[0]."""
    counter = [0]
    last = [None]

    def differs(prefix, items):
        counter[0] += 1
        path = os.path.join(pair.dir, "shrink%d" % counter[0])
        build([q for _, q in prefix] + [items], path, [base + i for i, _ in prefix] + [base + idx])
        if not runs_natively(path):
            return False
        d = pair.compare(path, "shrink%d" % counter[0])
        if d is not None:
            last[0] = d
        return d is not None

    seq = seqs[idx]
    prefix = []
    if not differs([], seq):
        prefix = list(enumerate(seqs[:idx]))
        if not differs(prefix, seq):
            raise HarnessError("sequence %d does not reproduce the difference" % (base + idx))
        prefix = ddmin(prefix, lambda p: differs(p, seq))
        log("sequence %d differs only after sequences %s" % (base + idx,
                                                            [base + i for i, _ in prefix]))
    items = ddmin(seq, lambda it: differs(prefix, it))
    if prefix:
        prefix = [(i, ddmin(q, lambda it, i=i: differs(
            [(j, it if j == i else r) for j, r in prefix], items))) for i, q in prefix]
    log("shrunk sequence %d from %d items to %d (%d programs traced)"
        % (base + idx, len(seq), len(items), counter[0]))
    differs(prefix, items)
    return [(base + i, q) for i, q in prefix], items, last[0]


def reproducer_text(prefix, items, idx):
    text = lambda its: "\n".join(ln if ln.endswith(":") else "\t" + ln for it in its for ln in it)
    out = ["cseq_%d:\n%s" % (i, text(q)) for i, q in prefix]
    return "\n".join(out + ["cseq_%d:\n%s" % (idx, text(items))])


# ---------------------------------------------------------------- the whole run

def run(engines, seed, count, workdir, lackey_safe=False, trap=DEFAULT_TRAP, do_shrink=True,
        log=print, avoid=(), nostop=None, values=False):
    """Returns (ok, report text).  nostop (default: when a trap is patch):
    the corpus without gen.NOSTOP, traced in programs of PATCH_CHUNK.
    values: both traced with --values (the values compared too)."""
    a, b = engines
    pair = Pair(a, b, workdir, trap, values)
    patch = "patch" in (pair.trap, pair.trap_b)
    if nostop is None:
        nostop = patch
    avoid = list(avoid) + (list(gen.NOSTOP) if nostop else [])
    seqs = gen.generate(seed, count, lackey_safe or "lackey" in engines, gen.avx2_present(), avoid)
    step = PATCH_CHUNK if patch else max(count, 1)
    a, b = pair.name_a, pair.name_b
    what = "%d sequences (seed %d%s%s%s)" % (
        count, seed, ", with --values" if values else "", ", without %s" % "/".join(gen.NOSTOP) if nostop else "",
        ", in programs of %d" % step if step < count else "")
    for lo in range(0, count, step):
        part = seqs[lo:lo + step]
        tag = "corpus" if step >= count else "corpus%d" % lo
        binary = build(part, os.path.join(workdir, tag), range(lo, lo + len(part)))
        if not runs_natively(binary):
            raise HarnessError("%s does not exit 0 natively" % binary)
        d = pair.compare(binary, tag)
        if d is not None:
            break
    else:
        return True, "%s and %s agree on %s" % (a, b, what)
    pc, text = d
    report = ["%s and %s differ on the corpus (%s): %s" % (a, b, what, text)]
    idx = seq_of(seq_starts(binary), pc) if pc is not None else None
    if idx is None:
        report.append("(the difference is not inside a sequence: pc %s)" % (pc and hex(pc)))
        return False, "\n".join(report)
    report.append("first differing sequence: %d" % idx)
    if do_shrink:
        prefix, items, last = shrink(pair, part, idx - lo, log, lo)
        repro = reproducer_text(prefix, items, idx)
        path = os.path.join(workdir, "repro")
        build([q for _, q in prefix] + [items], path, [i for i, _ in prefix] + [idx])
        report.append("shortest reproducer (%s.S; assemble with %s -static -no-pie -nostdlib, "
                      "trace with --range %s):\n%s" % (path, CC, RANGE, repro))
        if last:
            report.append("its difference: %s" % last[1])
    else:
        report.append(reproducer_text([], seqs[idx], idx))
    return False, "\n".join(report)


def main(argv):
    ap = argparse.ArgumentParser(description="compare two engines on the random corpus")
    ap.add_argument("--engines", default=os.environ.get("GEBPF_CORPUS_ENGINES", "step,jit"),
                    help="A,B: gebpf --engine values or lackey (default step,jit)")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--lackey", action="store_true", help="only what lackey runs (gen.py --lackey)")
    ap.add_argument("--trap", default=DEFAULT_TRAP,
                    help="gebpf --trap of both engines, or A,B: of each (default %(default)s; "
                    "patch: see --nostop)")
    ap.add_argument("--workdir", default=os.path.join(OUTPUT, "corpus"))
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--values", action="store_true", help="trace with --values (values compared)")
    ap.add_argument("--nostop", action=argparse.BooleanOptionalAction, default=None,
                    help="leave out what the patch trap refuses (gen.py --nostop); default: "
                    "when a --trap is patch")
    ap.add_argument("--avoid", action="append", default=[], metavar="MODE",
                    help="leave an addressing mode out (eip), to look past a known difference")
    a = ap.parse_args(argv)
    engines = a.engines.split(",")
    if len(engines) != 2:
        ap.error("--engines takes two names")
    try:
        ok, text = run(engines, a.seed, a.count, a.workdir, a.lackey, a.trap, not a.no_shrink,
                       avoid=a.avoid, nostop=a.nostop, values=a.values)
    except HarnessError as e:
        print("corpus: %s" % e, file=sys.stderr)
        return 2
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

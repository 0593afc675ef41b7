"""The independent oracle: valgrind lackey's memory trace -> gebpf trace lines.

`valgrind --tool=lackey --trace-mem=yes --vex-iropt-level=0` prints one line
per guest instruction (`I  addr,size`) followed by its data accesses
(` L addr,size` load, ` S addr,size` store, ` M addr,size` modify).  This
module runs it on a static no-PIE test program, keeps the instructions whose
PC lies in the inclusive range, and turns them into the trace schema of
docs/trace-format.md (exec/read/write, vt counted among in-range
instructions).  It normalises exactly the lackey deviations listed in
docs/testing.md ("Emulator deviations"), each with a reason:

  * `M` is one line for a read-modify-write: hardware semantics want a read
    then a write at the same address and size.
  * REP string ops: lackey shows an extra instruction with no access when a
    REP loop ends on RCX=0 (the loop re-enters itself and exits) -> dropped.
  * locked RMW and `xchg`: lackey reads twice (an `L` then an `M`) -> the `L`
    is dropped.
  * bit-test with a register offset: lackey reports the byte holding the bit;
    hardware accesses the operand-sized unit -> widened (the unit containing
    the byte; exact for a rip-relative/absolute base, otherwise the base must
    be aligned to the operand size, which the test programs keep).
  * bit-test between two registers (`btr %dx, %r9w`): VEX does the bit
    operation on a copy in memory, so lackey shows stores and loads at the
    stack pointer; the instruction has no memory operand -> all dropped.
  * AVX2 gathers: lackey reads 4 bytes at RSP for every masked-off lane ->
    dropped (reads of the element size inside valgrind's main stack).
  * CMPS: lackey reads ES:(RDI) before DS:(RSI); the instruction's operand
    order (Intel: temp = SRC1 - SRC2, SRC1 = DS:(RSI)) puts DS:(RSI) first
    -> the two reads are swapped (docs/testing.md, "Emulator deviations").
  * REP LODS: valgrind ignores the REP (one LODS, RCX untouched).  That
    cannot be undone from lackey's output, so `compare` (below) folds each
    run of a REP LODS into one instruction without its reads, on both sides,
    after checking that gebpf's iterations are self-consistent.
  * Stack addresses and signal frames: valgrind's stack is elsewhere, and each
    environment builds signal frames at its own distance below the stack.
    `normalise` compares every address outside the program image relative to
    the first access of its region (regions: 1 MiB apart; a fresh set inside
    each signal-handler invocation).

Anything else that differs is a real failure.

Usage as a tool (prints the converted JSONL):
  lackey.py [--range R] [--exec off] BINARY [ARG...]
"""
import json
import re
import subprocess
import sys
import tempfile

from elftools.elf.elffile import ELFFile

VALGRIND = "valgrind"
REGION_SPAN = 1 << 20          # addresses within 1 MiB of a region's anchor
VG_STACK_SPAN = 16 << 20       # valgrind's main stack: 16 MiB below its top

_LINE = re.compile(r"^(I | L| S| M) +([0-9a-fA-F]+),(\d+)$")
_OBJDUMP = re.compile(r"^\s*([0-9a-f]+):\s*(.*)$")
_STRING_OPS = ("movs", "stos", "scas", "cmps", "lods")
_REG_SIZE = {}
for _i, _r in enumerate(("ax", "bx", "cx", "dx", "si", "di", "bp", "sp")):
    _REG_SIZE["r" + _r], _REG_SIZE["e" + _r], _REG_SIZE[_r] = 8, 4, 2
for _n in range(8, 16):
    _REG_SIZE["r%d" % _n], _REG_SIZE["r%dd" % _n], _REG_SIZE["r%dw" % _n] = 8, 4, 2


# ---------------------------------------------------------------- the ELF side

class Program:
    """Symbols, loaded extent and per-PC instruction classes of a static binary."""

    def __init__(self, path):
        self.path = path
        self.symbols = {}
        self.segments = []
        with open(path, "rb") as f:
            elf = ELFFile(f)
            if elf["e_type"] != "ET_EXEC":
                raise ValueError("%s: not a static no-PIE executable" % path)
            for seg in elf.iter_segments():
                if seg["p_type"] == "PT_LOAD":
                    self.segments.append((seg["p_vaddr"], seg["p_vaddr"] + seg["p_memsz"]))
            symtab = elf.get_section_by_name(".symtab")
            for sym in symtab.iter_symbols() if symtab else ():
                if sym["st_info"]["type"] == "STT_FUNC" and sym["st_value"]:
                    self.symbols[sym.name] = (sym["st_value"], sym["st_size"])
        self._insns = {}

    def in_image(self, addr):
        return any(lo <= addr < hi for lo, hi in self.segments)

    def span(self, names):
        """Inclusive (start, end) covering the named functions."""
        try:
            parts = [self.symbols[n] for n in names]
        except KeyError as e:
            raise KeyError("%s: no function symbol %s" % (self.path, e)) from None
        return min(a for a, _ in parts), max(a + s for a, s in parts) - 1

    def range_of(self, spec):
        """A --range value (START-END hex, or SYMBOL) -> inclusive (start, end)."""
        m = re.fullmatch(r"(?:0x)?([0-9a-fA-F]+)-(?:0x)?([0-9a-fA-F]+)", spec)
        if m:
            return int(m.group(1), 16), int(m.group(2), 16)
        return self.span([spec.split(":")[-1]])

    def insns(self, start, end):
        """pc -> disassembly text (AT&T, no raw bytes) for [start, end]."""
        key = (start, end)
        if key not in self._insns:
            out = subprocess.run(
                ["objdump", "-d", "-w", "--no-show-raw-insn",
                 "--start-address=%#x" % start, "--stop-address=%#x" % (end + 1), self.path],
                check=True, capture_output=True, text=True).stdout
            table = {}
            for line in out.splitlines():
                m = _OBJDUMP.match(line)
                if m and m.group(2) and not m.group(2).startswith("<"):
                    table[int(m.group(1), 16)] = m.group(2).strip()
            self._insns[key] = table
        return self._insns[key]


def has_mem(ops):
    """Whether AT&T operands name memory: (...) or an absolute address."""
    return "(" in ops or any(re.fullmatch(r"-?(0x[0-9a-f]+|\d+)", o.strip())
                             for o in ops.split(","))


def insn_class(text):
    """Classify one objdump line: the facts the normalisations need."""
    words = text.split()
    prefixes = []
    while words and words[0] in ("lock", "rep", "repz", "repe", "repnz", "repne", "data16",
                                 "notrack", "bnd", "cs", "ds", "es", "fs", "gs", "ss"):
        prefixes.append(words.pop(0))
    mnem = words[0] if words else ""
    ops = " ".join(words[1:]).split("#")[0].strip()
    cls = {"mnem": mnem, "lock": "lock" in prefixes}
    rep = any(p.startswith("rep") for p in prefixes)
    string_op = mnem.startswith(_STRING_OPS)
    cls["rep_string"] = rep and string_op and not mnem.startswith("lods")
    cls["rep_lods"] = rep and mnem.startswith("lods")
    cls["xchg_mem"] = mnem.startswith("xchg") and has_mem(ops)
    cls["gather"] = mnem.startswith(("vpgather", "vgather"))
    cls["cmps"] = mnem.startswith("cmps") and "(%rdi)" in ops      # not SSE cmpsd/cmpss
    # bt/bts/btr/btc with a register bit offset and a memory operand
    m = re.fullmatch(r"bt[src]?[wlq]?", mnem)
    cls["bittest_regs"] = bool(m) and not has_mem(ops)
    reg = re.match(r"%(\w+),", ops)
    if m and reg and has_mem(ops):
        cls["bittest_size"] = _REG_SIZE.get(reg.group(1))
        rip = re.search(r"#\s*([0-9a-f]+)", text)
        cls["bittest_base"] = int(rip.group(1), 16) if rip and "%rip" in ops else None
        absolute = re.fullmatch(r"%\w+,(0x[0-9a-f]+)", ops)
        if absolute:
            cls["bittest_base"] = int(absolute.group(1), 16)
    return cls


# ---------------------------------------------------------------- the lackey side

def run_lackey(argv, smc=False, timeout=300, cwd=None):
    """Run the program under lackey.  Returns (returncode, stdout, lackey log)."""
    with tempfile.NamedTemporaryFile(prefix="lackey-", suffix=".log") as log:
        # --vex-guest-chase=no: when VEX chases a conditional branch into
        # its target, lackey can report instructions of the side that did
        # not run (found by tests/corpus: a `dec; jg` loop shown looping once
        # more than it did)
        cmd = [VALGRIND, "--tool=lackey", "--trace-mem=yes", "--vex-iropt-level=0",
               "--vex-guest-chase=no", "--log-file=" + log.name]
        if smc:
            cmd.append("--smc-check=all")
        proc = subprocess.run(cmd + list(argv), capture_output=True, timeout=timeout, cwd=cwd)
        with open(log.name, errors="replace") as f:
            text = f.read()
    return proc.returncode, proc.stdout, text


def parse_lackey(text):
    """Lackey log -> [[pc, [(kind, addr, size), ...]], ...] in program order."""
    insns = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        kind, addr, size = m.group(1).strip(), int(m.group(2), 16), int(m.group(3))
        if kind == "I":
            insns.append([addr, []])
        elif insns:
            insns[-1][1].append((kind, addr, size))
    return insns


def convert(prog, insns, start, end, exec_on=True, bounded=True):
    """Lackey instructions -> (trace lines as dicts in schema order, summary
    dict, PCs of REP LODS instructions)."""
    table = prog.insns(start, end)
    classes = {}
    # valgrind's main stack: the first access of any program is to the
    # initial stack (the start-up code's first pop/call), near its top.
    first = next((acc[0][1] for _, acc in insns if acc), 0)
    vg_stack = (first - VG_STACK_SPAN, first + 4096)

    lines, n_exec, n_mem = [], 0, 0
    for i, (pc, acc) in enumerate(insns):
        if not start <= pc <= end:
            continue
        if pc not in classes:
            if pc not in table:
                raise ValueError("lackey executed %#x, which objdump does not decode as an "
                                 "instruction start in %s" % (pc, prog.path))
            classes[pc] = insn_class(table[pc])
        cls = classes[pc]
        if (cls["rep_string"] and not acc and i > 0 and insns[i - 1][0] == pc
                and insns[i - 1][1]):
            continue          # the extra pass of a REP loop ending on RCX=0
        if cls["bittest_regs"]:
            acc = []          # bit-test between registers: VEX spills to its stack
        ops = []
        for j, (kind, addr, size) in enumerate(acc):
            if kind == "L" and (cls["lock"] or cls["xchg_mem"]) and any(
                    k == "M" and a == addr and s == size for k, a, s in acc[j + 1:]):
                continue      # locked RMW / xchg: lackey's extra read
            if cls["gather"] and kind == "L" and vg_stack[0] <= addr < vg_stack[1]:
                continue      # masked-off gather lane: lackey reads at RSP
            if cls.get("bittest_size") and size == 1:
                unit = cls["bittest_size"]
                base = cls["bittest_base"]
                if base is None:
                    addr -= addr % unit
                else:
                    addr = base + unit * ((addr - base) // unit)
                size = unit
            if kind in ("L", "M"):
                ops.append(("read", addr, size))
            if kind in ("S", "M"):
                ops.append(("write", addr, size))
        if cls["cmps"] and len(ops) == 2:
            ops.reverse()     # lackey reads ES:RDI first; the operand order is DS:RSI, ES:RDI
        vt = n_exec
        n_exec += 1
        if exec_on:
            lines.append({"t": "exec", "vcpu": 0, "pc": hex(pc), "vt": vt})
        for t, addr, size in ops:
            lines.append({"t": t, "vcpu": 0, "addr": hex(addr), "size": size,
                          "pc": hex(pc), "vt": vt})
            n_mem += 1
    summary = {"t": "summary", "insns": n_exec if exec_on else 0, "mem": n_mem, "events": len(lines),
               "dropped": 0, "exec": exec_on, "start": hex(start) if bounded else None,
               "end": hex(end) if bounded else None}
    rep_lods = {pc for pc, c in classes.items() if c["rep_lods"]}
    return lines, summary, rep_lods


def oracle(path, args=(), range_spec=None, exec_on=True, smc=False):
    """Run lackey on PATH ARGS and convert.  Returns a dict: lines, summary,
    rep_lods (PCs), returncode, stdout, program (Program)."""
    prog = Program(path)
    start, end = prog.range_of(range_spec) if range_spec else (0, (1 << 64) - 1)
    rc, out, log = run_lackey([path] + list(args), smc=smc)
    lines, summary, rep_lods = convert(prog, parse_lackey(log), start, end, exec_on,
                                      bounded=range_spec is not None)
    return {"lines": lines, "summary": summary, "rep_lods": rep_lods, "returncode": rc,
            "stdout": out, "program": prog, "start": start, "end": end}


# ---------------------------------------------------------------- comparison

def dumps(obj):
    """A trace line exactly as gebpf writes it (no spaces, schema order)."""
    return json.dumps(obj, separators=(",", ":"))


def group(lines):
    """Trace lines -> [[exec line or None, [access lines]], ...], one per
    instruction (with --exec off, accesses are grouped by vcpu and vt)."""
    out = []
    for ln in lines:
        if ln["t"] == "exec":
            out.append([ln, []])
        elif ln["t"] in ("read", "write"):
            if out:
                head = out[-1][0] or out[-1][1][0]
                if (head["vcpu"], head["vt"]) == (ln["vcpu"], ln["vt"]):
                    out[-1][1].append(ln)
                    continue
            out.append([None, [ln]])
    return out


def fold_rep_lods(groups, rep_lods, check):
    """Fold each run of a REP LODS into one instruction without its reads.
    With check, verify the run is self-consistent (one read per iteration at
    consecutive addresses, or one iteration and no read for RCX=0).
    Returns (groups, problems)."""
    out, problems, removed = [], [], 0
    i = 0
    while i < len(groups):
        ex, acc = groups[i]
        pc = int((ex or acc[0])["pc"], 16)
        if pc not in rep_lods:
            out.append(_shift(groups[i], removed))
            i += 1
            continue
        j = i + 1
        while j < len(groups) and int((groups[j][0] or groups[j][1][0])["pc"], 16) == pc:
            j += 1
        run = groups[i:j]
        if check:
            reads = [a for _, accs in run for a in accs]
            if len(reads) == 0 and len(run) != 1:
                problems.append("REP LODS at %#x: %d iterations without reads" % (pc, len(run)))
            elif reads and (len(reads) != len(run) or any(a["t"] != "read" for a in reads)):
                problems.append("REP LODS at %#x: %d iterations, accesses %s"
                                % (pc, len(run), [dumps(a) for a in reads]))
            elif len(reads) > 1:
                step = int(reads[1]["addr"], 16) - int(reads[0]["addr"], 16)
                size = reads[0]["size"]
                if abs(step) != size or any(
                        int(b["addr"], 16) - int(a["addr"], 16) != step or b["size"] != size
                        for a, b in zip(reads, reads[1:])):
                    problems.append("REP LODS at %#x: reads not consecutive: %s"
                                    % (pc, [dumps(a) for a in reads]))
        out.append(_shift([run[0][0], []], removed))
        removed += len(run) - 1
        i = j
    return out, problems


def _shift(g, removed):
    if not removed:
        return g
    ex, acc = g
    sh = lambda ln: dict(ln, vt=ln["vt"] - removed)
    return [sh(ex) if ex else None, [sh(a) for a in acc]]


class _Regions:
    """Addresses outside the image, relative to the first access of their region."""

    def __init__(self, prog):
        self.prog = prog
        self.sets = {}

    def name(self, addr, ctx):
        if self.prog.in_image(addr):
            return hex(addr)
        anchors = self.sets.setdefault(ctx, [])
        for k, base in enumerate(anchors):
            if abs(addr - base) < REGION_SPAN:
                return "%s.r%d%+d" % (ctx, k, addr - base)
        anchors.append(addr)
        return "%s.r%d+0" % (ctx, len(anchors) - 1)


def normalise(groups, prog, handlers=(), vcpu=True, vt=True):
    """Groups -> comparable tuples, one per line.  handlers: (start, end)
    PC ranges of signal handlers (each entry at `start` opens a new set of
    regions)."""
    regions = _Regions(prog)
    ctx, n_sig, out = "main", 0, []
    for idx, (ex, acc) in enumerate(groups):
        first = ex or acc[0]
        pc = int(first["pc"], 16)
        inside = [h for h in handlers if h[0] <= pc <= h[1]]
        if inside and pc == inside[0][0]:
            n_sig += 1
            ctx = "sig%d" % n_sig
        elif not inside:
            ctx = "main"
        for ln in ([ex] if ex else []) + acc:
            row = [ln["t"]]
            if vcpu:
                row.append(ln["vcpu"])
            row.append(ln["pc"])
            if ln["t"] != "exec":
                row += [regions.name(int(ln["addr"], 16), ctx), ln["size"]]
            row.append(ln["vt"] if vt else idx)
            out.append(tuple(row))
    return out


def first_difference(a, b, context=3):
    """None when equal, else a readable description of the first difference."""
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    if n == len(a) == len(b):
        return None
    lo = max(0, n - context)
    show = lambda seq: "\n".join("  %s%d: %s" % (">" if i == n else " ", i, seq[i])
                                 for i in range(lo, min(len(seq), n + context + 1)))
    return ("first difference at line %d (gebpf %d lines, lackey %d lines)\n"
            "gebpf:\n%s\nlackey:\n%s" % (n, len(a), len(b), show(a), show(b)))


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description="lackey -> gebpf trace JSONL")
    ap.add_argument("--range")
    ap.add_argument("--exec", default="on", choices=("on", "off"))
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    if not a.cmd:
        ap.error("no program")
    res = oracle(a.cmd[0], a.cmd[1:], a.range, a.exec == "on")
    for ln in res["lines"]:
        print(dumps(ln))
    print(dumps(res["summary"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

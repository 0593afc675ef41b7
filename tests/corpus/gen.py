#!/usr/bin/env python3
"""Random-instruction corpus for engine comparison (issue 13, "Tests").

    gen.py [--seed S] [--count N] [--lackey] [--nostop] [--no-avx2] -o corpus.S

Emits a static x86-64 program (assemble it like tests/progs/*.S: `cc -static
-no-pie -nostdlib`) whose function `corpus` holds N random straight-line
sequences; trace it with `--range corpus`.  Deterministic: the same seed and
options give the same text.

Every memory operand hits valid memory.  Registers have fixed roles for the
whole program, so a sequence never needs more than the program's header:

  bases   rbx rbp r12 r13   point into `scratch` (a 64 KiB .bss buffer),
                            64-aligned, never written by a sequence
  index   r14 = 24, r15 = 5 never written
  string  rsi rdi           set by each string-op item before it runs
  data    rax rcx rdx r8-r11  free for results (rcx: counts)
  rsp     each sequence saves it, moves it 256 bytes down (pops of nothing
          read that gap) and restores it at the end

A sequence is a list of items; an item is a list of assembly lines that is
kept or removed as a whole when a failing sequence is shrunk (call/ret pairs,
loops, the register set-up a string op needs).  --lackey leaves out what
valgrind cannot run or reports in ways tests/e2e/lackey.py does not
normalise (cmps without REP, repne cmps, REP LODS, EIP-relative operands)
and keeps bit-test bases aligned to the operand size (that normalisation
needs it).  --nostop leaves out what the translator's stop-free mode (the
patch trap, docs/trace.md) still refuses, so that the patch trap traces the
corpus instead of falling back to the probe trap: the forms of NOSTOP.
"""
import argparse
import random
import sys

SCRATCH_SIZE = 0x10000
BASES = {"rbx": 0x4000, "rbp": 0x5000, "r12": 0x6000, "r13": 0x7000}
INDEX = {"r14": 24, "r15": 5}
DATA = ["rax", "rcx", "rdx", "r8", "r9", "r10", "r11"]
SUFFIX = {1: "b", 2: "w", 4: "l", 8: "q"}
CC = ["o", "no", "b", "ae", "e", "ne", "be", "a", "s", "ns", "p", "np", "l", "ge", "le", "g"]
# What the stop-free mode refuses today (gb_jit__nostop_supported), each a
# name of Gen's avoid set: drop a name once user/jit translates it ("rep":
# REP string instructions and "btmem": bt* with a register offset into
# memory were dropped when it did; both stay --avoid names).
NOSTOP = (
    "eip",      # EIP-relative operands (0x67 + RIP: wraps at 4 GiB), stepped elsewhere
)
_SUB = {"rax": ("eax", "ax", "al"), "rcx": ("ecx", "cx", "cl"), "rdx": ("edx", "dx", "dl"),
        "rbx": ("ebx", "bx", "bl"), "rbp": ("ebp", "bp", "bpl"), "rsi": ("esi", "si", "sil"),
        "rdi": ("edi", "di", "dil"), "rsp": ("esp", "sp", "spl")}


def reg(name, size):
    """%name at SIZE bytes (rax, 4 -> %eax; r9, 1 -> %r9b)."""
    if size == 8:
        return "%" + name
    if name in _SUB:
        return "%" + _SUB[name][{4: 0, 2: 1, 1: 2}[size]]
    return "%" + name + {4: "d", 2: "w", 1: "b"}[size]


class Gen:
    def __init__(self, seed, lackey=False, avx2=True, avoid=()):
        self.r = random.Random(seed)
        self.avoid = set(avoid)   # forms left out: an addressing mode (eip), or NOSTOP's
        self.lackey = lackey
        self.avx2 = avx2
        self.label = 0
        self.in_call = False     # inside a called body: no rsp operands (the return address)

    def lab(self):
        self.label += 1
        return ".Lc%d" % self.label

    # ------------------------------------------------------------ operands

    def mem(self, align=1, index=True, rsp=True):
        """A random memory operand whose effective address lies in scratch
        (or the stack gap) and is a multiple of align."""
        r = self.r
        modes = ["base", "disp8", "disp32", "rip", "abs"]
        if index and align == 1:
            modes += ["sib", "sib", "absidx", "addr32"]
            if not self.lackey and "eip" not in self.avoid:
                modes.append("eip")
        if rsp and align == 1 and not self.in_call:
            modes.append("rsp")
        mode = r.choice(modes)
        base = r.choice(sorted(BASES))
        rnd = lambda lo, hi: r.randrange(lo // align, hi // align + 1) * align
        if mode == "base":
            return "(%%%s)" % base
        if mode == "disp8":
            return "%d(%%%s)" % (rnd(-128, 127), base)
        if mode == "disp32":
            d = rnd(128, 4096) * r.choice((1, -1))
            return "%d(%%%s)" % (d, base)
        if mode == "rip":
            return "scratch+%d(%%rip)" % rnd(0x100, 0xf000)
        if mode == "eip":
            return "scratch+%d(%%eip)" % rnd(0x100, 0xf000)
        if mode == "abs":
            return "scratch+%d" % rnd(0x100, 0xf000)
        idx, scale = r.choice(sorted(INDEX)), r.choice((1, 2, 4, 8))
        d = r.choice((0, r.randrange(-128, 128), r.randrange(-4096, 4096)))
        if mode == "sib":
            return "%d(%%%s,%%%s,%d)" % (d, base, idx, scale)
        if mode == "absidx":
            return "scratch+%d(,%%%s,%d)" % (r.randrange(0x100, 0xf000), idx, scale)
        if mode == "addr32":
            return "%d(%s,%s,%d)" % (d, reg(base, 4), reg(idx, 4), scale)
        return "%d(%%rsp)" % r.randrange(-128, 64)

    def data(self, size, avoid=()):
        return reg(self.r.choice([d for d in DATA if d not in avoid]), size)

    def imm(self, size):
        return "$%d" % self.r.randrange(-128, 128 if size == 1 else 1000)

    # ------------------------------------------------------------ items

    def alu(self, avoid=()):
        """One integer instruction with a memory operand (or two), no control
        flow; writes only data registers other than avoid."""
        r = self.r
        s = r.choice((1, 2, 4, 8))
        x = SUFFIX[s]
        m = self.mem()
        kind = r.randrange(12)
        if kind == 0:
            return ["mov%s %s, %s" % (x, m, self.data(s, avoid))]
        if kind == 1:
            return ["mov%s %s, %s" % (x, self.data(s), m)]
        if kind == 2:
            return ["mov%s %s, %s" % (x, self.imm(s) if s < 8 else "$-7", m)]
        if kind == 3:
            op = r.choice(("movzbl", "movzbq", "movzwl", "movzwq", "movsbl", "movsbq", "movswl",
                           "movswq", "movslq"))
            return ["%s %s, %s" % (op, m, self.data(8 if op[-1] == "q" else 4, avoid))]
        if kind == 4:
            op = r.choice(("add", "sub", "and", "or", "xor", "adc", "sbb"))
            return ["%s%s %s, %s" % (op, x, self.data(s), m)]
        if kind == 5:
            op = r.choice(("add", "sub", "and", "or", "xor", "adc", "sbb", "cmp"))
            return ["%s%s %s, %s" % (op, x, self.imm(s), m)]
        if kind == 6:
            op = r.choice(("add", "sub", "and", "or", "xor", "adc", "sbb", "cmp", "test"))
            if op == "test":
                return ["test%s %s, %s" % (x, self.data(s), m)]
            return ["%s%s %s, %s" % (op, x, m, self.data(s, avoid) if op != "cmp" else self.data(s))]
        if kind == 7:
            return ["%s%s %s" % (r.choice(("inc", "dec", "neg", "not")), x, m)]
        if kind == 8:
            op = r.choice(("shl", "shr", "sar", "rol", "ror"))
            if "rcx" in avoid or r.random() < 0.5:
                return ["%s%s $%d, %s" % (op, x, r.randrange(1, 8), m)]
            return ["mov $%d, %%ecx" % r.randrange(0, 4), "%s%s %%cl, %s" % (op, x, m)]
        if kind == 9:
            s = r.choice((2, 4, 8))
            return ["imul%s %s, %s" % (SUFFIX[s], self.mem(), self.data(s, avoid))]
        if kind == 10:
            return ["xchg%s %s, %s" % (x, self.data(s, avoid), m)]
        return [r.choice(("lea %s, %s" % (m, self.data(8, avoid)), "nopw %s" % self.mem(index=False),
                          "prefetcht0 %s" % m, "test%s %s, %s" % (x, self.imm(s), m)))]

    def stack(self):
        r = self.r
        k = r.randrange(6)
        if k == 0:
            return ["push %s" % self.data(8), "pop %s" % self.data(8)]
        if k == 1:
            return ["pushq %s" % self.mem()]
        if k == 2:
            return ["popq %s" % self.mem(align=1, rsp=False)]
        if k == 3:
            # flags a CPU leaves undefined (after bt*, imul, shifts) differ
            # under valgrind: do not let lackey's runs read them
            return ["pushq $%d" % r.randrange(-1000, 1000),
                    "pushq $7" if self.lackey else "pushfq"]
        if k == 4:
            return ["pop %s" % self.data(8)]
        return ["push %s" % self.data(8)]

    def call(self):
        f, over = self.lab(), self.lab()
        self.in_call = True
        body = self.alu(avoid=("rax",))
        self.in_call = False
        k = self.r.randrange(3)
        if k == 0:
            head = ["call %s" % f]
        elif k == 1:
            head = ["lea %s(%%rip), %%rax" % f, "call *%rax"]
        else:
            m = self.mem(align=8, index=False, rsp=False)
            head = ["lea %s(%%rip), %%rax" % f, "mov %%rax, %s" % m, "call *%s" % m]
        ret = self.r.choice(("ret", "ret", "ret $0"))
        return head + ["jmp %s" % over, "%s:" % f] + body + [ret, "%s:" % over]

    def simd(self):
        r = self.r
        choices = [
            ("movups", 16, 1, "x"), ("movaps", 16, 16, "x"), ("movdqu", 16, 1, "x"),
            ("movdqa", 16, 16, "x"), ("movss", 4, 1, "x"), ("movsd", 8, 1, "x"),
            ("movq", 8, 1, "x"), ("movd", 4, 1, "x"), ("movhps", 8, 1, "x"), ("movlps", 8, 1, "x"),
            ("movupd", 16, 1, "x"), ("vmovdqu", 32, 1, "y"), ("vmovups", 32, 1, "y"),
            ("vmovaps", 32, 32, "y"), ("vmovdqa", 32, 32, "y"), ("vmovdqu", 16, 1, "x"),
            ("vmovss", 4, 1, "x"), ("vmovsd", 8, 1, "x"), ("vmovq", 8, 1, "x"),
        ]
        name, size, align, kind = r.choice(choices)
        v = "%%%smm%d" % ("x" if kind == "x" else "y", r.randrange(16))
        m = self.mem(align=align, index=align == 1)
        k = r.randrange(4)
        if k == 0 and self.avx2:
            op = r.choice(("vpbroadcastb", "vpbroadcastw", "vpbroadcastd", "vpbroadcastq"))
            return ["%s %s, %%ymm%d" % (op, self.mem(), r.randrange(16))]
        if k == 1:
            return r.choice((["vbroadcastss %s, %%ymm%d" % (self.mem(), r.randrange(16))],
                             ["vinsertf128 $1, %s, %%ymm1, %%ymm2" % self.mem()],
                             ["vextractf128 $1, %%ymm3, %s" % self.mem()],
                             ["pinsrd $1, %s, %%xmm4" % self.mem()],
                             ["pextrw $3, %%xmm5, %s" % self.mem()]))
        if r.random() < 0.5:
            return ["%s %s, %s" % (name, m, v)]
        return ["%s %s, %s" % (name, v, m)]

    def string(self):
        r = self.r
        op = r.choice(("movs", "stos", "lods", "cmps", "scas"))
        s = r.choice((1, 2, 4, 8))
        back = r.random() < 0.5
        rep = r.choice(("", "rep", "repe", "repne")) if op in ("cmps", "scas") else r.choice(("", "rep"))
        if self.lackey and (op == "cmps" and rep in ("", "repne") or op == "lods" and rep):
            rep = "repe" if op == "cmps" else ""
        if rep == "rep" and op in ("cmps", "scas"):
            rep = "repe"
        if "rep" in self.avoid:
            rep = ""
        n = r.randrange(0, 9)
        src, dst = r.randrange(0x8200, 0x8400), r.randrange(0x8800, 0x8a00)
        out = ["lea scratch+%d(%%rip), %%rsi" % src, "lea scratch+%d(%%rip), %%rdi" % dst,
               "mov $%d, %%ecx" % n, "mov $%d, %%eax" % r.randrange(0, 4)]
        if back:
            out.append("std")
        out.append(("%s %s%s" % (rep, op, SUFFIX[s])).strip())
        if back:
            out.append("cld")
        return out

    def locked(self):
        r = self.r
        s = r.choice((1, 2, 4, 8))
        x = SUFFIX[s]
        # aligned: a locked access that splits a cache line is a split lock
        m = self.mem(align=1 if s == 1 else 8, index=False, rsp=False)
        k = r.randrange(5)
        if k == 0:
            return ["lock %s%s %s, %s" % (r.choice(("add", "sub", "and", "or", "xor")), x,
                                          self.data(s, ("rax",)), m)]
        if k == 1:
            return ["lock xadd%s %s, %s" % (x, self.data(s, ("rax",)), m)]
        if k == 2:
            return ["mov%s %s, %s" % (x, m, reg("rax", s)) if r.random() < 0.5 else "xor %eax, %eax",
                    "lock cmpxchg%s %s, %s" % (x, self.data(s, ("rax",)), m)]
        if k == 3:
            return ["lock %s%s %s" % (r.choice(("inc", "dec", "not", "neg")), x, m)]
        return ["lock %s%s $%d, %s" % (r.choice(("add", "or", "xor")), x, r.randrange(1, 100), m)]

    def cond(self):
        r = self.r
        cc = r.choice(CC)
        k = r.randrange(4)
        if self.lackey and k != 1:      # define every flag first (see stack())
            return ["cmp %s, %s" % (self.data(8), self.data(8))] + self.cond_one(cc, k)
        return self.cond_one(cc, k)

    def cond_one(self, cc, k):
        r = self.r
        if k == 0:
            s = r.choice((2, 4, 8))
            return ["cmov%s %s, %s" % (cc, self.mem(), self.data(s))]
        if k == 1:
            return ["cmp %s, %s" % (self.data(8), self.data(8)),
                    "cmov%s %s, %s" % (cc, self.data(4), self.data(4))]
        if k == 2:
            return ["set%s %s" % (cc, self.mem())]
        return ["set%s %s" % (cc, self.data(1))]

    def bittest(self):
        r = self.r
        op = r.choice(("bt", "bts", "btr", "btc"))
        s = r.choice((2, 4, 8))
        x = SUFFIX[s]
        if r.random() < 0.4:
            return ["%s%s $%d, %s" % (op, x, r.randrange(0, 8 * s), self.mem())]
        if r.random() < 0.3:
            return ["%s%s $%d, %s" % (op, x, r.randrange(0, 8 * s), self.data(s, ("rdx",))),
                    "mov $%d, %%edx" % r.randrange(0, 64), "%s%s %s, %s" % (op, x, reg("rdx", s),
                                                                         self.data(s, ("rdx",)))]
        # register offset, also far beyond the operand and negative
        off = r.choice((r.randrange(0, 8 * s), r.randrange(-512, 1024)))
        # lackey's bit-test normalisation needs a base aligned to the operand
        # size (exact for RIP-relative and absolute operands at any offset)
        m = self.mem(align=8, index=False, rsp=False) if self.lackey else self.mem()
        if "btmem" in self.avoid:
            m = self.data(s, ("rdx",))
        return ["mov $%d, %%rdx" % off, "%s%s %s, %s" % (op, x, reg("rdx", s), m)]

    def loop(self):
        r = self.r
        top = self.lab()
        body = []
        for _ in range(r.randrange(1, 3)):
            body += self.alu(avoid=("r11", "rcx"))
        cond = r.choice(("jnz", "jg", "jne"))
        return ["mov $%d, %%r11d" % r.randrange(1, 5), "%s:" % top] + body + [
            "dec %r11d", "%s %s" % (cond, top)]

    def branch(self):
        skip = self.lab()
        return ["test %s, %s" % (self.data(4), self.data(4)), "j%s %s" % (self.r.choice(CC), skip)] \
            + self.alu() + ["%s:" % skip]

    def item(self):
        r = self.r
        k = r.choices(range(10), weights=(30, 8, 5, 10, 8, 6, 6, 7, 5, 3))[0]
        return [self.alu, self.stack, self.call, self.simd, self.string, self.locked, self.cond,
                self.bittest, self.loop, self.branch][k]()

    def sequence(self):
        return [self.item() for _ in range(self.r.randrange(4, 9))]


def generate(seed, count, lackey=False, avx2=True, avoid=()):
    g = Gen(seed, lackey, avx2, avoid)
    return [g.sequence() for _ in range(count)]


HEADER = """\t.text
\t.globl _start
_start:
\tcall corpus
\tmov $60, %%eax
\txor %%edi, %%edi
\tsyscall

\t.globl corpus
\t.type corpus, @function
\t.p2align 6
corpus:
\tcld
%s
"""

FOOTER = """\tret
\t.size corpus, .-corpus

\t.bss
\t.p2align 12
\t.globl scratch
scratch:
\t.zero %d
saved_rsp:
\t.zero 8
"""


def program(seqs, names=None):
    """Assembly text of a program running seqs (lists of items) in order.
    names: the label of each sequence (default cseq_N, N its position)."""
    setup = ["lea scratch+%d(%%rip), %%%s" % (off, b) for b, off in sorted(BASES.items())]
    setup += ["mov $%d, %%%s" % (v, i) for i, v in sorted(INDEX.items())]
    out = [HEADER % "\n".join("\t" + ln for ln in setup)]
    for n, seq in enumerate(seqs):
        out.append("cseq_%d:" % (names[n] if names else n))
        out.append("\tmov %rsp, saved_rsp(%rip)\n\tsub $256, %rsp")
        for it in seq:
            out.extend(ln if ln.endswith(":") else "\t" + ln for ln in it)
        out.append("\tmov saved_rsp(%rip), %rsp")
    out.append(FOOTER % SCRATCH_SIZE)
    return "\n".join(out)


def avx2_present():
    try:
        with open("/proc/cpuinfo") as f:
            return " avx2" in f.read()
    except OSError:
        return False


def main(argv):
    ap = argparse.ArgumentParser(description="random-instruction corpus (assembly)")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--lackey", action="store_true", help="only what lackey runs and we normalise")
    ap.add_argument("--nostop", action="store_true",
                    help="only what the patch trap's stop-free mode runs (NOSTOP left out)")
    ap.add_argument("--avoid", action="append", default=[], metavar="FORM",
                    help="leave a form out (eip, rep, btmem)")
    ap.add_argument("--no-avx2", action="store_true")
    ap.add_argument("-o", "--output", default="-")
    a = ap.parse_args(argv)
    avoid = a.avoid + (list(NOSTOP) if a.nostop else [])
    text = program(generate(a.seed, a.count, a.lackey, avx2_present() and not a.no_avx2, avoid))
    if a.output == "-":
        sys.stdout.write(text)
    else:
        with open(a.output, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

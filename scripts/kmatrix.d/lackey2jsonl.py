#!/usr/bin/python3
"""valgrind lackey --trace-mem=yes output -> gebpf trace JSONL for one range.

    lackey2jsonl.py LACKEY_LOG START END      (hex, END inclusive)

Used to re-derive scripts/kmatrix.d/expect/kmtrace.jsonl from an independent
oracle (docs/kmatrix.md).  Only for single-threaded programs without the lackey
deviations listed in docs/testing.md (REP, locked RMW, xchg, bit-test, gathers...):
it does not correct for them, so it must not be used on programs that have them.
"""
import re
import sys

LINE = re.compile(r"^(I| L| S| M)\s+([0-9a-fA-F]+),(\d+)")


def main(argv):
    if len(argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    lo, hi = int(argv[2], 16), int(argv[3], 16)
    out, vt, pc, inside, insns, mem = [], -1, 0, False, 0, 0
    with open(argv[1]) as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            kind, addr, size = m.group(1).strip(), int(m.group(2), 16), int(m.group(3))
            if kind == "I":
                inside = lo <= addr <= hi
                if inside:
                    vt, pc, insns = vt + 1, addr, insns + 1
                    out.append('{"t":"exec","vcpu":0,"pc":"%s","vt":%d}' % (hex(addr), vt))
                continue
            if not inside:
                continue
            for t in {"L": ("read",), "S": ("write",), "M": ("read", "write")}[kind]:
                mem += 1
                out.append('{"t":"%s","vcpu":0,"addr":"%s","size":%d,"pc":"%s","vt":%d}'
                           % (t, hex(addr), size, hex(pc), vt))
    out.append('{"t":"summary","insns":%d,"mem":%d,"events":%d,"dropped":0,"exec":true,'
               '"start":"%s","end":"%s"}' % (insns, mem, insns + mem, hex(lo), hex(hi)))
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

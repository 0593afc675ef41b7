"""What the kernel's out-of-line step of a probed instruction could show the
program, and synchronous faults whose handlers return into the range (issue
20 part 1; docs/trace.md "The probe trap").

uprobes run a probed instruction out of line, single-stepped (TF set), at an
address of their own.  tests/progs/pt_pushf has one range per instruction
that could expose it as the range's first instruction (an entry, so
probed): pushfq (the program branches on the pushed TF), lea of rip, a call
(its pushed return address) and a RIP-relative load.  tests/progs/pt_sigret
has faults (a load from a PROT_NONE page, ud2) whose handlers, outside the
range, return into it: to the faulting load, past the ud2, or to another
instruction of the range (ucontext rip), in the middle of the range and as
its first instruction.

Each range is traced with --trap probes under both engines (step, jit) and
with --trap none: the files must be byte-identical, and the program's
output its native one.  A run that fell back to the page trap fails (the
probe trap must really have been used).
"""
import pytest

from conftest import check_vt_order, read_trace
from test_pagetrap import native, same_file, trace

pytestmark = [pytest.mark.probetrap, pytest.mark.usefixtures("probes_ready")]

CASES = [("pt_pushf", r) for r in ("pf_pushf", "pf_lea", "pf_call", "pf_load")] + \
        [("pt_sigret", r) for r in ("traced", "first_load", "first_skip", "first_jump")]


@pytest.mark.parametrize("engine", ["step", "jit"])
@pytest.mark.parametrize("case", CASES, ids=["%s:%s" % c for c in CASES])
def test_probes_equal_none(case, engine, tmp_path):
    name, rng = case
    a, b = tmp_path / "probes.jsonl", tmp_path / "none.jsonl"
    ra = trace(name, rng, a, trap="probes", extra=("--engine", engine))
    rb = trace(name, rng, b, trap="none")
    assert "probe trap: " in ra.stderr and "entries in" in ra.stderr, \
        "the probe trap was not used for %s --range %s:\n%s" % (name, rng, ra.stderr)
    assert "using the page trap" not in ra.stderr, ra.stderr
    want = native(name).decode()
    assert ra.stdout == want, "%s --range %s printed %r under the probe trap (--engine %s), " \
        "%r natively" % (name, rng, ra.stdout, engine, want)
    assert rb.stdout == want
    same_file(a, b, "%s --range %s --engine %s" % (name, rng, engine), ("probes", "none"))
    lines, summary = read_trace(a)
    check_vt_order(lines)
    assert summary["dropped"] == 0 and summary["insns"] > 0, summary


def test_pushf_sees_no_tf():
    """Natively the pushed TF is 0 (the test's premise)."""
    assert native("pt_pushf").startswith(b"pushf tf 0 ")

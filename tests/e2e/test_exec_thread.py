"""An exec made by another thread than the main one, under every trap
(docs/trace.md "fork, exec, threads"): the exec'ing thread takes the main
thread's tid (the kernel kills the main thread), keeps its vcpu, and the new
image is traced exactly.  The kernel filters a uprobe's hits by the memory of
the task it was attached for, which died with the old image: the probe trap
attaches its probes again at such an exec, else it traced nothing of the new
image.

exec_thread 2 quiet: three images, one thread at a time in the range (the
main thread calls `traced` 3 times, then waits while another thread calls it
3 times and execs), so that each trap's trace is the reference's byte for
byte: `--trap none --engine step` (every instruction single-stepped).

Needs root and uprobes (the probe and patch traps)."""
import pytest

from conftest import check_vt_order, prog_path, read_trace
import lackey
from test_pagetrap import invocations, native, same_file, trace

pytestmark = [pytest.mark.probetrap, pytest.mark.usefixtures("probes_ready")]

ARGS = (2, "quiet")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("exec_thread") / "step.jsonl"
    r = trace("exec_thread", "traced", out, *ARGS, trap="none", extra=("--engine", "step"),
              timeout=180)
    assert r.stdout == native("exec_thread", *ARGS).decode()
    return out


@pytest.mark.parametrize("trap", ["probes", "pages", "patch", "default"])
def test_exec_from_a_thread_every_trap(trap, reference, tmp_path):
    """Each trap's trace is the single-stepped one byte for byte: 15 calls of
    traced (3 per thread: gen 2's main thread on vcpu 0, its second thread on
    vcpu 1, which execs and calls it 3 times more as gen 1's main thread,
    whose second thread on vcpu 2 execs into gen 0)."""
    out = tmp_path / ("%s.jsonl" % trap)
    r = trace("exec_thread", "traced", out, *ARGS, trap=trap, timeout=120)
    assert r.stdout == native("exec_thread", *ARGS).decode()
    same_file(out, reference, "exec_thread %s, traced" % " ".join(map(str, ARGS)),
              (trap, "step"))
    lines, _ = read_trace(out)
    check_vt_order(lines)
    per = invocations(lines, lackey.Program(prog_path("exec_thread")).span(["traced"])[0])
    assert {v: len(runs) for v, runs in per.items()} == {0: 3, 1: 6, 2: 6}, r.stderr[-3000:]
    if trap == "probes":
        assert r.stderr.count("probes attached again") == 2, r.stderr[-3000:]

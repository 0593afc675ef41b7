"""The patch trap and a handler that leaves the way Go's asynchronous
preemption does (issue 32; docs/trace.md "The patch trap", "Signals";
user/trace/trap_patch_later.c): pt_preempt's 100 us SIGALRM handler makes
the thread call `detour`, which returns to the interrupted pc with a plain
ret (not rt_sigreturn).  A signal that stopped the thread in the copies of
the instructions `traced`'s patch covers, delivered at the original pc,
would send the detour into the middle of the patch's jump: SIGSEGV (every
run of 3, before).  It must be taken at a later instruction instead: the
program's checksum is a native run's, -v counts the signals taken later."""
import re
import subprocess

from conftest import gebpf_path, prog_path

N = "3000000"


def test_a_handler_that_returns_by_a_ret_never_lands_inside_a_patch(tmp_path):
    native = subprocess.run([prog_path("pt_preempt"), N], capture_output=True, text=True,
                            timeout=120, check=True).stdout
    later = 0
    for k in range(2):
        out = tmp_path / ("t%d.jsonl" % k)
        r = subprocess.run([gebpf_path(), "trace", "-v", "--range", "traced", "-o", str(out),
                            "--", prog_path("pt_preempt"), N],
                           capture_output=True, text=True, timeout=300)
        err = "\n".join(l for l in r.stderr.splitlines() if not l.startswith("libbpf"))
        assert r.returncode == 0, err[-3000:]
        assert "entries patched" in err, err[-3000:]
        assert r.stdout == native, "checksum %r, native %r" % (r.stdout, native)
        m = re.search(r"(\d+) asynchronous signals taken at a later instruction", err)
        later += int(m.group(1)) if m else 0
        summary = out.read_text().splitlines()[-1]
        assert '"t":"summary"' in summary and int(re.search(r'"insns":(\d+)', summary).group(1)) > 0
    # (a 100 us timer over a few seconds lands inside the 2 covered
    # instructions of 10 more than a hundred times a run here)
    assert later > 0, "no signal stopped a thread inside a patch's bytes in 2 runs"

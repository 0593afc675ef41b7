"""The worker SIGKILLed at each step of the patch trap's end (issues 32, 33;
docs/trace.md "The patch trap" / "The end" and "Ending").  The kill
campaigns (test_trap_crash.py) land in the end's few milliseconds only now
and then; here GEBPF_TEST_KILL_AT=STEP makes the worker kill itself at that
step (common/guard.h gb_guard_test_point, docs/testing.md "Killing the
worker at a named step"), attached to pt_crash, to pt_churn, whose threads
come and go through the end and the write-back, and to pt_short, whose
start is a 2-byte jump to a trampoline.

Each run: gebpf dies of its worker's SIGKILL (so the step was reached);
before the undo log is cleared the process the user started writes every
logged entry back and says so in one line, after it there is nothing to
write back and it says nothing; the text of `traced` and `helper` is the
file's; no thread stays traced; the program finishes with its native
output."""
import concurrent.futures
import os
import re
import subprocess
import time

import pytest

from conftest import gebpf_path, prog_path
from test_trap_crash import end_early, finish_churn, finish_crash, left_in, maps_of, untraced

pytestmark = [pytest.mark.probetrap, pytest.mark.usefixtures("probes_ready")]

# (step, is the undo log still to be used there), in the end's order:
# user/trap/patch/end.c patch_teardown, core.c patch_write, user/session/session.c.
STEPS = [
    ("end-begin", True),       # every thread held, nothing undone yet
    ("end-restore:1", True),   # the first entry's bytes back, the second's not
    ("end-restored", True),    # every entry's bytes back, the log not cleared
    ("end-cleared", False),    # the log cleared
    ("end-unwound", False),    # no thread in the cache
    ("end-gs0", False),        # gs bases 0
    ("end-unmapped", False),   # the cache unmapped
    ("end-detached", False),   # every thread let go
]
# pt_churn long enough (~7 s here, 2 s on an idle host) to outlive the reads
# (under a second after its start), then told to end (SIGUSR1, as pt_crash).
# pt_short: pt_crash with a `traced` whose start takes a 2-byte jump to a
# trampoline in the nops before it (tests/progs/pt_short.c): both written
# back, in their order, at every step.
ARGS = {"pt_crash": ["3", "20000"], "pt_churn": ["3", "4000", "300"], "pt_short": ["3", "20000"]}


def killed_at(prog, step, outdir):
    argv = [prog_path(prog)] + ARGS[prog]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE)
    try:
        t0 = time.monotonic()
        while len(os.listdir("/proc/%d/task" % p.pid)) < 3 and time.monotonic() - t0 < 10:
            time.sleep(0.01)
        time.sleep(0.02)
        before = maps_of(p.pid)
        errpath = os.path.join(outdir, "%s-%s.err" % (prog, step.replace(":", "_")))
        with open(errpath, "w") as err:
            g = subprocess.run([gebpf_path(), "trace", "-v", "-p", str(p.pid), "--range", "traced",
                                "--trap", "patch", "--duration", "0.3",
                                "-o", os.path.join(outdir, "%s-%s.jsonl" % (prog, step))],
                               stdout=subprocess.DEVNULL, stderr=err, timeout=120,
                               env=dict(os.environ, GEBPF_TEST_KILL_AT=step))
        with open(errpath) as f:
            stderr = f.read()
        res = {"prog": prog, "step": step, "status": g.returncode,
               "detached": untraced(p.pid, 20),
               "undo": re.findall(r"the tracing process was killed: (\d+) of (\d+) patched "
                                  r"places written back(.*)", stderr),
               "stderr": stderr[-1500:]}
        res.update(left_in(p.pid, prog, before, stderr))
        if prog == "pt_churn":
            end_early(p)
            try:
                out, _ = p.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                res["result"] = "hung"
                return res
            return finish_churn(res, p, out, argv)
        return finish_crash(res, p, argv)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def wrong(r, logged):
    if r["status"] != -9:
        return "gebpf's status %s, not the worker's SIGKILL: the step was not reached" % r["status"]
    if logged and not (len(r["undo"]) == 1 and r["undo"][0][0] == r["undo"][0][1] != "0" and
                       not r["undo"][0][2]):
        return "written back: %r" % (r["undo"],)
    if not logged and r["undo"]:
        return "written back after the log was cleared: %r" % (r["undo"],)
    if r["text_restored"] is None:
        return "the program ended before its text was read"
    return ((not r["text_restored"] and "text not restored") or
            (not r["detached"] and "still traced") or
            (r["result"] != "ok" and r["result"]))


@pytest.mark.parametrize("prog", sorted(ARGS))
def test_worker_killed_at_each_step_of_the_end(prog, tmp_path):
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as ex:
        runs = list(ex.map(lambda s: killed_at(prog, s[0], str(tmp_path)), STEPS))
    bad = ["%s at %s: %s\n%s" % (prog, r["step"], wrong(r, logged), r["stderr"][-600:])
           for r, (_, logged) in zip(runs, STEPS) if wrong(r, logged)]
    assert not bad, "\n".join(bad)

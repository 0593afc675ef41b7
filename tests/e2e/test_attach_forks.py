"""Attach (-p) to a program whose range makes its own fork and vfork system
calls (tests/progs/jit_forks.c): the thread is often seized inside one, at
its fork/vfork event stop, where rax still holds -ENOSYS (the return value
is written at the call's exit).  Before, the code cache's injected mmap
restored those registers and the program's fork "failed" (checksum -1) in
4 of 15 runs under the translating engine.  Now every run leaves the
program printing the checksum its rounds make natively."""
import os
import re
import signal
import subprocess
import time

import pytest

from campaign import Campaign
from conftest import gebpf_path, prog_path

pytestmark = pytest.mark.usefixtures("trace_ready")

ROUNDS = "1000000"   # never reached: each run stops the program (SIGUSR1) once gebpf is gone


def forks_checksum(rounds, left):
    """What jit_forks R prints as its checksum when it ends with LEFT rounds
    left (tests/progs/jit_forks.c): round k (R down to LEFT+1) adds the
    loop's 2015000 and its child's exit status, 3 for a fork (k even), 5 for
    a vfork (k odd)."""
    done = rounds - left
    even = sum(1 for k in (rounds, left + 1) if k % 2 == 0)   # (the ends)
    evens = (done + even) // 2 if done else 0
    return 2015000 * done + 3 * evens + 5 * (done - evens)


def native_check(prog):
    """jit_forks' own checksum of a short native run is the formula's."""
    out = subprocess.run([prog, "300"], capture_output=True, text=True,
                         check=True).stdout.splitlines()[1]
    assert out == "checksum %d left 0" % forks_checksum(300, 0), out


def stop_and_read(p, pid, rounds):
    """Stop jit_forks (its next round's start; it runs on natively until
    then), read its last line; None when it is as forks_checksum says."""
    try:
        os.kill(pid, signal.SIGUSR1)
    except ProcessLookupError:
        pass
    out = p.stdout.read().strip()
    m = re.fullmatch(r"checksum (-?\d+) left (\d+)", out)
    if not m:
        return "printed %r" % out
    want = forks_checksum(rounds, int(m.group(2)))
    if int(m.group(1)) != want:
        return "checksum %s after %d rounds, natively %d" % (
            m.group(1), rounds - int(m.group(2)), want)
    return None


@pytest.mark.campaign
@pytest.mark.parametrize("args", [["--engine", "jit"], ["--trap", "pages"]],
                         ids=["jit", "trap-pages"])
def test_attach_in_a_fork_leaves_its_result(args, campaign, tmp_path):
    """15 attaches at a random moment 0-0.3 s into the program's forks (a
    campaign: campaign.py), three at a time; once gebpf has ended, the
    program is stopped (SIGUSR1) and its checksum must be what its rounds
    make natively."""
    prog = prog_path("jit_forks")
    native_check(prog)
    c = campaign(15)

    def run(seed):
        p = subprocess.Popen([prog, ROUNDS], stdout=subprocess.PIPE, text=True)
        try:
            pid = int(p.stdout.readline().split()[1])
            time.sleep(Campaign.rng(seed, *args).uniform(0, 0.3))
            g = subprocess.run([gebpf_path(), "trace", "-p", str(pid), "--range", "traced_forks",
                                "--duration", "0.5", "-o", str(tmp_path / ("t%d.jsonl" % seed))]
                               + args, capture_output=True, text=True, timeout=120)
            time.sleep(0.05)    # (a few rounds natively, detached)
            why = stop_and_read(p, pid, int(ROUNDS))
            p.wait(timeout=120)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        if why or p.returncode != 0 or g.returncode != 0:
            return "%s, exit %d, gebpf exit %d: %s" % (
                why, p.returncode, g.returncode, g.stderr.strip()[-200:])
        return None
    c.check({seed: why for seed, why in c.map(run, workers=3) if why})

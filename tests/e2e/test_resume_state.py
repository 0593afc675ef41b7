"""gebpf resume restores what a program notices of its kernel state (signal
handlers, queued signals, interval timers, umask, working directory, name,
resource limits), and a sleep cut by the snapshot sleeps only the time it had
left; snap_threads (a thread in sigsuspend, signalled back and forth) runs
on to "all handled"."""
import subprocess
import time

from conftest import prog_path, run_gebpf
from test_resume import resume, snap_running


def test_handlers_timer_umask_cwd_name_limits(gebpf, root, tmp_path):
    """resume_state waits for 40 alarms of a 20 ms ITIMER_REAL with a SIGALRM
    handler, then signals itself: the resumed process gets the rest of its
    alarms, runs its SIGUSR1 handler, receives the SIGUSR2 and the two
    SIGRTMIN (with their values) that were queued and blocked at the
    snapshot, and sees its umask, cwd, name and RLIMIT_NOFILE (not gebpf's)."""
    work = tmp_path / "wd"
    work.mkdir()
    s, rest = snap_running(tmp_path, [prog_path("resume_state"), str(work)], settle=0.2)
    assert rest == ("usr1 1 usr2 1 rt 3 umask 027 cwd %s name rs-state nofile 200 interval 20000\n"
                    % work)
    r = resume(s)
    assert (r.returncode, r.stdout) == (0, rest), r.stderr
    assert r.stderr == ""


def test_sleep_resumes_with_the_time_left(gebpf, root, tmp_path):
    """/bin/sleep 8 snapshotted about 4 s in sleeps the time it had left, as
    the kernel's restart of an interrupted nanosleep would, not 8 again.
    The bounds hold at any load: the snapshot's freeze fell between t_a and
    t_b, so what was left is at least 8 - t_b (no sleep ends early), and a
    sleep started again takes at least 8 s."""
    out = tmp_path / "sleep.core"
    t0 = time.monotonic()
    p = subprocess.Popen(["/bin/sleep", "8"], stdin=subprocess.DEVNULL)
    try:
        time.sleep(4.0)
        t_a = time.monotonic() - t0
        r = run_gebpf(["snap", "-p", str(p.pid), "-o", str(out)])
        t_b = time.monotonic() - t0
        assert r.returncode == 0, r.stderr
    finally:
        p.kill()
        p.wait()
    t1 = time.monotonic()
    r = resume(out)
    took = time.monotonic() - t1
    assert r.returncode == 0, r.stderr
    assert 8 - t_b - 0.05 < took < 8, (t_a, t_b, took)


def test_threads_in_sigsuspend_read_and_signals(gebpf, root, tmp_path):
    """snap_threads: main signals the catcher (in sigsuspend, SIGUSR1 blocked
    outside it) one signal at a time while compute runs and reader blocks in
    read on a pipe.  Resumed: the catcher's own mask (not sigsuspend's
    temporary one) and a signal it had queued are restored, so no wake-up is
    lost; the pipe, both of whose ends the process holds, is made again:
    the reader gets the main thread's byte as in the uninterrupted run."""
    s, rest = snap_running(tmp_path, [prog_path("snap_threads"), "800"], settle=0.3)
    assert rest.endswith("signals all handled\n"), rest
    r = resume(s)
    assert r.returncode == 0, r.stderr
    assert r.stdout == rest, r.stderr
    assert "reader R" in rest


def test_what_is_not_restored_is_said_on_one_line(gebpf, root, tmp_path):
    """A process with a child: the resumed one has none, and says so on one
    line (with the fds it could not reopen on lines of their own)."""
    out = tmp_path / "parent.core"
    p = subprocess.Popen(["/bin/sh", "-c", "/bin/sleep 5 & exec /bin/sleep 1"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        r = run_gebpf(["snap", "-p", str(p.pid), "-o", str(out)])
        assert r.returncode == 0, r.stderr
    finally:
        p.kill()
        p.wait()
    r = resume(out)
    assert r.returncode == 0, r.stderr
    lost = [l for l in r.stderr.splitlines() if "not restored" in l]
    assert lost == ["gebpf: warning: resume: not restored: 1 child process "
                    "(and any ptrace relation to them)"], r.stderr

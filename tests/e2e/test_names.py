"""Function names as gdb takes them (docs/trace.md "Ranges"): an IFUNC
(libc's strlen) names the implementation the process uses, a local
symbol of Debian's libc (__strlen_evex) comes from its separate debug
file (libc6-dbg), and a library without one says what to install.

name_strlen is a dynamic PIE calling strlen (tests/progs/name_strlen.c)
and lib/libnodbg.so, linked without a symbol table."""
import os
import re
import subprocess

import pytest

from conftest import prog_path, read_trace, run_gebpf

LIBC_DEBUG = "/usr/lib/debug/.build-id"


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def strlen_impl():
    """The strlen glibc 2.36's resolver picks on this CPU
    (sysdeps/x86_64/multiarch/ifunc-avx2.h)."""
    f = cpu_flags()
    if {"avx2", "bmi2"} <= f:
        if {"avx512vl", "avx512bw"} <= f:
            return "__strlen_evex"
        if "rtm" in f:
            return "__strlen_avx2_rtm"
        return "__strlen_avx2"
    return "__strlen_sse2"


@pytest.fixture(scope="module")
def libc_dbg():
    """libc6-dbg's debug file for this libc (scripts/packages.txt)."""
    r = subprocess.run(["readelf", "-n", "/lib/x86_64-linux-gnu/libc.so.6"],
                       capture_output=True, text=True)
    m = re.search(r"Build ID: ([0-9a-f]+)", r.stdout)
    path = m and os.path.join(LIBC_DEBUG, m.group(1)[:2], m.group(1)[2:] + ".debug")
    if not path or not os.path.exists(path):
        pytest.skip("libc6-dbg is not installed (scripts/deps installs it)")
    return path


def trace(tmp_path, name, rng, *args):
    out = tmp_path / (name + ".jsonl")
    r = run_gebpf(["trace", "-v", "--range", rng, "-o", out, *args], timeout=120)
    assert r.returncode == 0, r.stderr
    return r, read_trace(out)


def test_ifunc_and_its_implementation(trace_ready, libc_dbg, tmp_path):
    impl = strlen_impl()
    prog = prog_path("name_strlen")
    r1, (lines1, s1) = trace(tmp_path, "ifunc", "libc:strlen", "--", prog, "7")
    assert "is an IFUNC; pid %s uses %s " % (re.search(r"pid (\d+) uses", r1.stderr).group(1),
                                              impl) in r1.stderr, r1.stderr
    r2, (lines2, s2) = trace(tmp_path, "impl", "libc:" + impl, "--", prog, "7")
    # the same code, entered 7 times: the same bytes either way
    assert (s1["start"], s1["end"]) == (s2["start"], s2["end"])
    assert lines1 == lines2
    execs = [ln for ln in lines1 if ln["t"] == "exec"]
    assert execs and execs[0]["pc"] == s1["start"]
    assert sum(ln["pc"] == s1["start"] for ln in execs) == 7
    assert all(int(s1["start"], 16) <= int(ln["pc"], 16) <= int(s1["end"], 16) for ln in execs)


def test_ifunc_attached(trace_ready, libc_dbg, tmp_path):
    p = subprocess.Popen([prog_path("name_strlen"), "wait"], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        # strlen once a second: 4 s leave room for a slow set-up on a busy machine
        r, (lines, s) = trace(tmp_path, "attach", "libc:strlen", "-p", p.pid,
                              "--duration", "4")
        assert "uses %s " % strlen_impl() in r.stderr, r.stderr
        assert sum(ln["t"] == "exec" and ln["pc"] == s["start"] for ln in lines) >= 1
        assert p.poll() is None, "the attached process did not survive"
    finally:
        p.kill()
        p.wait()


def test_snap_at_ifunc(trace_ready, libc_dbg, tmp_path):
    out = tmp_path / "s.core"
    r = run_gebpf(["snap", "--at", "libc:strlen", "-o", out, "--", prog_path("name_strlen"), "1"])
    assert r.returncode == 0, r.stderr
    show = run_gebpf(["show", out])
    assert show.returncode == 0, show.stderr
    assert '"symbol":\t"%s+0x0"' % strlen_impl() in show.stdout, show.stdout[:3000]


def test_sample_range_ifunc(trace_ready, libc_dbg):
    # "wait": the command lives on until the sampling ends (a launched
    # command's libraries are looked for while it runs)
    r = run_gebpf(["sample", "-v", "--range", "libc:strlen", "--duration", "1.5", "--",
                   prog_path("name_strlen"), "wait"])
    assert r.returncode == 0, r.stderr
    assert "uses %s " % strlen_impl() in r.stderr, r.stderr


def test_missing_debug_file_says_what_to_install(trace_ready, tmp_path):
    lib = os.path.join(os.path.dirname(prog_path("name_strlen")), "lib", "libnodbg.so")
    r = run_gebpf(["trace", "--range", "libnodbg:helper_impl", "-o", tmp_path / "x.jsonl",
                   "--", prog_path("name_strlen"), "1"])
    assert r.returncode != 0
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1, err
    m = re.search(r"install its debug file as /usr/lib/debug/\.build-id/[0-9a-f]{2}/[0-9a-f]+\.debug",
                  err)
    assert m and "helper_impl" in err and os.path.realpath(lib) in err, err

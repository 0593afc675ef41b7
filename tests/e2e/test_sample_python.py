"""`gebpf sample`: Python frames in the native stacks (CPython 3.11 from its
table, 3.12 from its table, 3.13 from the interpreter's own debug offsets).

tests/progs/py_callmix.py runs three functions with known shares of its CPU
time (about 50/30/20, measured by the program itself) and one of them calls
hashlib, so libcrypto's frames sit below a Python frame."""
import glob
import json
import os
import re
import shutil
import subprocess

import pytest

import conftest
from sample_util import build_pprof, counts_line, need_bpf, parse_folded, sample

# Sampling counts samples of its targets' CPU time, which other tests
# running beside them take (at load 40: 9 samples where 100 were asked, BPF
# programs of another sampler counted as left over): these tests run alone,
# in scripts/test's serial part (docs/testing.md).
pytestmark = pytest.mark.serial

PY = "/usr/bin/python3.11"
CALLMIX = os.path.join(conftest.REPO, "tests", "progs", "py_callmix.py")
FUNCS = ["py_callmix.spin", "py_callmix.build", "py_callmix.digest"]
WARN = re.compile(r"^gebpf: warning: .*", re.M)


@pytest.fixture(scope="module")
def python(gebpf):
    need_bpf()
    if not os.path.exists(PY):
        pytest.skip("%s missing (Debian's python3.11)" % PY)
    return PY


def shares(rows):
    """{function: share of the samples that are in one of FUNCS} (inclusive)."""
    inc = dict.fromkeys(FUNCS, 0)
    total = 0
    for frames, count in rows:
        hit = [f for f in FUNCS if f in frames]
        if hit:
            total += count
            for f in hit:
                inc[f] += count
    assert total, rows[:5]
    return {f: inc[f] / total for f in FUNCS}, total


def run_callmix(tmp_path, extra=(), secs="4", prog_args=(), py=PY):
    out, ref = tmp_path / "py.folded", tmp_path / "ref.json"
    r = sample(["--folded", "-o", str(out)] + list(extra) +
               ["--", py, CALLMIX, secs, str(ref)] + list(prog_args))
    assert r.returncode == 0, r.stderr
    return r, parse_folded(out.read_text()), ref


def check_call_tree(r, rows, ref, version):
    """The shares of FUNCS within 5 points of the program's own, and 80% of
    the samples with the whole chain from Py_BytesMain to py_callmix.main in
    order; the number of samples."""
    got, total = shares(rows)
    want = json.loads(ref.read_text())
    print("%s: gebpf %s of %d samples; program's own %s" % (version, got, total, want))
    # a loaded machine gives the target less CPU, hence fewer samples
    assert total > 300, (total, r.stderr)
    for f in FUNCS:
        assert abs(got[f] - want[f.split(".")[1]]) <= 0.05, (f, got, want, total)
    all_ = sum(c for _, c in rows)
    chain = ["Py_BytesMain", "PyEval_EvalCode", "py_callmix.<module>", "py_callmix.main"]
    ok = sum(c for s, c in rows if all(x in s for x in chain) and
             [s.index(x) for x in chain] == sorted(s.index(x) for x in chain))
    assert ok >= 0.8 * all_, (ok, all_, rows[:5])
    return all_


def test_python_shares_match_the_known_call_tree(python, tmp_path):
    """Each function's share of the samples is its share of the program's
    own CPU time within 5 points; the whole stack reads native frames above
    (Py_BytesMain ... PyEval_EvalCode), the Python chain, native frames
    below; no interpreter frame is left in place of a Python one."""
    r, rows, ref = run_callmix(tmp_path)
    all_ = check_call_tree(r, rows, ref, "3.11")
    leftover = sum(c for s, c in rows if "_PyEval_EvalFrameDefault" in s)
    assert leftover <= 0.03 * all_, (leftover, all_, r.stderr)
    assert "warning" not in r.stderr, r.stderr


def interpreter(minor):
    """A CPython 3.MINOR on this machine (Debian's, or a pyenv build: this
    machine kind has 3.12 and 3.13), or None."""
    for path in ["/usr/bin/python3.%d" % minor, "/usr/local/bin/python3.%d" % minor] + sorted(
            glob.glob(os.path.expanduser("~/.pyenv/versions/3.%d.*/bin/python3.%d" %
                                         (minor, minor)))):
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


@pytest.mark.parametrize("minor", [12, 13])
def test_later_pythons_share_the_known_call_tree(python, minor, tmp_path):
    """3.12 (its own table: no is_entry, the C stack's shim frames mark each
    evaluation's first frame, the thread state found by native thread id)
    and 3.13 (the layout read from _Py_DebugOffsets at the start of
    _PyRuntime): the same shares and chain as 3.11's, the version named in
    -v, no interpreter frame left in place of a Python one."""
    py = interpreter(minor)
    if not py:
        pytest.skip("no CPython 3.%d here (Debian 12 has 3.11 only; pyenv's builds are "
                    "looked for under ~/.pyenv/versions)" % minor)
    r, rows, ref = run_callmix(tmp_path, extra=["-v"], py=py)
    assert re.search(r"Python 3\.%d\.\d+ \(.*\): Python frames on" % minor, r.stderr), r.stderr
    all_ = check_call_tree(r, rows, ref, "3.%d" % minor)
    # An interpreter frame left where the Python ones are named: the frame
    # chain read while the thread changes it (a call being linked: 1.6% of
    # 3.13's samples here, under imports), as for 3.11 above.  The samples
    # taken before the check passed (start-up, the first imports) keep
    # theirs: how many is a matter of load, not counted.
    leftover = sum(c for s, c in rows if "_PyEval_EvalFrameDefault" in s and
                   any(x.startswith("py_callmix.") for x in s))
    assert leftover <= 0.03 * all_, (leftover, all_, r.stderr)
    assert not WARN.findall(r.stderr), r.stderr


def test_libcrypto_frames_below_the_python_caller(python, tmp_path):
    """hashlib's C code and libcrypto appear below py_callmix.digest (and
    below <module> while `import hashlib` loads it), never above a Python
    frame of the program."""
    _, rows, _ = run_callmix(tmp_path, secs="3")
    below = 0
    for s, c in rows:
        crypto = [i for i, x in enumerate(s) if "libcrypto" in x or x.startswith("SHA256")]
        if not crypto:
            continue
        py = [i for i, x in enumerate(s) if x.startswith("py_callmix.")]
        if not py:
            continue    # OpenSSL's own start and exit handlers, outside Python
        assert max(py) < min(crypto), s
        if s[max(py)] == "py_callmix.digest":
            below += c
    assert below > 20, rows[:5]


def test_no_python_shows_native_frames_only(python, tmp_path):
    _, rows, _ = run_callmix(tmp_path, extra=["--no-python"], secs="2")
    assert not any(x.startswith("py_callmix.") for s, _ in rows for x in s), rows[:3]
    total = sum(c for _, c in rows)
    ev = sum(c for s, c in rows if "_PyEval_EvalFrameDefault" in s)
    assert ev >= 0.8 * total, (ev, total)


def test_forked_python_child_gets_python_frames(python, tmp_path):
    """The work runs in a child forked after sampling began (followed in the
    kernel): its samples get Python frames too, with the known shares."""
    _, rows, ref = run_callmix(tmp_path, secs="4", prog_args=["--fork"])
    got, total = shares(rows)
    want = json.loads(ref.read_text())
    assert total > 400, total
    for f in FUNCS:
        assert abs(got[f] - want[f.split(".")[1]]) <= 0.05, (f, got, want)


def test_threads_each_get_their_python_frames(python, tmp_path):
    """Two threads (spin, and digest with the GIL released in sha256): each
    thread's samples show its own function below threading's frames, under
    the thread's native start (clone3/start_thread), found through the
    interpreter's thread list when the thread does not hold the GIL."""
    out = tmp_path / "t.folded"
    r = sample(["--folded", "-o", str(out), "--", PY, CALLMIX, "--threads", "3"])
    assert r.returncode == 0, r.stderr
    rows = parse_folded(out.read_text())
    seen = dict.fromkeys(["py_callmix.spin", "py_callmix.digest"], 0)
    for s, c in rows:
        for f in seen:
            if f in s:
                assert "threading.Thread.run" in s and s.index("threading.Thread.run") < \
                    s.index(f), s
                assert not ("py_callmix.spin" in s and "py_callmix.digest" in s), s
                seen[f] += c
    assert all(v > 30 for v in seen.values()), (seen, rows[:5])
    crypto_under_digest = sum(c for s, c in rows if "py_callmix.digest" in s and
                              any("libcrypto" in x for x in s))
    assert crypto_under_digest > 20, rows[:5]


def test_embedded_libpython(python, tmp_path):
    """gdb runs the program in its embedded libpython3.11.so (mapped by
    ld.so after the exec): the same Python functions appear, under gdb's
    own native frames."""
    gdb = shutil.which("gdb")
    if not gdb or "libpython3.11" not in open(gdb, "rb").read().decode("latin-1"):
        pytest.skip("gdb with an embedded libpython3.11 missing")
    out = tmp_path / "gdb.folded"
    code = "import sys; sys.argv=['py_callmix.py','2']; exec(open(%r).read())" % CALLMIX
    r = sample(["-v", "--folded", "-o", str(out), "--", gdb, "-nx", "-batch", "-ex",
                "python " + code])
    assert r.returncode == 0, r.stderr
    assert "libpython3.11.so.1.0): Python frames on" in r.stderr, r.stderr
    rows = parse_folded(out.read_text())
    names = {x for s, _ in rows for x in s}
    # exec() of a string: the module is "<string>"
    for f in ("<string>.spin", "<string>.build", "<string>.digest"):
        assert f in names, sorted(n for n in names if "<string>" in n)


@pytest.fixture(scope="module")
def pprof_tool():
    return build_pprof()


def test_pprof_ranks_python_functions_with_file_and_line(python, pprof_tool, tmp_path):
    pb = tmp_path / "py.pb.gz"
    r = sample(["--pprof", str(pb), "--", PY, CALLMIX, "2"])
    assert r.returncode == 0, r.stderr
    top = subprocess.run([pprof_tool, "-top", "-nodecount=1000", "-nodefraction=0",
                          "-sample_index=samples", str(pb)], capture_output=True, text=True,
                         timeout=120)
    assert top.returncode == 0, top.stderr
    listed = [ln.split()[-1] for ln in top.stdout.splitlines() if ln.startswith(" ")]
    for f in FUNCS:
        assert f in listed, top.stdout
    # the hot line of spin() (s += i * i), by file and line
    src = open(CALLMIX).read().splitlines()
    line = 1 + next(i for i, ln in enumerate(src) if ln.strip() == "s += i * i")
    lines = subprocess.run([pprof_tool, "-top", "-lines", "-nodecount=1000",
                            "-nodefraction=0", str(pb)], capture_output=True, text=True,
                           timeout=120)
    assert re.search(r"py_callmix\.spin %s:%d\b" % (re.escape(CALLMIX), line), lines.stdout), \
        lines.stdout
    # start line of the function in the profile's function table
    raw = subprocess.run([pprof_tool, "-raw", str(pb)], capture_output=True, text=True,
                         timeout=120)
    start = 1 + next(i for i, ln in enumerate(src) if ln.startswith("def spin("))
    assert re.search(r"py_callmix\.spin \S+py_callmix\.py:\d+ s=%d\b" % start, raw.stdout), \
        raw.stdout[:3000]


def test_report_names_python_functions(python, tmp_path):
    rep = tmp_path / "r.txt"
    r = sample(["--report", "--top", "50", "-o", str(rep), "--", PY, CALLMIX, "2"])
    assert r.returncode == 0, r.stderr
    text = rep.read_text()
    funcs = text.split("# top functions")[1]
    assert "py_callmix.spin" in funcs and "py_callmix.build" in funcs, text
    assert re.search(r"python +py_callmix\.spin \(.*py_callmix\.py:\d+\)", text), text


def test_non_python_target_unchanged(python, tmp_path):
    """A C program: no warning, and the same stacks with and without
    --no-python (both reach the same leaf chain)."""
    chain = conftest.prog_path("unwind_chain")
    outs = []
    for extra in ([], ["--no-python"]):
        out = tmp_path / ("c%d.folded" % len(outs))
        r = sample(["--folded", "-o", str(out)] + extra + ["--", chain, "1"])
        assert r.returncode == 0, r.stderr
        assert not WARN.search(r.stderr), r.stderr
        rows = parse_folded(out.read_text())
        outs.append(max(rows, key=lambda x: x[1])[0])
        assert counts_line(r.stderr)["kept"] > 200
    assert outs[0] == outs[1], outs


def test_unknown_python_version_warns_once(python, tmp_path):
    """A process that looks like CPython 3.10 (tests/progs/python_oldver.c):
    native stacks and exactly one warning naming its pid and the version."""
    prog = conftest.prog_path("python_oldver")
    out = tmp_path / "o.folded"
    r = sample(["--folded", "-o", str(out), "--", prog, "1"])
    assert r.returncode == 0, r.stderr
    warns = WARN.findall(r.stderr)
    assert len(warns) == 1, r.stderr
    assert re.match(r"gebpf: warning: sample: pid \d+: Python frames off .*Python 3\.10",
                    warns[0]), warns
    rows = parse_folded(out.read_text())
    assert any(s[-2:] == ["main", "spin"] for s, _ in rows), rows[:3]

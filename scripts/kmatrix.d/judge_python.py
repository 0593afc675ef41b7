"""The kmatrix judge's check "python" (docs/kmatrix.md): Python frames in
the stacks of `gebpf sample -p PID --folded --pprof` of Debian 12's
python3.11 running progs/kmpy.py (issue 24).

gebpf names a CPython frame `module.qualname`, the module from the code
object's file name (kmpy.py: `kmpy`), and puts the Python frames a C call
of _PyEval_EvalFrameDefault runs in that native frame's place
(user/sample/pystack.h).  So a stack of kmpy reads, outermost
first:

    _start;...;PyEval_EvalCode;kmpy.<module>;kmpy.work;kmpy.sort;<the C
    sort, native>;kmpy.key;<native: int arithmetic>
    _start;...;kmpy.work;kmpy.digest;<_hashlib, libcrypto: SHA256_...>

The check passes when (all of):
  - gebpf exited 0, and kmpy then exited 0 printing "kmpy ok N";
  - the folded stacks hold every sample gebpf kept (its counts line);
  - the four functions work, sort, key and digest appear as Python frames;
  - Python frames interleave with native ones: a stack from _start whose
    first kmpy frame follows a native frame, with kmpy.sort, then at least
    one native frame (the C sort), then kmpy.key; and a stack with
    kmpy.digest followed by a libcrypto frame (SHA256_*, or the library's
    own name where it has no symbol);
  - at least MIN_SHARE of all the samples have a kmpy frame (the rest:
    the interpreter's own work between kmpy's frames);
  - the pprof profile has the same samples, and its kmpy frames name the
    file kmpy.py and a line inside their function.
"""
import ast
import os
import re

import pprof_decode

MODULE = "kmpy"
FUNCS = ("work", "sort", "key", "digest")
MIN_SHARE = 0.80
# Enough samples for the share above to mean something, not a rate: the
# guest runs at the lowest priority beside the host's tests (scripts/test),
# and a starved guest's 4 s gave kmpy 45 samples where an idle one gives
# about 2000 (the 6.12 guest of a clean CI run; 5.10 and 6.1 beside it 2010
# and 1897).
MIN_SAMPLES = 20
PY_RE = re.compile(r"^%s\.(<module>|[A-Za-z_][\w.]*)$" % MODULE)
CRYPTO_RE = re.compile(r"^SHA256|libcrypto")
COUNTS_RE = re.compile(r"sample: (\d+) kept, \d+ seen, \d+ filtered in the kernel, (\d+) lost")


def func_lines(src):
    """{qualname: (first line, last line)} of the functions of kmpy.py."""
    out = {}
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.FunctionDef):
            out[node.name] = (node.lineno, node.end_lineno)
    return out


def folded_rows(text):
    """[(frames outermost first, count)]; ValueError on a bad line."""
    rows = []
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit() or not stack:
            raise ValueError("python.folded: not a folded line: %.60r" % line)
        rows.append((stack.split(";"), int(n)))
    return rows


def is_py(frame):
    return bool(PY_RE.match(frame))


def interleaved_call(stack):
    """kmpy.sort, then native frames (at least one), then kmpy.key."""
    try:
        i = stack.index(MODULE + ".sort")
    except ValueError:
        return False
    j = i + 1
    while j < len(stack) and not is_py(stack[j]):
        j += 1
    return j > i + 1 and j < len(stack) and stack[j] == MODULE + ".key"


def native_below(stack):
    """kmpy.digest, then native frames only, one of them libcrypto's."""
    try:
        i = stack.index(MODULE + ".digest")
    except ValueError:
        return False
    below = stack[i + 1:]
    return not any(is_py(f) for f in below) and any(CRYPTO_RE.search(f) for f in below)


def rooted(stack):
    """A stack from _start whose first kmpy frame follows a native frame."""
    first = next((k for k, f in enumerate(stack) if is_py(f)), None)
    return stack[0] == "_start" and first is not None and first > 0


def judge(rdir, err, src):
    """The verdict ("pass"|"fail", why) for a run that exited 0: err is its
    stderr lines, src the text of kmpy.py."""
    st = (_read(os.path.join(rdir, "python.target")) or "").strip()
    out = (_read(os.path.join(rdir, "python.target.out")) or "").strip()
    if st != "0" or not re.fullmatch(r"kmpy ok \d+", out):
        return ("fail", "kmpy exited %s, printed %.40r, expected 'kmpy ok N'" % (st or "?", out))
    text = _read(os.path.join(rdir, "python.folded"))
    if text is None:
        return ("fail", "python.folded: no output file")
    try:
        rows = folded_rows(text)
    except ValueError as e:
        return ("fail", str(e))
    total = sum(n for _, n in rows)
    m = None
    for line in err:
        m = COUNTS_RE.search(line) or m
    if not m:
        return ("fail", "no counts line on stderr")
    if total != int(m.group(1)):
        return ("fail", "python.folded holds %d samples, counts say %s kept" % (total, m.group(1)))
    if total < MIN_SAMPLES:
        return ("fail", "only %d samples of python3.11 in 4 s at 499 Hz (want >= %d)"
                % (total, MIN_SAMPLES))
    py = sum(n for s, n in rows if any(is_py(f) for f in s))
    if py == 0:
        return ("fail", "no Python frame (%s.*) in %d samples: native stacks only; this gebpf "
                "does not show CPython 3.11's frames (issue 24)%s"
                % (MODULE, total, _warning(err)))
    seen = {f for s, _ in rows for f in s if is_py(f)}
    lack = [f for f in FUNCS if "%s.%s" % (MODULE, f) not in seen]
    if lack:
        return ("fail", "no %s frame in %d samples with Python frames"
                % (", ".join("%s.%s" % (MODULE, f) for f in lack), py))
    if not any(rooted(s) for s, _ in rows):
        return ("fail", "no stack from _start with native frames above the Python ones")
    if not any(interleaved_call(s) for s, _ in rows):
        return ("fail", "no stack %s.sort;<native: the C sort>;%s.key (Python frames are not "
                "placed among the native ones)" % (MODULE, MODULE))
    if not any(native_below(s) for s, _ in rows):
        return ("fail", "no stack %s.digest;...;<libcrypto> (native frames below a Python one)"
                % MODULE)
    if py < MIN_SHARE * total:
        return ("fail", "only %d of %d samples (%.0f%%) have a %s frame (want >= %.0f%%)"
                % (py, total, 100.0 * py / total, MODULE, 100 * MIN_SHARE))
    bad = judge_pprof(rdir, total, func_lines(src))
    if bad:
        return bad
    return ("pass", "%d of %d samples (%.0f%%) with kmpy frames, interleaved; pprof lines "
            "right" % (py, total, 100.0 * py / total))


def judge_pprof(rdir, total, lines):
    """The pprof profile: the folded samples, and each kmpy frame's file
    is kmpy.py and its line inside the function.  None, or the failure."""
    data = _read(os.path.join(rdir, "python.pb.gz"), "rb")
    if data is None:
        return ("fail", "python.pb.gz: no pprof output file")
    try:
        samples = pprof_decode.samples(data)
    except (OSError, EOFError, ValueError) as e:
        return ("fail", "python.pb.gz: not a gzipped profile.proto: %s" % e)
    n = sum(c for c, _ in samples)
    if n != total:
        return ("fail", "python.pb.gz holds %d samples, python.folded %d" % (n, total))
    named = 0
    for _, frames in samples:
        for name, file, line in frames:
            m = PY_RE.match(name)
            if not m or m.group(1) not in lines:
                continue
            lo, hi = lines[m.group(1)]
            if os.path.basename(file) != MODULE + ".py" or not lo <= line <= hi:
                return ("fail", "pprof: %s at %s:%d, expected %s.py:%d-%d"
                        % (name, file or "?", line, MODULE, lo, hi))
            named += 1
    if not named:
        return ("fail", "pprof: no %s function frames" % MODULE)
    return None


def _warning(err):
    """gebpf's last line about Python (-v: the frames turned on or off, and
    how many code objects it could not read), or its last warning."""
    w = ([l for l in err if l.startswith("gebpf:") and "Python" in l] or
         [l for l in err if l.startswith("gebpf:") and "warning" in l])
    return " (%s)" % w[-1] if w else ""


def _read(path, mode="r"):
    try:
        with open(path, mode) as f:
            return f.read()
    except OSError:
        return None

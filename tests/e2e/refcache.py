"""One run of each reference trace per test session, shared by the xdist
workers (docs/testing.md "How scripts/test runs the suite").

The reference of most trap tests is `--trap none` (everything
single-stepped), and it is the suite's costliest run: a dynamically linked
program's start-up alone is 10^5 steps (trap_dyn 50 200: 9 s of CPU, against
0.1 s under the probe trap).  Several tests compare against the same one
(test_probetrap's PAGETRAP_CASES are test_pagetrap's programs).  A launched
target runs with ASLR off and the environment given, so the same command
gives the same trace: the first test to need it runs it, the others copy
its file, stdout, stderr and status.  A multi-threaded program's run is one
of its valid orders, which the tests compare as multisets.

The cache is a directory the controller makes for the session
(GEBPF_REF_CACHE, set in pytest_configure before the workers start); a
command is keyed by its arguments (the output file by its suffix only), its
environment, and the size and mtime of gebpf and of the program.  A run
that fails is not kept.  GEBPF_REF_CACHE=off runs every reference."""
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time

ENV = "GEBPF_REF_CACHE"


def directory():
    d = os.environ.get(ENV, "")
    return d if d and d != "off" and os.path.isdir(d) else None


def _stat(path):
    try:
        st = os.stat(path)
        return [path, st.st_size, st.st_mtime_ns]
    except OSError:
        return [path, None, None]


def _key(argv, out, env, files):
    parts = [a if a != str(out) else "OUT" + os.path.splitext(str(out))[1] for a in map(str, argv)]
    blob = json.dumps([parts, sorted((env or os.environ).items()), [_stat(f) for f in files]])
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _note(d, what, secs):
    with open(os.path.join(d, "stats"), "a") as f:
        f.write("%s %.2f\n" % (what, secs))


def run(argv, out, files, do_run, env=None):
    """do_run() (a CompletedProcess of argv, writing OUT), or the kept result
    of the same command: OUT copied, the same stdout, stderr and status.
    FILES: what the result depends on besides argv (gebpf, the program)."""
    d = directory()
    if d is None:
        return do_run()
    key = os.path.join(d, _key(argv, out, env, files))
    with open(key + ".lock", "w") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)   # (a second worker waits for the first's run)
        if os.path.exists(key + ".json"):
            with open(key + ".json") as f:
                meta = json.load(f)
            if meta["out"]:
                shutil.copyfile(key + ".out", str(out))
            _note(d, "hit", meta["secs"])
            return subprocess.CompletedProcess(meta["args"], meta["rc"], meta["stdout"],
                                               meta["stderr"])
        t0 = time.monotonic()
        r = do_run()
        secs = time.monotonic() - t0
        _note(d, "miss", secs)
        if r.returncode == 0:
            has_out = os.path.exists(str(out))
            if has_out:
                shutil.copyfile(str(out), key + ".out.tmp")
                os.rename(key + ".out.tmp", key + ".out")
            with open(key + ".json.tmp", "w") as f:
                json.dump({"args": r.args, "rc": r.returncode, "stdout": r.stdout,
                           "stderr": r.stderr, "out": has_out, "secs": secs}, f)
            os.rename(key + ".json.tmp", key + ".json")
        return r


def summary(d):
    """'N runs kept, M copies (S s of runs not made)' for the session."""
    hits = misses = 0
    saved = 0.0
    try:
        with open(os.path.join(d, "stats")) as f:
            for line in f:
                what, secs = line.split()
                if what == "hit":
                    hits += 1
                    saved += float(secs)
                else:
                    misses += 1
    except OSError:
        return None
    return "%d reference runs made, %d copied (%.0f s of runs not made again)" % (
        misses, hits, saved)

"""`gebpf sample --pprof` details (the first mapping, build ids, caller
addresses) and continuous mode (`--every T --pprof-dir DIR`).

Profiles are decoded here with a small reader of profile.proto's wire format
(the fields used below), checked against the files themselves (readelf,
objdump, addr2line) and opened with Google's pprof."""
import datetime
import gzip
import os
import re
import signal
import socket
import subprocess
import time

import pytest
from elftools.elf.elffile import ELFFile

import conftest
from sample_util import build_pprof, need_bpf, sample

# Sampling counts samples of its targets' CPU time, which other tests
# running beside them take (at load 40: 9 samples where 100 were asked, BPF
# programs of another sampler counted as left over): these tests run alone,
# in scripts/test's serial part (docs/testing.md).
pytestmark = pytest.mark.serial

PY_HOT = os.path.join(conftest.REPO, "tests", "progs", "py_hot.py")
PYTHON = "/usr/bin/python3"


# ---- profile.proto, read from its wire format --------------------------------------------

def _varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def _fields(b):
    """(field number, value) of a message: ints for varints, bytes for
    length-delimited fields."""
    i, out = 0, []
    while i < len(b):
        key, i = _varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 2:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 1:
            v, i = int.from_bytes(b[i:i + 8], "little"), i + 8
        elif wt == 5:
            v, i = int.from_bytes(b[i:i + 4], "little"), i + 4
        else:
            raise AssertionError("wire type %d" % wt)
        out.append((num, v))
    return out


def _ints(v):
    """A repeated integer field: packed bytes or one varint."""
    if isinstance(v, int):
        return [v]
    i, out = 0, []
    while i < len(v):
        x, i = _varint(v, i)
        out.append(x)
    return out


def read_profile(path):
    with gzip.open(str(path), "rb") as f:
        top = _fields(f.read())
    strings = [v.decode() for n, v in top if n == 6]
    p = {"time": 0, "duration": 0, "mappings": [], "locations": {}, "functions": {},
         "samples": []}
    for n, v in top:
        if n == 9:
            p["time"] = v
        elif n == 10:
            p["duration"] = v
        elif n == 3:
            m = dict(_fields(v))
            p["mappings"].append({"id": m.get(1, 0), "start": m.get(2, 0), "limit": m.get(3, 0),
                                  "file": strings[m.get(5, 0)],
                                  "build_id": strings[m.get(6, 0)]})
        elif n == 4:
            f = _fields(v)
            d = dict(f)
            lines = [dict(_fields(x)) for k, x in f if k == 4]
            p["locations"][d.get(1)] = {"mapping": d.get(2, 0), "address": d.get(3, 0),
                                        "function": lines[0].get(1, 0) if lines else 0,
                                        "line": lines[0].get(2, 0) if lines else 0}
        elif n == 5:
            d = dict(_fields(v))
            p["functions"][d.get(1)] = strings[d.get(2, 0)]
        elif n == 2:
            f = _fields(v)
            locs = [x for k, y in f if k == 1 for x in _ints(y)]
            vals = [x for k, y in f if k == 2 for x in _ints(y)]
            p["samples"].append((locs, vals[0] if vals else 0))
    return p


def func_of(p, loc_id):
    return p["functions"].get(p["locations"][loc_id]["function"], "")


def leaf_counts(p):
    out = {}
    for locs, n in p["samples"]:
        if locs:
            f = func_of(p, locs[0])
            out[f] = out.get(f, 0) + n
    return out


@pytest.fixture(scope="module")
def pprof_tool():
    return build_pprof()


def pprof_opens(pprof, path):
    r = subprocess.run([pprof, "-top", str(path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (path, r.stderr)
    return r.stdout


def file_build_id(path):
    """The GNU build id of an ELF file per `readelf -n`, or None."""
    r = subprocess.run(["readelf", "-n", path], capture_output=True, text=True)
    m = re.search(r"Build ID: ([0-9a-f]+)", r.stdout)
    return m.group(1) if m else None


# ---- the first mapping, build ids, caller addresses -------------------------------------

def test_first_mapping_is_the_executable_every_run(gebpf, pprof_tool, tmp_path):
    """python3 maps python3.11, libc, libm, ld.so: two runs both put the
    executable first (pprof's File:)."""
    need_bpf()
    exe = os.path.realpath(PYTHON)
    for i in range(2):
        pb = tmp_path / ("p%d.pb.gz" % i)
        r = sample(["--pprof", pb, "--", PYTHON, PY_HOT, "1"])
        assert r.returncode == 0, r.stderr
        p = read_profile(pb)
        assert p["mappings"][0]["file"] == exe, [m["file"] for m in p["mappings"]]
        assert "File: %s\n" % os.path.basename(exe) in pprof_opens(pprof_tool, pb)


def check_build_ids(p):
    """Every mapping of a file that has a build id carries that build id."""
    checked = 0
    for m in p["mappings"]:
        if not m["file"].startswith("/") or not os.path.isfile(m["file"]):
            continue
        want = file_build_id(m["file"])
        if want:
            assert m["build_id"] == want, m
            checked += 1
    return checked


def test_every_mapping_has_its_build_id(gebpf, tmp_path):
    need_bpf()
    pb = tmp_path / "p.pb.gz"
    r = sample(["--pprof", pb, "--", PYTHON, PY_HOT, "1"])
    assert r.returncode == 0, r.stderr
    p = read_profile(pb)
    assert check_build_ids(p) >= 3, p["mappings"]
    assert any("libc.so" in m["file"] for m in p["mappings"]), p["mappings"]


def test_whole_system_build_ids_with_short_lived_processes(gebpf, tmp_path):
    """-a while processes start and exit all the time (their maps are read
    while they exit): every mapping of a file with a build id has it."""
    need_bpf()
    pb = tmp_path / "a.pb.gz"
    churn = subprocess.Popen(["/bin/sh", "-c", "while :; do %s -c 'import hashlib'; "
                              "ls /usr/lib >/dev/null; done" % PYTHON])
    try:
        r = sample(["-a", "--pprof", pb, "--duration", "3"])
    finally:
        churn.kill()
        churn.wait()
    assert r.returncode == 0, r.stderr
    assert check_build_ids(read_profile(pb)) >= 5


def first_load_vaddr(path):
    with open(path, "rb") as f:
        return min(s["p_vaddr"] & ~0xFFF for s in ELFFile(f).iter_segments()
                   if s["p_type"] == "PT_LOAD")


def instructions(path, start, stop):
    """{address: (length, text)} of objdump -d over [start, stop)."""
    r = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "--start-address=%#x" % start,
                        "--stop-address=%#x" % stop, path], capture_output=True, text=True)
    rows = []
    for ln in r.stdout.splitlines():
        m = re.match(r"\s*([0-9a-f]+):\s+(\S.*)$", ln)
        if m:
            rows.append((int(m.group(1), 16), m.group(2)))
    return {a: (rows[i + 1][0] - a if i + 1 < len(rows) else None, t)
            for i, (a, t) in enumerate(rows)}


def test_caller_locations_are_the_call_instruction(gebpf, tmp_path):
    """unwind_chain's callers (chain1..chain5, main): each caller location's
    address + 1 is a return address (it follows a call instruction, whose
    last byte the address is) and its line is the call's line; the leaf's
    address is an instruction's start."""
    need_bpf()
    chain = conftest.prog_path("unwind_chain")
    pb = tmp_path / "c.pb.gz"
    r = sample(["--pprof", pb, "--", chain, "1"])
    assert r.returncode == 0, r.stderr
    p = read_profile(pb)
    maps = {m["id"]: m for m in p["mappings"]}
    exe = os.path.realpath(chain)
    callers, leaves = set(), set()
    for locs, _ in p["samples"]:
        for k, lid in enumerate(locs):
            loc = p["locations"][lid]
            m = maps.get(loc["mapping"])
            if m and m["file"] == exe and func_of(p, lid).startswith(("chain", "main")):
                (leaves if k == 0 else callers).add(lid)
    assert len(callers) >= 5, callers
    base = first_load_vaddr(exe)
    for lid in callers:
        loc = p["locations"][lid]
        m = maps[loc["mapping"]]
        a = loc["address"] - m["start"] + base
        insns = instructions(exe, a - 16, a + 16)
        calls = [x for x, (n, t) in insns.items() if n and x <= a < x + n]
        assert calls, (hex(a), insns)
        x = calls[0]
        assert x + insns[x][0] == a + 1 and insns[x][1].startswith("call"), (hex(a), insns[x])
        out = subprocess.run(["addr2line", "-e", exe, "%#x" % a], capture_output=True,
                             text=True).stdout
        # addr2line may add " (discriminator N)" after FILE:LINE
        where = out.split(" (discriminator")[0].strip()
        assert where.endswith(":%d" % loc["line"]), (hex(a), out, loc)
    for lid in leaves:
        loc = p["locations"][lid]
        a = loc["address"] - maps[loc["mapping"]]["start"] + base
        assert a in instructions(exe, a, a + 16), hex(a)


# ---- continuous mode ---------------------------------------------------------------------

HOST = re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname())
NAME = re.compile(r"^%s-(\d{8}T\d{6}Z)\.pb\.gz$" % re.escape(HOST))


def profiles(d):
    return sorted(f for f in os.listdir(str(d)) if NAME.match(f))


def expected_shares(t0_ns, dur_ns):
    """Shares of phase0..3 of sample_phases over [t0, t0 + dur): phase i runs
    while the wall clock's whole second s has s % 4 == i."""
    share = [0.0] * 4
    t, end = t0_ns / 1e9, (t0_ns + dur_ns) / 1e9
    while t < end:
        nxt = min(end, float(int(t) + 1))
        share[int(t) % 4] += nxt - t
        t = nxt
    total = sum(share) or 1
    return [s / total for s in share]


def test_every_writes_one_profile_per_period(gebpf, pprof_tool, tmp_path):
    need_bpf()
    d = tmp_path / "profiles"
    d.mkdir()
    r = sample(["--every", "1s", "--duration", "3.5", "--pprof-dir", d, "--",
                conftest.prog_path("sample_phases"), "10"])
    assert r.returncode == 0, r.stderr
    names = profiles(d)
    assert sorted(os.listdir(str(d))) == names, "temporary or other files left: %s" % os.listdir(str(d))
    assert 3 <= len(names) <= 4, names
    ps = [read_profile(d / n) for n in names]
    for i, (n, p) in enumerate(zip(names, ps)):
        pprof_opens(pprof_tool, d / n)
        stamp = datetime.datetime.fromtimestamp(p["time"] // 10**9, datetime.timezone.utc)
        assert NAME.match(n).group(1) == stamp.strftime("%Y%m%dT%H%M%SZ"), (n, p["time"])
        if i:
            assert p["time"] - ps[i - 1]["time"] == 10**9
        last = i == len(ps) - 1
        assert (0 < p["duration"] <= 10**9) if last else p["duration"] == 10**9, p["duration"]
        # Samples from this period only: the phase shares of the period.
        c = leaf_counts(p)
        got = [c.get("phase%d" % k, 0) for k in range(4)]
        if sum(got) < 100:
            continue
        want = expected_shares(p["time"], p["duration"])
        for k in range(4):
            assert abs(got[k] / sum(got) - want[k]) <= 0.15, (n, got, want)
        top = max(range(4), key=lambda k: got[k])
        if max(want) >= 0.7:
            assert top == max(range(4), key=lambda k: want[k]), (n, got, want)


def test_keep_leaves_the_newest(gebpf, tmp_path):
    need_bpf()
    d = tmp_path / "profiles"
    d.mkdir()
    other = d / "otherhost-20000101T000000Z.pb.gz"
    other.write_bytes(b"")
    r = sample(["-v", "--every", "1", "--duration", "4.5", "--keep", "2", "--pprof-dir", d,
                "--", conftest.prog_path("sample_phases"), "10"])
    assert r.returncode == 0, r.stderr
    wrote = [os.path.basename(x) for x in re.findall(r"wrote (\S+)", r.stderr)]
    assert len(wrote) >= 4, r.stderr
    assert profiles(d) == sorted(wrote)[-2:], (profiles(d), wrote)
    assert other.exists(), "another host's file was removed"


def test_max_age_removes_old_profiles_of_this_host(gebpf, tmp_path):
    need_bpf()
    d = tmp_path / "profiles"
    d.mkdir()
    old = d / ("%s-20000101T000000Z.pb.gz" % HOST)
    other = d / "notes.txt"
    old.write_bytes(b"")
    other.write_text("x")
    r = sample(["--every", "1", "--duration", "1.5", "--max-age", "1h", "--pprof-dir", d,
                "--", conftest.prog_path("sample_phases"), "10"])
    assert r.returncode == 0, r.stderr
    assert not old.exists(), os.listdir(str(d))
    assert other.exists() and len(profiles(d)) >= 1, os.listdir(str(d))


def test_sigterm_writes_the_partial_period(gebpf, tmp_path):
    """SIGTERM half-way through the second period: both periods written, the
    second one partial.  The SIGTERM waits for the first profile (it came 3 s
    after the start: under load gebpf's set-up took most of the first second,
    and the partial period was a few ms with no sample in it), and a busy
    program of ours runs all along, so every period has samples."""
    need_bpf()
    d = tmp_path / "profiles"
    d.mkdir()
    busy = subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"])
    try:
        g = subprocess.Popen([gebpf, "sample", "-a", "--every", "2s", "--pprof-dir", str(d)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=conftest.stable_env())
        end = time.monotonic() + 60
        while not profiles(d) and g.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(1)
        g.send_signal(signal.SIGTERM)
        _, err = g.communicate(timeout=60)
    finally:
        busy.kill()
        busy.wait()
    assert g.returncode == 0, err
    ps = [read_profile(d / n) for n in profiles(d)]
    assert len(ps) >= 2, os.listdir(str(d))
    assert ps[0]["duration"] == 2 * 10**9 and 0 < ps[-1]["duration"] < 2 * 10**9, \
        [p["duration"] for p in ps]
    assert all(p["samples"] for p in ps)


def test_forgets_exited_processes(gebpf, tmp_path):
    """-a over short-lived processes: the unwinder forgets those gone (memory
    stays bounded), and their profiles still name their frames."""
    need_bpf()
    d = tmp_path / "profiles"
    d.mkdir()
    churn = subprocess.Popen(["/bin/sh", "-c", "while :; do %s -c 'import hashlib'; done"
                              % PYTHON])
    try:
        r = sample(["-v", "-a", "--every", "1", "--duration", "4", "--pprof-dir", d])
    finally:
        churn.kill()
        churn.wait()
    assert r.returncode == 0, r.stderr
    gone = [int(x) for x in re.findall(r"(\d+) exited processes forgotten", r.stderr)]
    # (at least one: how many of the churn's processes a 4 s run sees is a
    # rate; 2 at load 14, the ring losing 5,831 samples)
    assert sum(gone) >= 1, r.stderr[-2000:]
    # -v gives the agent's own resident size and how many processes its
    # unwinder holds, at each period's end
    held = re.findall(r"gebpf's resident size ([\d.]+) MiB, (\d+) processes known", r.stderr)
    assert held and all(float(m) > 0 for m, _ in held), r.stderr[-2000:]
    # A period whose every sample came from processes that exited before
    # their maps were read has no mapping to name (CI's run of 67956a3 under
    # load: one such profile); the others must name theirs.
    names = profiles(d)
    named = sum(check_build_ids(read_profile(d / n)) >= 1 for n in names)
    assert named >= max(1, len(names) - 1), "%d of %d profiles name their mappings" % (
        named, len(names))


def test_full_disk_drops_periods_goes_on_and_fails(gebpf, tmp_path):
    """A profile that cannot be written (a 4 KiB tmpfs; the profiles of a
    busy python3, with its interpreter's names, are larger) is reported, sampling goes on to the next period, no
    temporary file stays, and the run exits 1 saying how many were not
    written."""
    need_bpf()
    d = tmp_path / "small"
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(d)],
                       capture_output=True, text=True)
    if r.returncode:
        pytest.skip("cannot mount a small tmpfs: " + r.stderr.strip())
    try:
        # a target of its own, busy all along (-a on an idle machine had
        # profiles small enough to fit)
        r = sample(["--every", "1", "--duration", "3.5", "--pprof-dir", d, "--",
                    "/usr/bin/python3", "-c", "while True: pass"])
        listing = os.listdir(str(d))
    finally:
        subprocess.run(["umount", str(d)])
    assert r.returncode == 1, r.stderr
    failed = [ln for ln in r.stderr.splitlines() if "No space left on device" in ln]
    m = re.search(r"gebpf: sample: --pprof-dir \S+: (\d+) of (\d+) profiles not written",
                  r.stderr)
    assert m and int(m.group(1)) == len(failed) >= 1 and int(m.group(2)) >= 3, r.stderr
    # Only whole profiles under their final names (those that fitted).
    assert sorted(listing) == sorted(f for f in listing if NAME.match(f)), listing
    assert len(listing) == int(m.group(2)) - int(m.group(1)), (listing, r.stderr)


@pytest.mark.parametrize("args, why", [
    (["--every", "0"], "--every 0"),
    (["--every", "x"], "--every x"),
    (["--every", "0.5"], "at least 1s"),
    (["--every", "1s"], "needs both"),
    (["--pprof-dir", "."], "needs both"),
    (["--every", "1", "--pprof-dir", "/etc/hostname"], "not a directory"),
    (["--every", "1", "--pprof-dir", "/nonexistent-dir"], "No such file"),
    (["--every", "1", "--pprof-dir", ".", "--keep", "0"], "--keep 0"),
    (["--every", "1", "--pprof-dir", ".", "--max-age", "-1"], "--max-age -1"),
    (["--every", "1", "--pprof-dir", ".", "--pprof", "x.pb.gz"], "not with --pprof"),
    (["--every", "1", "--pprof-dir", ".", "--folded"], "not with --pprof"),
])
def test_bad_continuous_options(gebpf, tmp_path, args, why):
    r = conftest.run_gebpf(["sample", "-a"] + args, cwd=str(tmp_path))
    assert r.returncode == 2, r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gebpf: sample: ") and why in lines[0], lines
    assert os.listdir(str(tmp_path)) == []

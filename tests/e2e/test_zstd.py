"""Compressed traces (issue 22; docs/trace-format.md "Compressed traces"):
`-o FILE.jsonl.zst` decompressed by the zstd CLI is byte for byte the plain
trace; frames end at line ends with the summary in a frame of its own and a
seek table last; `zstdcat | python3` reads it; a SIGKILLed gebpf leaves a
file zstd reads up to its last frame; a full disk keeps a valid file ending
in the summary; gebpf.Trace reads it.  And the budget's one warning."""
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time

import pytest

from conftest import gebpf_path, output_grew, prog_path, read_trace, stable_env, trace_summary

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import gebpf as gp  # noqa: E402

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


@pytest.fixture(scope="module")
def zstd_cli():
    if not shutil.which("zstd"):
        pytest.skip("the zstd CLI is not installed (scripts/packages.txt)")
    return "zstd"


def trace(out, argv, *opts, timeout=300):
    r = subprocess.run([gebpf_path(), "trace", "--range", "traced"] + list(opts)
                       + ["-o", str(out), "--"] + argv, capture_output=True, text=True,
                       env=stable_env(), timeout=timeout)
    return r


def unzstd(path):
    r = subprocess.run(["zstd", "-dc", "--", str(path)], capture_output=True, timeout=120)
    return r.returncode, r.stdout, r.stderr.decode()


def frames(data):
    """[(offset, size)] of the zstd frames of data, by the seek table at its
    end (parsed here from zstd's documented seekable format), and the
    table's entries [(compressed, decompressed)]."""
    n, desc, magic = struct.unpack("<IBI", data[-9:])
    assert magic == 0x8F92EAB1, "no seek table footer"
    assert desc == 0
    size = 8 + 8 * n + 9
    skip, fsize = struct.unpack("<II", data[-size:-size + 8])
    assert skip == 0x184D2A5E and fsize == size - 8
    ents = [struct.unpack_from("<II", data, len(data) - size + 8 + 8 * i) for i in range(n)]
    assert sum(c for c, _ in ents) + size == len(data), "the frames fill the file"
    offs, at = [], 0
    for c, _ in ents:
        assert data[at:at + 4] == ZSTD_MAGIC
        offs.append((at, c))
        at += c
    return offs, ents


@pytest.mark.parametrize("engine", ["jit", "step"])
def test_zst_is_the_plain_trace(trace_ready, zstd_cli, tmp_path, engine):
    """The same deterministic program traced plain and to .jsonl.zst:
    `zstd -d` gives the plain file byte for byte; every frame but the last
    ends at a line end after ~4 MiB, the last holds the summary alone."""
    n = "5000" if engine == "jit" else "300"
    argv = [prog_path("spin"), n, "0"]
    plain, z = tmp_path / "t.jsonl", tmp_path / "t.jsonl.zst"
    for out in (plain, z):
        r = trace(out, argv, "--engine", engine, "--max-events", "0")
        assert r.returncode == 0, r.stderr
    data = z.read_bytes()
    assert data[:4] == ZSTD_MAGIC
    rc, dec, err = unzstd(z)
    assert rc == 0, err
    want = plain.read_bytes()
    assert len(dec) == len(want) and dec == want
    trace_summary(z)
    offs, ents = frames(data)
    if engine == "jit":  # ~19 MB of lines in well under a second: 4 MiB frames
        assert len(offs) >= 5 and all(d >= 4 << 20 for _, d in ents[:4]), ents
    # each frame alone decompresses to whole lines, in order (the step
    # engine's slower lines: frames ended by the one-second clock)
    pos = 0
    for (at, c), (_, d) in zip(offs, ents):
        body = subprocess.run(["zstd", "-dc"], input=data[at:at + c], capture_output=True).stdout
        assert len(body) == d and d < (4 << 20) + 200, d
        assert body.endswith(b"\n") and want[pos:pos + d] == body
        pos += d
    assert pos == len(want)
    assert json.loads(body) == json.loads(want.splitlines()[-1]) and body.count(b"\n") == 1


def test_compress_option_and_pipes(trace_ready, zstd_cli, tmp_path):
    """--compress zstd to a pipe (stdout; hot_loop prints nothing): zstd
    reads it, the same bytes as -o FILE; --compress none to FILE.zst: plain
    lines; zstdcat piped into python3's json reads every line."""
    hl = [prog_path("hot_loop")]
    plain = tmp_path / "h.jsonl"
    r = subprocess.run([gebpf_path(), "trace", "--range", "hot", "-o", str(plain), "--"] + hl,
                       capture_output=True, env=stable_env(), timeout=300)
    assert r.returncode == 0, r.stderr
    g = subprocess.Popen([gebpf_path(), "trace", "--range", "hot", "--compress", "zstd", "--"] + hl,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=stable_env())
    d = subprocess.run(["zstd", "-dc"], stdin=g.stdout, capture_output=True, timeout=300)
    g.stdout.close()
    assert g.wait(timeout=60) == 0, g.stderr.read()
    assert d.returncode == 0, d.stderr
    assert d.stdout == plain.read_bytes()
    argv = [prog_path("spin"), "2000", "0"]
    plain = tmp_path / "t.jsonl"
    assert trace(plain, argv, "--max-events", "0").returncode == 0
    nz = tmp_path / "n.jsonl.zst"
    assert trace(nz, argv, "--max-events", "0", "--compress", "none").returncode == 0
    assert nz.read_bytes() == plain.read_bytes()
    z = tmp_path / "t.jsonl.zst"
    assert trace(z, argv, "--max-events", "0").returncode == 0
    r = subprocess.run("zstdcat %s | /usr/bin/python3 -c 'import json, sys\n"
                       "n = 0\nfor line in sys.stdin:\n    json.loads(line); n += 1\nprint(n)'"
                       % z, shell=True, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == len(plain.read_bytes().splitlines())


def test_compress_refuses_other_values(gebpf):
    r = subprocess.run([gebpf, "trace", "--compress", "gzip", "--range", "traced", "--",
                        prog_path("spin")], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert r.stderr.strip() == "gebpf: trace: --compress: expected zstd or none", r.stderr


def check_killed_file(z, min_lines):
    """A .zst left by a SIGKILLed gebpf: zstd reads it to its last whole
    frame (exit 0 when the kill fell between frames, else a premature end
    on the cut frame), every line it gives before that is whole JSON, and
    gebpf.Trace gives the same whole lines."""
    rc, dec, err = unzstd(z)
    lines = dec.split(b"\n")
    if rc == 0:
        assert dec.endswith(b"\n"), dec[-100:]
        lines = lines[:-1]
    else:
        # a frame cut by the kill (a write that was in flight)
        assert re.search(r"premature end|truncated|Read error", err), err
        lines = lines[:-1]  # what the cut frame decoded may end inside a line
    assert len(lines) >= min_lines, (len(lines), err)
    for raw in lines[:2000] + lines[-2000:]:
        assert json.loads(raw)["t"] in ("exec", "read", "write"), raw
    assert all(raw.startswith(b"{") and raw.endswith(b"}") for raw in lines)
    tr = gp.Trace.open(str(z))
    got = sum(1 for _ in tr)
    assert got >= len(lines) and tr.summary is None
    return len(lines)


def children(pid):
    kids = []
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                kids += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return kids


@pytest.mark.parametrize("sleep_us", [0, 20000], ids=["fast", "slow"])
def test_sigkill_leaves_a_readable_file(trace_ready, zstd_cli, tmp_path, sleep_us):
    """gebpf, its worker (the writer) and the launched spin SIGKILLed at once
    mid-trace: the file decompresses up to its last frame.  Fast lines fill
    4 MiB frames, killed once the file holds 1 MB (about a dozen frames,
    ~200 written a second: the kill still falls at any point of one; 2.5 s
    of them were 30 million lines that took 90 s to check); slow ones (a
    call every 20 ms: ~100 kB of lines a second), killed 1.5 s after the
    first frame reached the file, reach it because a frame ends at least
    every second."""
    z = tmp_path / "t.jsonl.zst"
    g = subprocess.Popen([gebpf_path(), "trace", "--range", "traced", "--max-events", "0",
                          "-o", str(z), "--", prog_path("spin"), "100000000", str(sleep_us)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=stable_env(),
                         start_new_session=True)
    kids = []
    try:
        assert g.stdout.readline() == b"ready\n"
        if sleep_us:
            # (its first frame in the file, then 1.5 s more: a frame ends
            # at least every second, so the kill falls after a later one;
            # a fixed 2.5 s from the start fell before the first on a
            # loaded machine, the file still empty)
            assert output_grew(z, g, 4), "no frame written"
            time.sleep(1.5)
        else:
            assert output_grew(z, g, 1 << 20), "the trace did not reach 1 MB"
        kids = children(g.pid)
        kids += [k for w in kids for k in children(w)]
        assert kids, "no worker"
        os.killpg(g.pid, signal.SIGKILL)
        g.wait()
        assert z.exists(), g.stderr.read()
        assert z.read_bytes()[:4] == ZSTD_MAGIC
        check_killed_file(z, 1000 if sleep_us else 50000)
    finally:
        for pid in [g.pid] + kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        g.wait()


def test_disk_full_keeps_whole_frames_and_the_summary(trace_ready, zstd_cli, tmp_path):
    """A 512 KiB tmpfs and ~2 MB of compressed trace: the write that does not
    fit is cut back to the last whole frame, the summary still ends the file
    in its own frame, the lines lost are counted in "dropped" (events =
    lines in the file + dropped), and zstd reads the whole file."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if m.returncode != 0:
        pytest.skip("cannot mount a tmpfs: %s" % m.stderr.strip())
    try:
        z = mnt / "t.jsonl.zst"
        r = trace(z, [prog_path("spin"), "20000", "0"], "--max-events", "0")
        assert r.returncode == 1, r.stderr
        errs = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert len(errs) == 1 and errs[0].startswith("gebpf: %s: " % z), r.stderr
        assert re.search(r"No space left on device: [0-9]+ lines dropped$", errs[0]), errs[0]
        rc, dec, err = unzstd(z)
        assert rc == 0, err
        lines, summary = read_trace(z)  # events == lines + dropped, summary last
        assert summary["dropped"] > 0 and len(lines) > 100000, (len(lines), summary)
        offs, ents = frames(z.read_bytes())
        assert len(offs) >= 2
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_python_reads_zst_traces(trace_ready, zstd_cli, tmp_path):
    """gebpf.Trace on a .zst trace gives the plain trace's records and
    summary (the summary by the seek table); on a copy cut inside a frame,
    the whole lines before the cut and truncated set."""
    argv = [prog_path("spin"), "3000", "0"]
    plain, z = tmp_path / "t.jsonl", tmp_path / "t.jsonl.zst"
    for out in (plain, z):
        assert trace(out, argv, "--max-events", "0").returncode == 0
    tp, tz = gp.Trace.open(str(plain)), gp.Trace.open(str(z))
    assert tz.compressed and not tp.compressed
    assert tz.summary == tp.summary and tz.summary["t"] == "summary"
    assert list(tz) == list(tp) and not tz.truncated
    data = z.read_bytes()
    offs, ents = frames(data)
    cut = tmp_path / "cut.jsonl.zst"
    at, c = offs[1]
    cut.write_bytes(data[:at + c // 2])
    tc = gp.Trace.open(str(cut))
    recs = list(tc)
    assert tc.truncated and tc.summary is None
    want = plain.read_bytes().splitlines()
    assert len(recs) >= ents[0][1] // 100
    assert recs == [json.loads(x) for x in want[:len(recs)]]


def test_budget_is_said_once(trace_ready, tmp_path):
    """--max-events N reached: one warning line on stderr, naming N, the vt
    of the first line dropped and --max-events 0; the trace's lines are the
    first N of the unlimited trace; stdout holds only the program's own
    output."""
    argv = [prog_path("spin"), "100", "0"]
    full, cut = tmp_path / "full.jsonl", tmp_path / "cut.jsonl"
    r = trace(full, argv, "--max-events", "0")
    assert r.returncode == 0 and "max-events" not in r.stderr, r.stderr
    r = trace(cut, argv, "--max-events", "1000")
    assert r.returncode == 0, r.stderr
    fl = full.read_text().splitlines()
    cl = cut.read_text().splitlines()
    assert cl[:-1] == fl[:1000]
    vt = json.loads(fl[1000])["vt"]
    errs = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert errs == ["gebpf: warning: trace: --max-events 1000 reached at vt %d: further lines are "
                    "counted as dropped (--max-events 0 for no limit)" % vt], r.stderr
    assert [x for x in r.stdout.splitlines() if not x.startswith(("ready", "checksum"))] == []
    s = json.loads(cl[-1])
    assert s["dropped"] == len(fl) - 1 - 1000

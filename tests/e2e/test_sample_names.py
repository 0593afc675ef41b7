"""Real services by name (docs/sample.md "Names"): JIT code named from the
runtime's perf map (node --perf-basic-prof writes /tmp/perf-PID.map), and
C++ names demangled in --folded and pprof (the mangled name kept as pprof's
system_name), on node itself: its JavaScript runs in V8's JIT code and its
own frames are C++ (node::Start)."""
import os
import shutil
import subprocess
import time

import pytest

import conftest
from sample_util import need_bpf, sample
from test_sample_pprof import _fields, read_profile

# (sampling: alone, as every sampling module; docs/testing.md)
pytestmark = pytest.mark.serial

NODE = shutil.which("node") or "/usr/bin/node"
HOT_JS = """
function hotLoopForGebpf(n) { let s = 0; for (let i = 0; i < n; i++) { s = (s * 31 + i) | 0; } return s; }
let t = 0; const end = Date.now() + %d;
while (Date.now() < end) { t ^= hotLoopForGebpf(100000); }
console.log("done", t);
"""


def need_node():
    if not os.path.exists(NODE):
        pytest.skip("no node (Debian's nodejs: scripts/packages.txt)")


def start_node(tmp_path, ms, prefix=()):
    js = tmp_path / "hot.js"
    js.write_text(HOT_JS % ms)
    # (in tmp_path: node's V8 writes an isolate-*-v8.log where it runs)
    p = subprocess.Popen(list(prefix) + [NODE, "--perf-basic-prof", str(js)],
                         stdout=subprocess.PIPE, text=True, cwd=str(tmp_path))
    return p


def perf_map_pid(p, tmp_path):
    """The pid whose map names node's JIT code, and node's own pid: wait for
    the map to name hotLoopForGebpf (compiled a moment after the start)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < 20:
        for pid in [p.pid] + children(p.pid):
            st = open("/proc/%d/status" % pid).read()
            if "node" not in open("/proc/%d/comm" % pid).read():
                continue
            ns = [l.split()[-1] for l in st.splitlines() if l.startswith("NSpid:")][0]
            path = "/proc/%d/root/tmp/perf-%s.map" % (pid, ns)
            if os.path.exists(path) and "hotLoopForGebpf" in open(path).read():
                return pid, int(ns)
        time.sleep(0.1)
    raise AssertionError("node wrote no map naming hotLoopForGebpf")


def rm_map(pid):
    if os.path.exists("/tmp/perf-%d.map" % pid):
        os.unlink("/tmp/perf-%d.map" % pid)


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            kids = [int(x) for x in f.read().split()]
    except OSError:
        return []
    return kids + [g for k in kids for g in children(k)]


def functions(path):
    """pprof's functions: id -> (name, system_name)."""
    import gzip
    with gzip.open(str(path), "rb") as f:
        top = _fields(f.read())
    strings = [v.decode() for n, v in top if n == 6]
    out = {}
    for n, v in top:
        if n == 5:
            d = dict(_fields(v))
            out[d.get(1)] = (strings[d.get(2, 0)], strings[d.get(3, 0)])
    return out


def test_jit_code_named_and_cxx_demangled(tmp_path):
    need_bpf()
    need_node()
    p = start_node(tmp_path, 8000)
    try:
        pid, ns = perf_map_pid(p, tmp_path)
        assert ns == pid, "node in the host's pid namespace"
        prof = tmp_path / "p.pb.gz"
        r = sample(["-p", str(pid), "--duration", "1.5", "--folded", "--pprof", str(prof)])
        assert r.returncode == 0, r.stderr[-2000:]
    finally:
        p.kill()
        p.wait()
        rm_map(pid)
    stacks = r.stdout.splitlines()
    hot = [s for s in stacks if "hotLoopForGebpf" in s]
    assert hot, "no stack through the JIT's hotLoopForGebpf: %s" % "\n".join(stacks[:5])[:3000]
    leaves = [s.rsplit(" ", 1)[0].split(";")[-1] for s in hot]
    assert any("hotLoopForGebpf" in f for f in leaves), "not the innermost frame: %s" % leaves[:5]
    assert any("node::Start(int, char**)" in s for s in stacks), \
        "no demangled node::Start: %s" % stacks[0][:2000]
    assert not any("_ZN4node5StartEiPPc" in s for s in stacks), "a mangled name in --folded"
    fns = functions(prof)
    start = [f for f in fns.values() if f[0] == "node::Start(int, char**)"]
    assert start and start[0][1] == "_ZN4node5StartEiPPc", \
        "pprof's system_name is the ELF's name: %s" % start
    p2 = read_profile(prof)
    maps = [m["file"] for m in p2["mappings"]]
    assert "/tmp/perf-%d.map" % pid in maps, maps


def test_jit_code_of_a_process_in_its_own_pid_namespace(tmp_path):
    """The map is written under the pid the process has in its own
    namespace (1 here, under unshare --pid): gebpf reads that one."""
    need_bpf()
    need_node()
    if not shutil.which("unshare"):
        pytest.skip("no unshare (util-linux)")
    p = start_node(tmp_path, 8000, prefix=("unshare", "--pid", "--fork", "--kill-child"))
    try:
        pid, ns = perf_map_pid(p, tmp_path)
        assert ns == 1 and pid != 1, (pid, ns)
        r = sample(["-p", str(pid), "--duration", "1.5", "--report", "--top", "10"])
        assert r.returncode == 0, r.stderr[-2000:]
    finally:
        p.kill()
        p.wait()
        rm_map(1)
    fns = r.stdout.split("# top functions", 1)
    assert len(fns) == 2 and "hotLoopForGebpf" in fns[1], r.stdout[-2000:]


HOT_JAVA = """
public class Hot {
    static int hotLoopForGebpf(int n) { int s = 0; for (int i = 0; i < n; i++) { s = s * 31 + i; } return s; }
    public static void main(String[] a) throws Exception {
        long end = System.currentTimeMillis() + Integer.parseInt(a[0]); int t = 0;
        while (System.currentTimeMillis() < end) t ^= hotLoopForGebpf(100000);
        System.out.println("done " + t);
    }
}
"""


def test_java_jit_code_named_from_jcmds_perfmap(tmp_path):
    """A JVM (JDK 17+) writes its map when asked: jcmd PID Compiler.perfmap
    (docs/sample.md "JIT code"); its compiled methods are then named."""
    need_bpf()
    tools = [shutil.which(t) for t in ("java", "javac", "jcmd")]
    if not all(tools):
        pytest.skip("no java, javac or jcmd (Debian: default-jdk-headless)")
    java, javac, jcmd = tools
    (tmp_path / "Hot.java").write_text(HOT_JAVA)
    subprocess.run([javac, "-d", str(tmp_path), str(tmp_path / "Hot.java")], check=True, timeout=120)
    p = subprocess.Popen([java, "-cp", str(tmp_path), "Hot", "15000"], stdout=subprocess.PIPE,
                         text=True)
    try:
        path = "/tmp/perf-%d.map" % p.pid
        t0 = time.monotonic()
        while time.monotonic() - t0 < 30:   # (the method compiled, the map naming it)
            r = subprocess.run([jcmd, str(p.pid), "Compiler.perfmap"], capture_output=True,
                               text=True, timeout=60)
            if os.path.exists(path) and "hotLoopForGebpf" in open(path).read():
                break
            time.sleep(0.5)
        else:
            pytest.fail("jcmd wrote no map naming hotLoopForGebpf: %s" % r.stdout[-500:])
        r = sample(["-p", str(p.pid), "--duration", "1.5", "--report", "--top", "10"])
        assert r.returncode == 0, r.stderr[-2000:]
    finally:
        p.kill()
        p.wait()
        if os.path.exists("/tmp/perf-%d.map" % p.pid):
            os.unlink("/tmp/perf-%d.map" % p.pid)
    fns = r.stdout.split("# top functions", 1)
    assert len(fns) == 2, r.stdout[-2000:]
    top = [l for l in fns[1].splitlines() if "%" not in l and l.strip()][:1]
    assert top and "Hot.hotLoopForGebpf" in top[0], "the hot method is not the top function: %s" % (
        fns[1][:1500])


def test_output_and_profile_files_both_written(tmp_path):
    """-o F with --pprof X and --flamegraph G alone (no --report/--folded):
    F gets the JSONL sample lines and their summary, X the pprof, G the SVG
    (F was left empty though --help said both are written)."""
    need_bpf()
    out, prof, svg = tmp_path / "s.jsonl", tmp_path / "p.pb.gz", tmp_path / "f.svg"
    r = sample(["--pprof", str(prof), "--flamegraph", str(svg), "-o", str(out), "--duration", "1",
                "--", conftest.prog_path("cxx_names"), "50000000"])
    assert r.returncode == 0, r.stderr[-2000:]
    import json
    lines = [json.loads(l) for l in out.read_text().splitlines()]
    samples = [l for l in lines if l.get("t") == "sample"]
    assert samples and lines[-1].get("t") == "summary", out.read_text()[:1000]
    p = read_profile(prof)
    assert sum(n for _, n in p["samples"]) == lines[-1]["kept"], (lines[-1], len(p["samples"]))
    assert len(samples) == lines[-1]["kept"]
    assert svg.read_text().startswith("<?xml") and "</svg>" in svg.read_text()

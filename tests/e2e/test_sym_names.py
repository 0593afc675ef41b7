"""C++ and Rust names as gdb shows them (docs/trace.md "Range", docs/sample.md
"Names"): `--range` takes the demangled form (with or without the parameter
list where one function has the name; overloads refused with the list of
them), and profiles show it.  tests/progs/cxx_names.cc: a namespace, a
class, an overload pair and a template; a Rust binary built by the test
(rustc, where present)."""
import os
import re
import shutil
import subprocess

import pytest

from conftest import prog_path, run_gebpf

CXX = "cxx_names"


def trace(tmp_path, rng, prog, args, name):
    out = tmp_path / (name + ".jsonl")
    r = run_gebpf(["trace", "--range", rng, "-o", out, "--", prog] + list(args))
    return r, out.read_bytes() if out.exists() else b""


@pytest.mark.parametrize("demangled,mangled", [
    ("app::Acc::add", "_ZN3app3Acc3addEl"),
    ("app::Acc::add(long)", "_ZN3app3Acc3addEl"),
    ("app::mix(long, long)", "_ZN3app3mixEll"),
    ("cxx_names:app::mix(long)", "_ZN3app3mixEl"),
    ("app::twice<long>", "_ZN3app5twiceIlEET_S1_"),
    ("spread", "_Z6spreadl"),
])
def test_range_by_demangled_name_is_the_mangled_ones(tmp_path, demangled, mangled):
    r1, want = trace(tmp_path, mangled, prog_path(CXX), ["5"], "mangled")
    assert r1.returncode == 0, r1.stderr[-2000:]
    r2, got = trace(tmp_path, demangled, prog_path(CXX), ["5"], "demangled")
    assert r2.returncode == 0, r2.stderr[-2000:]
    assert b'"t":"exec"' in want
    assert got == want, "the trace of %r differs from %r's" % (demangled, mangled)


def test_overloads_without_parameters_are_refused_with_their_names(tmp_path):
    r, _ = trace(tmp_path, "app::mix", prog_path(CXX), ["5"], "x")
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "names 2 functions" in lines[0] and "'app::mix(long)'" in lines[0] and \
        "'app::mix(long, long)'" in lines[0], lines[0]


def test_an_unknown_demangled_name_says_so(tmp_path):
    r, _ = trace(tmp_path, "app::nothere", prog_path(CXX), ["5"], "x")
    assert r.returncode == 2
    assert "symbol 'app::nothere' not found" in r.stderr, r.stderr


def test_rust_name_by_its_path(tmp_path):
    rustc = shutil.which("rustc") or os.path.expanduser("~/.cargo/bin/rustc")
    if not os.path.exists(rustc):
        pytest.skip("no rustc (Debian: rustc)")
    src = tmp_path / "rhot.rs"
    src.write_text("""
pub struct Acc { v: u64 }
impl Acc {
    #[inline(never)]
    pub fn add(&mut self, x: u64) { self.v = self.v.wrapping_mul(31) ^ x; }
}
fn main() {
    let n: u64 = std::env::args().nth(1).map(|a| a.parse().unwrap()).unwrap_or(1000);
    let mut a = Acc { v: 1 };
    for i in 0..n { a.add(i); }
    println!("checksum {}", a.v);
}
""")
    exe = tmp_path / "rhot"
    subprocess.run([rustc, "-C", "opt-level=0", "-o", str(exe), str(src)], check=True,
                   timeout=300, capture_output=True)
    r, got = trace(tmp_path, "rhot::Acc::add", str(exe), ["4"], "rust")
    assert r.returncode == 0, r.stderr[-2000:]
    lines = got.decode().splitlines()
    summary = [l for l in lines if '"t":"summary"' in l]
    assert summary and '"insns":0' not in summary[0], summary
    execs = [l for l in lines if '"t":"exec"' in l]
    assert len(execs) % 4 == 0 and execs, "four calls of one function: %d lines" % len(execs)


@pytest.mark.serial   # (sampling: alone, docs/testing.md)
def test_profiles_show_demangled_names(tmp_path):
    if os.geteuid() != 0 or not os.path.exists("/sys/kernel/btf/vmlinux"):
        pytest.skip("needs root and BTF: BPF sampling")
    r = run_gebpf(["sample", "--folded", "--duration", "1", "--", prog_path(CXX), "50000000"])
    assert r.returncode == 0, r.stderr[-2000:]
    assert "main;app::Acc::add(long)" in r.stdout or "app::mix(long" in r.stdout, r.stdout[:2000]
    assert "_ZN3app" not in r.stdout, r.stdout[:2000]


@pytest.mark.serial   # (sampling: alone, docs/testing.md)
def test_flamegraph_holds_the_folded_stacks(tmp_path):
    """--flamegraph FILE beside --folded, one run: the SVG parses, its frames
    are the folded stacks merged by name (each frame's width its samples,
    its children inside it), names escaped, and its script is there."""
    import xml.etree.ElementTree as ET
    if os.geteuid() != 0 or not os.path.exists("/sys/kernel/btf/vmlinux"):
        pytest.skip("needs root and BTF: BPF sampling")
    svg = tmp_path / "f.svg"
    r = run_gebpf(["sample", "--folded", "--flamegraph", svg, "--duration", "1", "--",
                   prog_path(CXX), "50000000"])
    assert r.returncode == 0, r.stderr[-2000:]
    folded = [l for l in r.stdout.splitlines() if not l.startswith("checksum ")]  # (the program's)
    want = {}
    for line in folded:
        stack, n = line.rsplit(" ", 1)
        path = ()
        for f in stack.split(";"):
            path += (f,)
            want[path] = want.get(path, 0) + int(n)
    total = sum(int(l.rsplit(" ", 1)[1]) for l in folded)
    ns = {"s": "http://www.w3.org/2000/svg"}
    root = ET.parse(str(svg)).getroot()
    js = root.find("s:script", ns).text
    assert "function zoom(" in js and "function search(" in js
    node = shutil.which("node")
    if node:   # (its syntax, as a browser's parser would take it)
        (tmp_path / "f.js").write_text(js)
        c = subprocess.run([node, "--check", str(tmp_path / "f.js")], capture_output=True, text=True)
        assert c.returncode == 0, c.stderr
    got, spans = {}, {}
    for g in root.iter("{http://www.w3.org/2000/svg}g"):
        title = g.find("s:title", ns).text
        name, rest = title.rsplit(" (", 1)
        n = int(rest.split(" ")[0])
        x, w, d = int(g.get("data-x")), int(g.get("data-w")), int(g.get("data-d"))
        assert w == n, title
        spans[(d, x)] = (name, w)
    assert spans[(0, 0)] == ("all", total), spans.get((0, 0))
    # rebuild each frame's path: its parent is the frame one level down whose span holds it
    for (d, x), (name, w) in spans.items():
        if d == 0:
            continue
        path = (name,)
        dd, xx = d, x
        while dd > 1:
            dd -= 1
            par = [(px, v) for (pd, px), v in spans.items()
                   if pd == dd and px <= xx < px + v[1]]
            assert len(par) == 1, (name, d, x, par)
            path = (par[0][1][0],) + path
            assert par[0][0] <= x and x + w <= par[0][0] + par[0][1][1], "outside its parent"
        got[path] = got.get(path, 0) + w
    wide = {p: n for p, n in want.items() if n * 1180.0 / total >= 0.1}
    assert {p: got.get(p) for p in wide} == wide, "frames differ from the folded stacks"
    assert any(p[-1] == "app::Acc::add(long)" for p in got), list(got)[:10]
    # in a real browser: the search of FILE.svg#s=REGEX, its share of the samples
    chromium = shutil.which("chromium")
    if not chromium:
        print("no chromium: the browser's search not checked")
        return
    share = 100.0 * sum(int(l.rsplit(" ", 1)[1]) for l in folded
                        if "app::Acc::add(long)" in l.rsplit(" ", 1)[0].split(";")) / total
    d = subprocess.run([chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
                        "--user-data-dir=%s" % (tmp_path / "chromium"), "--dump-dom",
                        "file://%s#s=app::Acc::add" % svg], capture_output=True, text=True,
                       timeout=120)
    m = re.search(r'id="matched"[^>]*>Matched: ([0-9.]+)%<', d.stdout)
    assert m, "no search result in the browser's page: %s" % (d.stdout[-1500:] or d.stderr[-1500:])
    assert abs(float(m.group(1)) - share) <= 0.2, (m.group(1), share)


def test_snap_stacks_name_functions_as_gdb_does(tmp_path):
    """snap --at the demangled name: the snapshot's stack trace keeps the
    ELF's name in `symbol` and gives gdb's in `function`
    (docs/snapshot-format.md)."""
    from test_snap import note_json
    out = tmp_path / "cxx.core"
    r = run_gebpf(["snap", "-o", out, "--at", "app::Acc::add", "--", prog_path(CXX), "10"])
    assert r.returncode == 0, r.stderr[-2000:]
    top = note_json(out)["stacktrace"][0]
    assert top[0]["symbol"] == "_ZN3app3Acc3addEl+0x0", top[:3]
    assert top[0]["function"] == "app::Acc::add(long)+0x0", top[:3]
    assert top[1]["function"].startswith("main+0x") and top[1]["symbol"].startswith("main+0x"), top[:3]

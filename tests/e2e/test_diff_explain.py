"""gebpf diff on real traces: rebasing per region, every divergence explained
(symbol+offset, disassembly, quirk hints), the summary table, --json, and
traces read from anywhere (a pipe, -, zstd, a recording directory).  Also
gebpf show on traces.  docs/diff.md and docs/show.md are the contract."""
import json
import os
import shutil
import subprocess

import pytest

from conftest import gebpf_path, prog_path, run_gebpf, stable_env

STACK_QEMU = 0x40008004d0   # qemu-x86_64's guest stack, where a native one is near 0x7fffffffe490


def trace(name, out):
    r = run_gebpf(["trace", "--range", "traced", "-o", out, "--", prog_path(name)])
    assert r.returncode == 0, r.stderr
    return out


def lines_of(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def write(path, recs):
    with open(path, "w") as f:
        f.write("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in recs))
    return str(path)


def moved(recs, delta_of):
    """The trace with every address moved by delta_of(addr) (pcs too)."""
    out = []
    for r in recs:
        r = dict(r)
        for k in ("addr", "pc"):
            if k in r:
                a = int(r[k], 16)
                r[k] = hex(a + delta_of(a))
        out.append(r)
    return out


def stack_like_qemu(recs):
    """The stack moved to QEMU's place, the image and heap left alone."""
    top = max(int(r["addr"], 16) for r in recs if "addr" in r and int(r["addr"], 16) >= 1 << 40)
    return moved(recs, lambda a: STACK_QEMU - top if a >= 1 << 40 else 0)


@pytest.fixture(scope="module")
def traces(gebpf, root, tmp_path_factory):
    d = tmp_path_factory.mktemp("dx")
    return {name: trace(name, str(d / (name + ".jsonl"))) for name in ("stack_ops", "mem_sizes")}


def test_rebased_stack_compares_identical(traces, tmp_path):
    recs = lines_of(traces["stack_ops"])
    assert any(int(r.get("addr", "0x0"), 16) >= 1 << 40 for r in recs), "stack_ops touches its stack"
    b = write(tmp_path / "b.jsonl", stack_like_qemu(recs))
    r = run_gebpf(["diff", traces["stack_ops"], b])
    assert r.returncode == 0, r.stdout
    lines = r.stdout.splitlines()
    assert len(lines) == 1 and "identical" in lines[0] and "rebased per region" in lines[0], r.stdout
    r = run_gebpf(["diff", "--no-rebase", "--max-diffs", "1", traces["stack_ops"], b])
    assert r.returncode == 1 and "access differs" in r.stdout


def test_every_region_moved_by_its_own_constant(traces, tmp_path):
    """The image, the data and the stack each moved (a PIE, another mmap base)."""
    recs = lines_of(traces["mem_sizes"])
    b = write(tmp_path / "b.jsonl", moved(recs, lambda a: 0x7000000000 if a >= 1 << 40 else 0x555555000000))
    r = run_gebpf(["diff", traces["mem_sizes"], b])
    assert r.returncode == 0 and "identical" in r.stdout, r.stdout


def test_region_gap_separates_mappings_one_side_placed_close(traces, tmp_path):
    """B's stack placed 512 KiB above the image (QEMU put two of python3.11's
    mappings 0.8 MiB apart that are 3.9 MiB apart natively, docs/qemu.md):
    one region in B, two in A, so the stack's accesses differ and the note
    says the counts differ; --region-gap 256K cuts B as A is cut."""
    recs = lines_of(traces["stack_ops"])
    img_hi = max(int(r[k], 16) for r in recs for k in ("addr", "pc") if k in r and int(r[k], 16) < 1 << 40)
    stk_lo = min(int(r["addr"], 16) for r in recs if "addr" in r and int(r["addr"], 16) >= 1 << 40)
    b = write(tmp_path / "b.jsonl", moved(recs, lambda a: img_hi + (512 << 10) - stk_lo if a >= 1 << 40 else 0))
    r = run_gebpf(["diff", "--max-diffs", "1", traces["stack_ops"], b])
    assert r.returncode == 1 and "access differs" in r.stdout, r.stdout
    assert "(A 2, B 1 regions: not as many" in r.stdout and "--region-gap" in r.stdout, r.stdout
    r = run_gebpf(["diff", "--region-gap", "256K", traces["stack_ops"], b])
    assert r.returncode == 0 and "identical" in r.stdout and "(A 2, B 2 regions;" in r.stdout, r.stdout
    r = run_gebpf(["diff", "--json", "--region-gap", "0x40000", traces["stack_ops"], b])
    assert r.returncode == 0 and json.loads(r.stdout)["identical"] is True, r.stdout
    for bad in ("0", "-1", "12Q", "2T"):
        r = run_gebpf(["diff", "--region-gap", bad, traces["stack_ops"], b])
        assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1, (bad, r.stderr)
        assert r.stderr.startswith("gebpf: diff: --region-gap expects"), r.stderr


def split_first_16(recs):
    """QEMU's shape: the first 16-byte read as two 8-byte reads."""
    out, done = [], None
    for r in recs:
        if not done and r["t"] == "read" and r["size"] == 16:
            a = int(r["addr"], 16)
            out += [dict(r, size=8), dict(r, size=8, addr=hex(a + 8))]
            done = r
        else:
            out.append(r)
    assert done, "mem_sizes has a 16-byte read"
    return out, done


def test_split_access_named_with_symbol_disassembly_and_hint(traces, tmp_path):
    recs, orig = split_first_16(lines_of(traces["mem_sizes"]))
    b = write(tmp_path / "b.jsonl", stack_like_qemu(recs))
    r = run_gebpf(["diff", "--binary", prog_path("mem_sizes"), traces["mem_sizes"], b])
    assert r.returncode == 1, r.stdout
    pc = int(orig["pc"], 16)
    lines = r.stdout.splitlines()
    head = next(l for l in lines if l.startswith("[1] "))
    assert "access differs at traced+0x" in head and hex(pc) in head, head
    # The instruction as Zydis shows it, read from the binary at that pc.
    assert lines[lines.index(head) + 1].strip().startswith("movdqu"), r.stdout
    assert '- {"t":"read"' in r.stdout and '"size":16' in r.stdout and '"size":8' in r.stdout
    assert "hint: has the shape of qemu-split" in r.stdout and "--normalise qemu" in r.stdout
    # The summary table comes last: the kind, its count, the first pcs.
    tail = r.stdout[r.stdout.index("\nsummary: "):]
    assert "access differs" in tail and "traced+0x" in tail and "hint qemu-split" in tail
    r = run_gebpf(["diff", "--normalise", "qemu", traces["mem_sizes"], b])
    assert r.returncode == 0 and "identical" in r.stdout, r.stdout
    assert "--normalise qemu changed" in r.stderr and "split 1" in r.stderr, r.stderr


def test_changed_access_has_no_hint_and_every_divergence_is_reported(traces, tmp_path):
    recs = lines_of(traces["stack_ops"])
    acc = [i for i, r in enumerate(recs) if r["t"] in ("read", "write")]
    for i in (acc[2], acc[-3]):   # two accesses, far apart: two divergences
        recs[i] = dict(recs[i], addr=hex(int(recs[i]["addr"], 16) + 0x40))
    b = write(tmp_path / "b.jsonl", recs)
    r = run_gebpf(["diff", "--binary", prog_path("stack_ops"), traces["stack_ops"], b])
    assert r.returncode == 1
    assert "[1] access differs at traced" in r.stdout and "[2] access differs at traced" in r.stdout
    assert "hint:" not in r.stdout
    assert "summary: 2 divergences" in r.stdout
    # An instruction missing in B: one divergence, then back in step.
    recs = lines_of(traces["stack_ops"])
    ex = [i for i, r in enumerate(recs) if r["t"] == "exec"]
    drop = ex[5]
    end = ex[6]
    b2 = write(tmp_path / "b2.jsonl", recs[:drop] + recs[end:])
    r = run_gebpf(["diff", "--ignore-vt", traces["stack_ops"], b2])
    assert r.returncode == 1 and "instructions missing in B" in r.stdout and "summary: 1 divergence" in r.stdout, \
        r.stdout


def test_json_document(traces, tmp_path):
    recs, _ = split_first_16(lines_of(traces["mem_sizes"]))
    b = write(tmp_path / "b.jsonl", recs)
    r = run_gebpf(["diff", "--json", "--binary", prog_path("mem_sizes"), traces["mem_sizes"], b])
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["identical"] is False and doc["rebase"] is True
    d = doc["divergences"][0]
    assert d["kind"] == "access differs" and d["symbol"].startswith("traced+0x")
    assert d["insn"].startswith("movdqu") and d["hint"]["quirk"] == "qemu-split"
    assert d["hint"]["normalise"] == "qemu"
    assert doc["counts"]["access differs"]["count"] >= 1
    r = run_gebpf(["diff", "--json", "--normalise", "qemu", traces["mem_sizes"], b])
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["identical"] is True
    assert doc["b"]["rules"]["split"] == 1 and doc["a"]["rules"]["split"] == 0


def test_pipe_stdin_and_zstd(traces, tmp_path):
    a = traces["stack_ops"]
    for args, how in ((["/dev/stdin", a], "/dev/stdin"), (["-", a], "-"), ([a, "-"], "- as B")):
        with open(a) as f:
            p = subprocess.run(["cat"], stdin=f, stdout=subprocess.PIPE)
        r = subprocess.run([gebpf_path(), "diff"] + args, input=p.stdout, capture_output=True,
                           env=stable_env(), timeout=60)
        assert r.returncode == 0, (how, r.stdout, r.stderr)
    if not shutil.which("zstd"):
        pytest.skip("the zstd tool is not installed (Debian package zstd)")
    z = str(tmp_path / "a.jsonl.zst")
    subprocess.run(["zstd", "-q", "-f", a, "-o", z], check=True)
    r = run_gebpf(["diff", a, z])
    assert r.returncode == 0 and "identical" in r.stdout, r.stdout + r.stderr
    # zstd from a pipe, and two frames concatenated.
    with open(z, "rb") as f:
        zb = f.read()
    r = subprocess.run([gebpf_path(), "diff", "-", a], input=zb + zb, capture_output=True, env=stable_env())
    assert r.returncode == 1, r.stderr
    assert b"lines %d" % (2 * len(lines_of(a))) in r.stdout, r.stdout   # both frames read
    assert b"instructions missing in B" in r.stdout, r.stdout
    # A cut last frame (a killed trace): the complete lines and a warning.
    cut = str(tmp_path / "cut.zst")
    with open(cut, "wb") as f:
        f.write(zb + zb[: len(zb) // 2])
    r = run_gebpf(["show", "--json", cut])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["zstd"]["truncated"] is True and doc["zstd"]["frames"] == 2
    assert doc["lines"] >= len(lines_of(a)) and "cut short" in r.stderr


def test_show_trace_summary_and_lines(traces, tmp_path):
    a = traces["stack_ops"]
    recs = lines_of(a)
    r = run_gebpf(["show", a])
    assert r.returncode == 0, r.stderr
    assert "lines: %d (exec %d" % (len(recs), sum(1 for x in recs if x["t"] == "exec")) in r.stdout
    assert "vcpus: 1 (0)" in r.stdout and '{"t":"summary"' in r.stdout
    doc = json.loads(run_gebpf(["show", "--json", a]).stdout)
    assert doc["format"] == "jsonl" and doc["types"]["read"] == sum(1 for x in recs if x["t"] == "read")
    assert doc["summary"]["insns"] == doc["types"]["exec"]
    if not shutil.which("zstd"):
        pytest.skip("the zstd tool is not installed (Debian package zstd)")
    z = str(tmp_path / "a.zst")
    subprocess.run(["zstd", "-q", "-f", a, "-o", z], check=True)
    r = run_gebpf(["show", "--lines", z])
    with open(a) as f:
        assert r.returncode == 0 and r.stdout == f.read()
    r = run_gebpf(["show", z])
    assert "zstd: 1 frame" in r.stdout


def test_recording_directory_names_the_binary(gebpf, root, traces, tmp_path):
    d = tmp_path / "rec"
    r = run_gebpf(["trace", "--range", "traced", "--out", d, "--", prog_path("mem_sizes")])
    assert r.returncode == 0, r.stderr
    recs, _ = split_first_16(lines_of(traces["mem_sizes"]))
    b = write(tmp_path / "b.jsonl", recs)
    r = run_gebpf(["diff", d, b])   # no --binary: meta.json's command names it
    assert r.returncode == 1 and "access differs at traced+0x" in r.stdout and "movdqu" in r.stdout, r.stdout
    r = run_gebpf(["show", d])
    assert r.returncode == 0 and "blobs/trace.jsonl" in r.stdout


def test_snapshot_from_a_pipe_refused(gebpf):
    with open(prog_path("mem_sizes"), "rb") as f:
        elf = f.read()
    r = subprocess.run([gebpf_path(), "diff", "-", prog_path("mem_sizes")], input=elf, capture_output=True,
                       text=False, timeout=60)
    assert r.returncode == 2 and b"must be given as a file path" in r.stderr, r.stderr


def test_maps_name_the_regions(traces, tmp_path):
    recs = lines_of(traces["stack_ops"])
    a_maps, b_maps = tmp_path / "a.maps", tmp_path / "b.maps"
    a_maps.write_text("00400000-00500000 r-xp 00000000 08:01 1 /x/stack_ops\n"
                      "7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0          [stack]\n")
    b_maps.write_text("00400000-00500000 r-xp 00000000 08:01 1 /x/stack_ops\n"
                      "4000000000-4000801000 rw-p 00000000 00:00 0          [stack]\n")
    moved_recs = stack_like_qemu(recs)
    acc = [i for i, r in enumerate(moved_recs) if r["t"] == "write"]
    moved_recs[acc[3]] = dict(moved_recs[acc[3]], size=4)
    b = write(tmp_path / "b.jsonl", moved_recs)
    r = run_gebpf(["diff", "--maps", "%s,%s" % (a_maps, b_maps), traces["stack_ops"], b])
    assert r.returncode == 1, r.stderr
    assert "anchor 0x7fff" in r.stdout and "[stack], B 0x4000" in r.stdout and "stack_ops" in r.stdout, r.stdout
    r = run_gebpf(["diff", "--maps", "%s,%s" % (a_maps, tmp_path / "none.maps"), traces["stack_ops"], b])
    assert r.returncode == 2 and "none.maps: No such file" in r.stderr


def test_lackey_shapes_on_real_traces(gebpf, root, tmp_path):
    """lackey's extra exec at a REP loop's end (undone by --normalise lackey)
    and its 1-byte bit-test read (not normalised), made on real traces."""
    rep = lines_of(trace("rep_string", str(tmp_path / "rep.jsonl")))
    execs = [i for i, r in enumerate(rep) if r["t"] == "exec"]
    # The last iteration of a REP loop: an exec with accesses whose pc ran
    # just before and is followed by another pc.
    last = next(i for k, i in enumerate(execs[1:-1], 1)
                if rep[execs[k - 1]]["pc"] == rep[i]["pc"] != rep[execs[k + 1]]["pc"]
                and rep[i + 1]["t"] in ("read", "write"))
    nxt = execs[execs.index(last) + 1]
    extra = dict(rep[last])
    b = write(tmp_path / "b.jsonl", rep[:nxt] + [extra] + rep[nxt:])
    r = run_gebpf(["diff", "--ignore-vt", "--binary", prog_path("rep_string"), str(tmp_path / "rep.jsonl"), b])
    assert r.returncode == 1 and "instructions extra in B" in r.stdout, r.stdout
    assert "hint: has the shape of rep-exec" in r.stdout and "rep " in r.stdout, r.stdout
    r = run_gebpf(["diff", "--normalise", "lackey", str(tmp_path / "rep.jsonl"), b])
    assert r.returncode == 0, r.stdout
    assert "rep-exec 1" in r.stderr, r.stderr

    bt = lines_of(trace("bittest", str(tmp_path / "bt.jsonl")))
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", prog_path("bittest")], capture_output=True,
                         text=True).stdout if shutil.which("objdump") else ""
    if not out:
        pytest.skip("objdump (binutils) is not installed: the bit-test pcs are not known")
    bt_pcs = {int(l.split(":")[0], 16) for l in out.splitlines()
              if l.strip() and ":" in l and l.split("\t")[-1].startswith("bt")
              and l.split(":")[0].strip().isalnum()}
    i = next(i for i, r in enumerate(bt) if r["t"] == "read" and int(r["pc"], 16) in bt_pcs and r["size"] == 4)
    bt[i] = dict(bt[i], size=1, addr=hex(int(bt[i]["addr"], 16) + 1))
    b = write(tmp_path / "bt_b.jsonl", bt)
    r = run_gebpf(["diff", "--binary", prog_path("bittest"), str(tmp_path / "bt.jsonl"), b])
    assert r.returncode == 1 and "hint: has the shape of lackey-bittest" in r.stdout, r.stdout
    assert "not normalised" in r.stdout and "\n    bt" in r.stdout, r.stdout

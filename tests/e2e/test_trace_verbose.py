"""What `gebpf trace -v` says at the end (docs/trace.md "What -v says"): the
counters of what ran, under each trap and engine, and nothing of what did
not run: no "jit:" line unless the probe or page trap's translating engine
ran the owner's stretches, no step engine counters unless it stepped, no
"probe trap:" line unless a probe trap was set up (the kernel's uprobe page
that launch and exec place under every trap says so in its own words).

Needs root and uprobes (the probe and patch traps)."""
import re

import pytest

from conftest import trace_summary
from test_pagetrap import native, trace

pytestmark = [pytest.mark.probetrap, pytest.mark.usefixtures("probes_ready")]

JIT = re.compile(r"trace: jit: (\d+) runs, \d+ stops, (\d+) instructions translated-run")
ENGINE = re.compile(r"trace: (\w+) trap: (?:(\d+) single-steps, )?(\d+) in-range instructions, "
                    r"(\d+) range entries(, \d+ decodes)?")
PATCH = re.compile(r"the patch trap: (\d+) entries, (\d+) in-range misses, \d+ signals taken out "
                   r"of the cache, (\d+) records, (\d+) blocks translated \((\d+) instructions\), "
                   r"images set up: (\d+)")

# name: (gebpf arguments, the trap line's name, the classic jit ran, the step
# engine's counters said (it decoded or stepped), it single-stepped)
CASES = {
    "patch": (["--trap", "patch"], "patch", False, False, False),
    "default": ([], "patch", False, False, False),
    # (the step engine without --trap: the probe trap, the patch trap's being
    # the cache's; test_trap_cases.py runs the default only with its engine)
    "default-step": (["--engine", "step"], "probe", False, True, True),
    "probes": (["--trap", "probes"], "probe", True, True, False),  # (decodes the entries)
    "probes-step": (["--trap", "probes", "--engine", "step"], "probe", False, True, True),
    "pages": (["--trap", "pages"], "page", True, True, True),
    "none": (["--trap", "none"], "no", False, True, True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_verbose_summary_names_what_ran(case, tmp_path):
    """exec_thread 1 quiet (two images, 9 calls of traced): the closing
    lines count what ran: the patch trap's own line (entries, records, blocks
    its caches translated, 2 images) and no classic jit line under the patch
    trap; the jit's line with runs where it translated; single-steps only
    where the step engine ran."""
    args, name, jit, said, stepped = CASES[case]
    out = tmp_path / "t.jsonl"
    r = trace("exec_thread", "traced", out, 1, "quiet", trap="default", extra=args)
    assert r.stdout == native("exec_thread", 1, "quiet").decode()
    summary = trace_summary(out)
    err = r.stderr
    eng = ENGINE.findall(err)
    assert len(eng) == 1, err[-3000:]
    trap, steps, in_range, entries, more = eng[0]
    assert trap == name and int(in_range) == summary["insns"] == 9 * 452, err[-3000:]
    assert bool(steps) == bool(more) == said and (int(steps or 0) > 0) == stepped, err[-3000:]
    j = JIT.findall(err)
    assert len(j) == int(jit), err[-3000:]
    if jit:
        assert int(j[0][0]) > 0 and int(j[0][1]) > 0, err[-3000:]
    p = PATCH.findall(err)
    if name == "patch":
        ents, misses, records, blocks, tinsns, images = map(int, p[0])
        assert len(p) == 1 and ents == int(entries) == 9 and misses == 0, err[-3000:]
        assert records == summary["insns"] and blocks > 0 and tinsns > 0 and images == 2, \
            err[-3000:]
    else:
        assert not p, err[-3000:]
    assert ("probe trap:" in err) == (name == "probe"), err[-3000:]
    assert err.count("the kernel's uprobe page mapped first") == 2, err[-3000:]


@pytest.mark.parametrize("trap", ["probes", "patch"])
def test_verbose_lines_are_gebpf_s_own(trap, tmp_path):
    """-v says gebpf's lines only: the probe trap's BPF object (also inside
    the patch trap, loaded before the attach) is loaded without libbpf's
    ~200 lines about its sections, maps and relocations; --debug adds them
    (docs/trace.md "What -v says")."""
    out = tmp_path / "t.jsonl"
    r = trace("exec_thread", "traced", out, 1, "quiet", trap=trap)
    lines = [ln for ln in r.stderr.splitlines() if ln]
    assert lines and all(ln.startswith("gebpf: ") for ln in lines), \
        [ln for ln in lines if not ln.startswith("gebpf: ")][:5]
    r = trace("exec_thread", "traced", out, 1, "quiet", trap=trap, extra=["--debug"])
    libbpf = [ln for ln in r.stderr.splitlines() if ln.startswith("libbpf: ")]
    assert len(libbpf) > 50, r.stderr[-2000:]
    assert any("loading object" in ln for ln in libbpf), libbpf[:5]
    gebpf = [ln for ln in r.stderr.splitlines() if ln.startswith("gebpf: ")]
    assert any("in-range instructions" in ln for ln in gebpf), "--debug is -v and more"

"""The project's shell scripts parse (`bash -n`, `sh -n` for the guests'
busybox one): bash reads a script as it runs it, so a quoting slip in the
last steps of scripts/test showed only after 19 minutes of a CI run
("unexpected EOF while looking for matching `\"'"), every step before it
passing."""
import os
import subprocess

import pytest

from conftest import REPO

BASH = ["scripts/test", "scripts/deps", "scripts/kmatrix", "scripts/demo", ".ci/run",
        "scripts/qemu-plugin-h", "scripts/qemu10"]
SH = ["scripts/kmatrix.d/smoke.sh"]


@pytest.mark.parametrize("path", BASH + SH)
def test_script_parses(path):
    full = os.path.join(REPO, path)
    if not os.path.exists(full):
        pytest.skip("%s is not in this tree" % path)
    with open(full) as f:
        first = f.readline()
    assert first.startswith("#!"), "%s: no #! line" % path
    shell = "sh" if path in SH else "bash"
    r = subprocess.run([shell, "-n", full], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, "%s -n %s: %s" % (shell, path, r.stderr.strip())

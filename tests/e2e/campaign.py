"""Random campaigns: fixed seeds in CI, fresh ones under scripts/soak.

A campaign is a test that repeats one run many times, each run at a random
moment (a kill, a signal) decided by one integer seed: everything random in
a run comes from its seed (Campaign.rng), and so does its phase
(Campaign.phase: seed % len(phases), so consecutive seeds cover every phase
in turn).  docs/testing.md "Random campaigns" has the arithmetic behind the
CI counts and the interface below.

    @pytest.mark.campaign
    def test_kills(campaign, tmp_path):
        c = campaign(runs=30)                       # the CI count
        results = c.map(lambda seed: one_run(seed, c.phase(seed, PHASES)), workers=3)
        c.check({seed: why for seed, why in results if why})   # fails the test, names the seeds

Where the seeds come from (GEBPF_SEEDS):
- unset: CI's fixed set, seeds 1..runs plus the campaign's `fixed` seeds
  (failures that scripts/soak found, kept as regression cases);
- "S1,S2,...": exactly these seeds (replay a failure: scripts/soak prints the
  command);
- "fresh": fresh random seeds, GEBPF_SOAK_RUNS of them (default 10 x runs),
  until GEBPF_SOAK_UNTIL (a Unix time) if that is set: what scripts/soak uses.

Every campaign ends with one line, "campaign NODEID: N runs (seeds ...),
P passed[; failed seeds ...]", printed under "campaign seeds" at the end of
pytest's output (conftest.py), and appended as a JSON object to the file
GEBPF_CAMPAIGN_LOG names (scripts/soak adds those up).
"""
import concurrent.futures
import json
import os
import random
import time

import pytest

# user_properties key of a campaign's line (conftest.py prints them).
PROPERTY = "gebpf_campaign"


def _mode():
    v = os.environ.get("GEBPF_SEEDS", "").strip()
    if not v:
        return "ci", None
    if v == "fresh":
        return "fresh", None
    try:
        return "replay", [int(s) for s in v.replace(" ", "").split(",") if s]
    except ValueError:
        raise pytest.UsageError("GEBPF_SEEDS=%r: not 'fresh' nor a list of seeds (1,2,3)" % v)


def _span(seeds):
    """1-30 for a run of consecutive seeds, else the list."""
    s = sorted(seeds)
    if len(s) > 2 and s == list(range(s[0], s[0] + len(s))):
        return "%d-%d" % (s[0], s[-1])
    return ",".join(map(str, s))


class Campaign:
    def __init__(self, node, runs, fixed=()):
        self.node = node
        self.nodeid = node.nodeid if node is not None else "?"
        self.runs = runs
        self.mode, given = _mode()
        if self.mode == "ci":
            self._seeds = list(range(1, runs + 1)) + [s for s in fixed if s > runs]
        elif self.mode == "replay":
            self._seeds = given
        else:
            self._seeds = None
        self.done = []          # the seeds that ran, in order
        self.started = time.monotonic()

    # -- what a run draws from its seed ------------------------------------
    @staticmethod
    def phase(seed, phases):
        return phases[seed % len(phases)]

    @staticmethod
    def rng(seed, *salt):
        """The run's random.Random (salt: e.g. the mode, so two campaigns on
        one seed draw different moments)."""
        return random.Random("-".join(str(x) for x in (seed,) + salt))

    # -- the seeds ---------------------------------------------------------
    def _fresh(self):
        n = int(os.environ.get("GEBPF_SOAK_RUNS", "0") or 0) or 10 * self.runs
        until = float(os.environ.get("GEBPF_SOAK_UNTIL", "0") or 0)
        sysrand = random.SystemRandom()
        for _ in range(n):
            if until and time.time() >= until:
                return
            yield sysrand.randrange(1, 1 << 31)

    def seeds(self):
        """The seeds, lazily in soak mode (stops at GEBPF_SOAK_UNTIL)."""
        return iter(self._seeds) if self._seeds is not None else self._fresh()

    def map(self, fn, workers=1):
        """[(seed, fn(seed))] over the seeds, WORKERS runs at a time, in seed
        order; fresh seeds are drawn only while time is left."""
        out = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as ex:
            pending = []
            it = self.seeds()
            for seed in it:
                pending.append((seed, ex.submit(fn, seed)))
                if len(pending) >= workers:
                    s, f = pending.pop(0)
                    out.append((s, f.result()))
            for s, f in pending:
                out.append((s, f.result()))
        self.done = [s for s, _ in out]
        return out

    # -- the end -------------------------------------------------------------
    def summary(self, failed):
        how = {"ci": "fixed", "replay": "GEBPF_SEEDS", "fresh": "fresh"}[self.mode]
        line = "campaign %s: %d runs (%s seeds %s), %d passed" % (
            self.nodeid, len(self.done), how, _span(self.done) if len(self.done) <= 40 or
            how != "fresh" else "%d..." % self.done[0], len(self.done) - len(failed))
        if failed:
            line += "; failed seeds %s (replay: GEBPF_SEEDS=%s pytest '%s')" % (
                ",".join(map(str, sorted(failed))), ",".join(map(str, sorted(failed))),
                self.nodeid)
        return line

    def check(self, failed, extra=None):
        """Record the campaign (FAILED: {seed: what went wrong}) and fail the
        test when a run failed.  EXTRA: counts to log with it."""
        line = self.summary(failed)
        print(line)
        if self.node is not None:
            self.node.user_properties.append((PROPERTY, line))
        log = os.environ.get("GEBPF_CAMPAIGN_LOG")
        if log:
            rec = {"campaign": self.nodeid, "mode": self.mode, "runs": len(self.done),
                   "passed": len(self.done) - len(failed),
                   "failed": {str(s): str(w)[:2000] for s, w in sorted(failed.items())},
                   "seconds": round(time.monotonic() - self.started, 1)}
            if extra:
                rec["counts"] = extra
            with open(log, "a") as f:
                f.write(json.dumps(rec) + "\n")
        if failed:
            pytest.fail("%s\n%s" % (line, "\n".join("seed %d: %s" % (s, w)
                                                     for s, w in sorted(failed.items()))),
                        pytrace=False)

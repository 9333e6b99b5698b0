"""The mutation campaign of issue 13 as tests: hostile variants of the shipped examples, anchors,
traces, HF configs, plan questions and calibration profiles must each end `ok` or `rejected`
(one clean line), never in a crash, a hang, nonsense or a multi-line message.

The quick profile (a fixed, seeded sample of a few hundred cases, in-process) runs with the normal
suite; the long one (`pytest -m fuzz`) runs 2,000 cases through `bench/fuzz.py`'s worker pool,
with the CLI and calibration-profile groups as their own cases. `python3 bench/fuzz.py --n 10000` is
the full campaign with its table.
"""

from __future__ import annotations

from collections import Counter

import pytest

from bench.fuzz import BAD, campaign, table
from bench.fuzz_mutate import make_case
from bench.fuzz_targets import run_case

QUICK = {"scenarios": 150, "anchors": 12, "traces": 40, "hf": 60}
SEED = 20261201


@pytest.mark.parametrize("kind", sorted(QUICK))
def test_quick_campaign_has_no_crash_hang_or_nonsense(kind):
    outcomes: Counter[str] = Counter()
    bad = []
    for i in range(QUICK[kind]):
        case = make_case(kind, SEED, i)
        outcome, sig, detail = run_case(case, limit_s=20)
        outcomes[outcome] += 1
        if outcome in BAD:
            bad.append(f"{kind}:{i} {outcome} {sig} {detail[:160]} <- {'; '.join(case.mutations)}")
    assert not bad, "\n".join(bad)
    assert outcomes["ok"] + outcomes["rejected"] == QUICK[kind]


@pytest.mark.fuzz
@pytest.mark.parametrize(
    ("kinds", "n"),
    [
        (["scenarios", "anchors", "traces", "questions", "hf"], 2000),
        pytest.param(["cli"], 300),
        pytest.param(["profiles"], 500),
    ],
)
def test_long_campaign_has_no_crash_hang_or_nonsense(kinds, n):
    rep = campaign(n, seed=SEED, kinds=kinds, limit_s=20.0, workers=2)
    assert not any(rep["totals"].get(o) for o in BAD), table(rep)

"""`planner simulate` on a scenario with no traffic runs the offline, saturated case (README: a
throughput with neither concurrency nor rate is a saturated run), as the estimate does."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.inputs.scenario import load_scenario
from planner.model.defaults import resolve
from planner.model.estimator import estimate
from planner.model.simulate import run_simulation

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "deepseek-v3-gb200-48gpu-decode.yaml"


def test_no_traffic_simulates_the_saturated_loop_the_estimate_prices() -> None:
    res = resolve(load_scenario(EXAMPLE))
    assert res.concurrency is None
    assert res.request_rate is None
    est = estimate(res)
    _, summary = run_simulation(res)
    assert summary["requests_completed"] >= 2 * est.concurrency  # more than one wave of the full pool
    assert summary["tpot_ms"]["mean"] / 1e3 == pytest.approx(est.tpot_s, rel=0.02)
    assert summary["output_tok_s"] == pytest.approx(est.output_tok_s, rel=0.02)
    # the loop is sized at each request's whole length, as the simulator admits: nobody waits a generation
    # (sized at a 2,000-token context, a third of the loop waited and TPOT read p50 96.9 / p90 193.8 ms)
    assert summary["tpot_ms"]["p90"] == pytest.approx(summary["tpot_ms"]["p50"], rel=0.05)
    assert summary["requests_preempted"] == 0

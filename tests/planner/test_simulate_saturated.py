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
    assert summary["tpot_ms"]["mean"] / 1e3 == pytest.approx(est.tpot_s, rel=0.1)
    assert summary["output_tok_s"] == pytest.approx(est.output_tok_s, rel=0.15)

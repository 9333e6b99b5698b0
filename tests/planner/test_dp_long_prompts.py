"""Attention-DP ranks with prompts longer than a rank's chunk: a prompt holds its rank for several
lockstep steps while prompts on other ranks ride the same steps, so the estimate's prefill stall is how
often any rank prefills (`any_busy`), and it agrees with the simulation (new-user trial: the estimate
priced such prompts as packed over every rank, TPOT 41 ms against a simulated 116 ms for vLLM, and as
one whole-instance stall per prompt, 287 ms against 90 ms for SGLang)."""

from __future__ import annotations

import math

import pytest

from planner.inputs.scenario import parse_scenario
from planner.model.defaults import resolve
from planner.model.estimator import estimate
from planner.model.queueing import any_busy
from planner.model.simulate import run_simulation
from simulator import SimConfig


def test_any_busy_is_the_utilisation_for_one_server_and_m_g_inf_for_many():
    assert any_busy(1, 0.3) == pytest.approx(0.3)
    assert any_busy(2, 1.0) == pytest.approx(2 / 3)  # M/M/2: P0 = 1/3
    assert any_busy(5000, 0.72) == pytest.approx(1 - math.exp(-0.72))
    assert any_busy(8, 0.0) == 0.0
    assert any_busy(8, 8.0) == 1.0
    loads = [any_busy(8, a) for a in (0.1, 0.5, 1.0, 4.0, 7.9)]
    assert loads == sorted(loads)
    assert any_busy(1, 0.5) > any_busy(8, 0.5)  # more ranks overlap more prompts


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_dp_long_prompt_estimate_agrees_with_the_simulation(engine: str) -> None:
    res = resolve(
        parse_scenario(
            {
                "model": "deepseek-v3",
                "hardware": "h200-sxm",
                "engine": engine,
                "deployment": {"aggregated": {"gpus_per_instance": 8, "tp": 1, "dp_attention": 8, "ep": 8}},
                "workload": {"isl": 32000, "osl": 2000, "request_rate": 0.1},
            }
        )
    )
    est = estimate(res)
    _, summary = run_simulation(res, SimConfig(requests=300))
    assert est.ttft_s * 1e3 == pytest.approx(summary["ttft_ms"]["mean"], rel=0.2)
    assert est.tpot_s * 1e3 == pytest.approx(summary["tpot_ms"]["mean"], rel=0.2)


def test_a_chunked_prefill_breakdown_sums_to_its_time():
    """New-user trial: 'prefill step: 7,899.91 ms for 256,000 tokens' listed one chunk's ops (2,565 ms)."""
    from planner.model.steps import prefill_step

    res = resolve(
        parse_scenario(
            {
                "model": "deepseek-v3",
                "hardware": "h200-sxm",
                "engine": "vllm",
                "deployment": {"aggregated": {"gpus_per_instance": 8, "tp": 1, "dp_attention": 8, "ep": 8}},
                "workload": {"isl": 32000, "osl": 2000, "request_rate": 0.1},
            }
        )
    )
    step, _ = prefill_step(res.deployment.pools[0], 32000, 1)
    assert sum(o.time_s for o in step.ops) == pytest.approx(step.time_s, rel=1e-6)

"""A short answer rides the prefill spell it starts in (planner.model.ride), and Poisson prompts over several
instances queue as the least-loaded router queues them (queueing.mdc_wait): the estimate agrees with the
simulation of the same deployment where the ninth new-user trial found it 1.6-4.4x off."""

from __future__ import annotations

import pytest

from planner.inputs.scenario import Scenario
from planner.model.defaults import resolve
from planner.model.estimator import estimate
from planner.model.queueing import md1_wait, mdc_wait
from planner.model.ride import admitted, ridden_step, spell
from planner.model.simulate import run_simulation

LONG_PROMPT = {  # the trial's row: 32,000-token prompts, 50-token answers, vLLM on one H100 at 75% prefill
    "name": "qwen3-30b-a3b 32k/50",
    "model": "qwen3-30b-a3b",
    "hardware": "h100-sxm",
    "engine": "vllm",
    "deployment": {"aggregated": {"instances": 1, "gpus_per_instance": 1, "tp": 1}},
    "precision": {"attention": "fp8", "kv_cache": "fp8", "dense": "fp8", "moe": "fp8"},
    "workload": {"isl": 32000, "osl": 50, "request_rate": 0.7357},
    "runtime": {"mem_fraction": 0.85},
    "simulation": {"requests": 4000, "seed": 1},
}


def _both(scenario: dict) -> tuple[float, float, float, float]:
    res = resolve(Scenario.model_validate(scenario))
    est = estimate(res)
    _, sim = run_simulation(res)
    return est.ttft_s * 1e3, est.tpot_s * 1e3, sim["ttft_ms"]["mean"], sim["tpot_ms"]["mean"]


@pytest.mark.parametrize("instances", [1, 8])
def test_a_short_answer_after_a_long_prompt_is_estimated_as_simulated(instances):
    """One instance: TPOT 27.7 ms by the time average where the simulation reads ~120 ms (a request starts
    decoding as its prompt leaves, with others queued 75% of the time). Eight behind the router: TTFT 2,623
    ms as eight M/D/1 queues where the simulation reads ~1,200."""
    s = {
        **LONG_PROMPT,
        "deployment": {"aggregated": {**LONG_PROMPT["deployment"]["aggregated"], "instances": instances}},
    }
    s["workload"] = {**LONG_PROMPT["workload"], "request_rate": 0.7357 * instances}
    ttft, tpot, sim_ttft, sim_tpot = _both(s)
    assert tpot == pytest.approx(sim_tpot, rel=0.15)
    assert ttft == pytest.approx(sim_ttft, rel=0.15)


def test_the_ridden_step_runs_from_where_it_starts_to_the_time_average():
    rho, x, tau_m, tau_p, hold = 0.75, 0.74, 0.262, 0.007, 1.02
    average = 1 / (rho / tau_m + (1 - rho) / tau_p)
    assert ridden_step(rho, x, tau_m, tau_p, hold, 1e7) == pytest.approx(average, rel=1e-3)
    queued, _ = spell(rho, hold)
    assert queued == pytest.approx(rho)  # one M/D/1 server: a departure leaves others behind rho of the time
    assert ridden_step(rho, x, tau_m, tau_p, hold, 1e-9) == pytest.approx(tau_p + (tau_m - tau_p) * rho)
    lives = [1, 10, 49, 200, 2000]
    steps = [ridden_step(rho, x, tau_m, tau_p, hold, n) for n in lives]
    assert steps == sorted(steps, reverse=True)  # longer answers see more of the idle spells
    assert ridden_step(0.0, 0.0, tau_m, tau_p, hold, 49) == tau_p


def test_pooled_waits_are_md1_for_one_server_and_fall_with_more():
    assert mdc_wait(1, 0.8, 2.0) == pytest.approx(md1_wait(0.8, 2.0))
    waits = [mdc_wait(n, 0.8, 2.0) for n in (1, 2, 4, 14)]
    assert waits == sorted(waits, reverse=True)
    assert waits[-1] < 0.1 * waits[0]
    assert mdc_wait(4, 1.0, 2.0) == float("inf")


def test_a_prompt_that_finds_no_slot_stalls_nobody():
    """KV-bound: the queued prompt waits for a slot, so a request's decode does not start in its prefill
    (vLLM, Llama-3.1-8B 100,000/300 on one H100 at 0.1 req/s: 81.7 ms by estimate, 74.3 simulated)."""
    assert admitted(4, 4) == 0.0
    assert admitted(1, 1000) == pytest.approx(1.0)
    steps = [admitted(b, 8) for b in (1, 4, 7, 8)]
    assert steps == sorted(steps, reverse=True)
    rho, x, tau_m, tau_p, hold = 0.75, 0.74, 0.262, 0.007, 1.02
    average = 1 / (rho / tau_m + (1 - rho) / tau_p)
    assert ridden_step(rho, x, tau_m, tau_p, hold, 49, room=0.0) < average  # starts idle: below the average

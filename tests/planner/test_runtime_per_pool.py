"""Engine limits a launch sets per pool (runtime.max_running_per_rank / max_prefill_tokens as one value
or a mapping from pool role): each pool gets its own, a prefill pool's running limit bounds the prompts
one rank prefills in a step, and a written scenario keeps the per-pool values."""

from __future__ import annotations

import pytest

from planner.inputs.benchmarks import client_config
from planner.inputs.edge import ScenarioError
from planner.inputs.scenario import parse_scenario
from planner.model.defaults import resolve
from planner.model.simulate import run_simulation
from planner.model.write_scenario import to_scenario

PD = {
    "model": "llama-3.1-8b",
    "hardware": "h200-sxm",
    "engine": "trtllm",
    "deployment": {"prefill": {"gpus_per_instance": 1, "tp": 1}, "decode": {"gpus_per_instance": 1, "tp": 1}},
    "workload": {"isl": 1000, "osl": 32, "concurrency": 8},
}


def _limits(res):
    return {
        p.role: (p.instance.runtime.max_running_per_rank, p.instance.runtime.prefill_tokens_per_rank)
        for p in res.deployment.pools
    }


def test_each_pool_takes_its_own_stated_limit_and_a_written_scenario_keeps_them():
    s = parse_scenario(
        {
            **PD,
            "runtime": {"max_running_per_rank": {"prefill": 1, "decode": 3}, "max_prefill_tokens": {"prefill": 2000}},
        }
    )
    res = resolve(s)
    assert _limits(res) == {"prefill": (1, 2000), "decode": (3, 8192)}  # decode: TRT-LLM's default budget
    assert _limits(resolve(parse_scenario(to_scenario(res)))) == _limits(res)
    one = resolve(parse_scenario({**PD, "runtime": {"max_running_per_rank": 5}}))
    assert {r: v[0] for r, v in _limits(one).items()} == {"prefill": 5, "decode": 5}


def test_a_prefill_pool_limited_to_one_prompt_per_step_serves_a_burst_one_by_one():
    """A burst of 8 prompts of 1,000 tokens fits one 8,192-token step (all first tokens at once); one
    prompt per step serves them in 8 steps: the first leaves after its own step, the last after all."""
    free = resolve(parse_scenario(PD))
    one = resolve(parse_scenario({**PD, "runtime": {"max_running_per_rank": {"prefill": 1}}}))
    cfg = client_config(8, num_prompts=8, client="aiperf")
    _, m_free = run_simulation(free, cfg, extend=False)
    _, m_one = run_simulation(one, cfg, extend=False)
    t_free, t_one = m_free["ttft_ms"], m_one["ttft_ms"]
    assert t_free["p99"] == pytest.approx(t_free["p50"])  # one step for all
    assert t_one["p99"] > t_free["p99"] > t_one["p50"]  # spread over 8 smaller steps, each paying its overhead


def test_a_per_pool_value_for_an_unknown_role_is_one_error_naming_it():
    with pytest.raises(ScenarioError, match=r"runtime.max_running_per_rank.prefil"):
        parse_scenario({**PD, "runtime": {"max_running_per_rank": {"prefil": 1}}})

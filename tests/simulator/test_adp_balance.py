"""TRT-LLM's attention-DP balance (simulator/adp_balance.py): the gate follows
PyExecutor._balance_adp_requests, and an instance with it on holds prompts back (longer TTFT) while
prefilling them together (fewer steps rounded up to a prompt per rank)."""

from __future__ import annotations

import pytest

from planner.inputs.scenario import ScenarioError, parse_scenario
from planner.model.defaults import resolve
from planner.model.simulate import run_simulation
from simulator import SimConfig
from simulator.adp_balance import ADPBalance


def test_gate_waits_for_every_rank_or_the_timeout():
    g = ADPBalance(ranks=4, timeout_iters=3, batching_wait_iters=2)
    # one prompt waiting, every rank decoding: held until the third iteration, then the count resets
    assert [g.release(1, 8, 9, 100) for _ in range(4)] == [False, False, True, False]
    # a prompt per rank: the batching wait (2 iterations), then released
    g = ADPBalance(ranks=4, timeout_iters=3, batching_wait_iters=2)
    assert [g.release(4, 8, 12, 100) for _ in range(3)] == [False, False, True]
    # some rank without a generation request: contexts run at once
    assert ADPBalance(4, 50, 10).release(1, 2, 3, 100) is True
    assert ADPBalance(4, 50, 10).release(4, 2, 6, 100) is True
    # the instance at its running limit: no free slot, the waiting count advances
    g = ADPBalance(ranks=4, timeout_iters=2, batching_wait_iters=0)
    assert [g.release(4, 8, 100, 100) for _ in range(2)] == [False, True]


BASE = {
    "model": "deepseek-v3",
    "hardware": "b200",
    "engine": "trtllm",
    "deployment": {"aggregated": {"gpus_per_instance": 8, "tp": 1, "dp_attention": 8, "ep": 8}},
    "precision": {"moe": "nvfp4", "kv_cache": "fp8"},
    "workload": {"isl": 800, "osl": 400, "request_rate": 4.0},
}


def _run(runtime):
    res = resolve(parse_scenario({**BASE, "runtime": runtime}))
    cfg = SimConfig(requests=400, warmup_fraction=0.2)
    return res, run_simulation(res, cfg, extend=False)[1]


def test_balance_holds_prompts_and_batches_their_prefill():
    res_off, off = _run({})
    res_on, on = _run({"adp_balance_timeout_iters": 9, "adp_balance_batching_wait_iters": 3})
    assert res_off.deployment.pools[0].instance.runtime.adp_balance_timeout_iters is None  # TRT-LLM default: off
    assert res_on.deployment.pools[0].instance.runtime.adp_balance_timeout_iters == 9
    # at 4 requests/s, a few per 9 iterations: a prompt waits for the timeout, several iterations
    assert on["ttft_ms"]["mean"] > off["ttft_ms"]["mean"] + 2 * off["tpot_ms"]["mean"]
    # prompts prefilled together waste fewer ranks' prefill slots: decoding gets faster
    assert on["tpot_ms"]["mean"] < off["tpot_ms"]["mean"]


def test_one_count_stated_takes_the_other_from_trtllm_defaults_and_other_engines_refuse_it():
    res = resolve(parse_scenario({**BASE, "runtime": {"adp_balance_batching_wait_iters": 2}}))
    rt = res.deployment.pools[0].instance.runtime
    assert (rt.adp_balance_timeout_iters, rt.adp_balance_batching_wait_iters) == (50, 2)  # AttentionDpConfig default
    with pytest.raises(ScenarioError, match="attention-DP balance"):
        parse_scenario({**BASE, "engine": "sglang", "runtime": {"adp_balance_timeout_iters": 9}})

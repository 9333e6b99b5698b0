"""Prompts scheduled only whole: TRT-LLM's default (enable_chunked_prefill off), `runtime.chunked_prefill`.

Without chunked prefill TRT-LLM's MicroBatchScheduler takes a context request only whole and stops at
the first one that does not fit what the generation requests leave of max_num_tokens; vLLM and SGLang
split a prompt over steps. An engine launched without chunking for prompts longer than its default
budget gets a budget that holds a whole prompt beside its running requests (trtllm-bench's rule).
"""

from __future__ import annotations

import numpy as np

from planner.engines import runtime_options
from planner.inputs.question import Question, with_context_in_flight
from planner.model.estimator import estimate
from planner.model.simulate import pool_defs
from roofline.catalog import get_hardware
from roofline.deployment import Parallelism
from simulator import SimConfig, build_workload, simulate
from simulator.workload import KV_DRAWS, draw_lengths, longest_prompt
from tests.simulator.helpers import AGG_LLAMA, scenario

ISL, BUDGET = 3000, 4096
WORKLOAD = {"isl": ISL, "osl": 200, "request_rate": 12.0}
CFG = SimConfig(requests=300, seed=3)
BATCH, OUT, IN = 2, 3, 4  # step log columns (simulator.engine.SimResult.steps)


def _steps(engine: str, chunked: bool | None = None) -> np.ndarray:
    runtime: dict[str, object] = {"max_prefill_tokens": BUDGET}
    if chunked is not None:
        runtime["chunked_prefill"] = chunked
    res = scenario({**AGG_LLAMA, "engine": engine}, WORKLOAD, runtime=runtime)
    wl = build_workload(CFG, res.isl, res.osl, res.concurrency, res.request_rate, None)
    return simulate(pool_defs(res), wl, CFG, res.deployment.same_domain).steps


def test_trtllm_prefills_only_whole_prompts_within_the_budget():
    steps = _steps("trtllm")
    prefill = steps[steps[:, IN] > 0]
    assert len(prefill) > 50
    assert (prefill[:, IN] % ISL == 0).all(), "a prompt is never split over steps"
    # a prompt enters only where the running decodes leave room for all of it
    assert (prefill[:, IN] + prefill[:, BATCH] <= BUDGET).all()
    assert (prefill[:, BATCH] > 0).any(), "prompts still join steps that carry decodes"


def test_chunked_prefill_splits_prompts_where_it_is_on():
    for engine, chunked in (("vllm", None), ("trtllm", True)):
        prefill = _steps(engine, chunked)
        prefill = prefill[prefill[:, IN] > 0]
        assert (prefill[:, IN] % ISL != 0).any(), engine


def test_a_trtllm_budget_holds_a_whole_prompt_beside_its_running_requests():
    par, hw = Parallelism(gpus=1), get_hardware("h100-sxm")
    default = runtime_options("trtllm", "aggregated", par, hw).prefill_tokens_per_rank
    running = runtime_options("trtllm", "aggregated", par, hw).max_running_per_rank
    assert runtime_options("trtllm", "aggregated", par, hw, isl=1000).prefill_tokens_per_rank == default
    note: list[str] = []
    rt = runtime_options("trtllm", "aggregated", par, hw, note=note, isl=16000)
    assert rt.prefill_tokens_per_rank == 16000 + running
    assert not rt.chunked_prefill
    assert any("runtime.prefill_tokens_per_rank: 18048" in n and "trtllm-bench" in n for n in note)
    assert runtime_options("trtllm", "prefill", par, hw, isl=16000).prefill_tokens_per_rank == 16000
    stated = runtime_options("trtllm", "aggregated", par, hw, {"prefill_tokens_per_rank": 9000}, isl=16000)
    assert stated.prefill_tokens_per_rank == 9000  # stated as launched
    chunked = runtime_options("trtllm", "aggregated", par, hw, {"chunked_prefill": True}, isl=16000)
    assert chunked.prefill_tokens_per_rank == default
    assert runtime_options("vllm", "aggregated", par, hw, isl=16000).chunked_prefill


def test_the_estimate_takes_fewer_decodes_where_no_step_has_room_for_a_whole_prompt():
    """At a budget a 3,000-token prompt barely fits (3,100), whole prompts cap the decodes beside them
    at 100; chunked, the same budget holds more (the KV pool holds about 130 such sequences)."""
    load, budget = {"isl": ISL, "osl": 200, "concurrency": 2000}, ISL + 100
    whole = estimate(scenario({**AGG_LLAMA, "engine": "trtllm"}, load, runtime={"max_prefill_tokens": budget}))
    chunked = estimate(
        scenario(
            {**AGG_LLAMA, "engine": "trtllm"}, load, runtime={"max_prefill_tokens": budget, "chunked_prefill": True}
        )
    )
    assert whole.limit.startswith("whole prompt")
    assert whole.decode_batch <= 100 + 1e-9 < chunked.decode_batch


def test_the_budget_holds_the_longest_prompt_the_workload_sends_not_its_mean():
    """Spread prompt lengths (MLPerf gpt-oss: mean 5,011, lognormal) reach far past their mean; an engine
    that takes prompts only whole is sized for the longest, as trtllm-bench sizes max_num_tokens from the
    dataset's max_isl. Sized for the mean, the prompts past the budget would block the queue behind them
    until the running decodes drain (and TRT-LLM would refuse those past max_num_tokens outright)."""
    spread = {"input_len": {"kind": "lognormal", "mean": 5000.0, "sigma": 0.45}}
    cfg = SimConfig.model_validate(spread)
    longest = longest_prompt(cfg, 5000, 1000)
    drawn = draw_lengths(cfg, KV_DRAWS, 5000, 1000, np.random.default_rng(cfg.seed), None, [])[0]
    assert 15000 < longest == int(drawn.max())
    assert longest_prompt(None, 5000, 1000) == 5000
    assert longest_prompt(SimConfig.model_validate({"input_len": {"kind": "fixed", "value": 5000}}), 5000, 10) == 5000
    load = {"isl": 5000, "osl": 1000, "request_rate": 1.0}
    res = scenario({**AGG_LLAMA, "engine": "trtllm"}, load, spread)
    rt = res.deployment.pools[0].instance.runtime
    assert rt.prefill_tokens_per_rank == longest + rt.max_running_per_rank
    fixed = scenario({**AGG_LLAMA, "engine": "trtllm"}, load).deployment.pools[0].instance.runtime
    assert fixed.prefill_tokens_per_rank < longest  # the default budget holds a fixed 5,000-token prompt
    q = with_context_in_flight(Question(model="llama-3.1-8b", hardware="h100-sxm", gpus=1, isl=5000, osl=1000,
                                        simulation=cfg))  # fmt: skip
    assert q.max_isl == longest  # the search prices the pools it would launch

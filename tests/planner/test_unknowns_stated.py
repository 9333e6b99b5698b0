"""The search for unknown deployment fields can express what a source states: instance counts the
planner's sizing would not pick, layouts outside the plan's own space, prefill and decode pools of
different sizes, and, when the default precision does not fit, a precision the hardware runs."""

from __future__ import annotations

from typing import Any

import pytest

from planner.inputs.scenario import Scenario
from planner.model.estimator import estimate
from planner.search.unknowns import resolve_any
from roofline.errors import PlannerError

U = "unknown"


def _pool(**stated: int) -> dict[str, Any]:
    return {f: stated.get(f, U) for f in ("instances", "gpus_per_instance", "tp", "dp_attention", "ep", "pp")}


def _resolve(deployment: dict[str, Any], metric: str = "total_tok_s_per_gpu", **extra: Any):
    data = {
        "model": "deepseek-v3",
        "hardware": "b200",
        "engine": "trtllm",
        "deployment": deployment,
        "precision": {"moe": "nvfp4"},
        "workload": {"isl": 1024, "osl": 1024, "concurrency": 45},
        **extra,
    }
    return resolve_any(Scenario.model_validate(data), None, metric)


def _layouts(res) -> list[tuple[str, int, int]]:
    return [(p.role, p.instances, p.parallel.gpus) for p in res.deployment.pools]


def test_stated_odd_instance_counts_are_kept():
    """InferenceX: 1 prefill instance of TP4 and 5 decode instances of EP8 (44 GPUs)."""
    res = _resolve(
        {
            "prefill": _pool(instances=1, gpus_per_instance=4, tp=4),
            "decode": _pool(instances=5, gpus_per_instance=8, ep=8),
        }
    )
    assert _layouts(res) == [("prefill", 1, 4), ("decode", 5, 8)]
    assert res.deployment.gpus == 44


def test_an_unstated_prefill_count_is_searched_beside_a_stated_decode_pool():
    res = _resolve({"prefill": _pool(), "decode": _pool(instances=5, gpus_per_instance=4, tp=1, dp_attention=4, ep=4)})
    pools = dict((r, (n, g)) for r, n, g in _layouts(res))
    assert pools["decode"] == (5, 4)
    assert pools["prefill"][0] >= 1
    assert any("searched" in a for a in res.assumed)


def test_a_layout_outside_the_plan_space_is_searched_when_stated():
    """SGLang's blog: one prefill instance of 32 H100 with EP32 (the plan space caps prefill at 16)."""
    data = {
        "model": "deepseek-v3",
        "hardware": "h100-sxm",
        "engine": "sglang",
        "phase": "prefill",
        "deployment": {"prefill": _pool(instances=1, gpus_per_instance=32, ep=32, pp=1)},
        "workload": {"isl": 1000, "osl": 1},
    }
    res = resolve_any(Scenario.model_validate(data), None, "input_tok_s_per_gpu")
    (pool,) = res.deployment.pools
    assert (pool.parallel.gpus, pool.parallel.ep) == (32, 32)


def test_a_stated_tp_of_any_divisor_is_expressible():
    """TP 12 of 12 GPUs (InferenceX 'TP=12'), though 12 divides neither 128 heads nor 256 experts."""
    res = _resolve(
        {
            "prefill": _pool(instances=1, gpus_per_instance=12, tp=12, ep=12),
            "decode": _pool(instances=1, gpus_per_instance=8, ep=8),
        }
    )
    assert res.deployment.pools[0].parallel.tp == 12


def test_unknown_precision_that_does_not_fit_is_searched_and_said():
    """Kimi-K2 (1T parameters, FP8 checkpoint) on 4x B200: FP8 experts exceed memory; NVFP4 fits."""
    data = {
        "model": "kimi-k2",
        "hardware": "b200",
        "engine": "vllm",
        "deployment": {"aggregated": _pool(instances=1, gpus_per_instance=4, tp=4)},
        "workload": {"isl": 1024, "osl": 1024, "concurrency": 8},
    }
    res = resolve_any(Scenario.model_validate(data), None, "output_tok_s_per_gpu")
    assert res.deployment.pools[0].instance.precision.moe == "nvfp4"
    assert any(a.startswith("precision: searched") for a in res.assumed)


def test_a_stated_precision_that_does_not_fit_stays_an_error():
    data = {
        "model": "kimi-k2",
        "hardware": "b200",
        "engine": "vllm",
        "deployment": {"aggregated": _pool(instances=1, gpus_per_instance=4, tp=4)},
        "precision": {"dense": "fp8", "moe": "fp8"},
        "workload": {"isl": 1024, "osl": 1024, "concurrency": 8},
    }
    with pytest.raises(PlannerError, match="no deployment"):
        resolve_any(Scenario.model_validate(data), None, "output_tok_s_per_gpu")


def test_a_decode_anchor_keeps_the_stated_aggregated_instance():
    """LMSYS gpt-oss batch-1 table: the decode phase of a stated TP4 aggregated instance on 4 GPUs
    (expert split unknown) is that instance, not a searched 8-GPU layout."""
    res = _resolve(
        {"aggregated": _pool(instances=1, gpus_per_instance=4, tp=4, dp_attention=1, pp=1)},
        "output_tok_s_per_user",
        phase="decode",
        model="gpt-oss-120b",
        engine="sglang",
        precision={"moe": "mxfp4"},
        workload={"isl": 1024, "osl": 1024, "concurrency": 1, "concurrency_scope": "total"},
    )
    (pool,) = res.deployment.pools
    assert (pool.parallel.gpus, pool.parallel.tp, pool.parallel.dp_attention) == (4, 4, 1)


def _gpt_oss(kv: str, metric: str = "output_tok_s_per_gpu"):
    data = {
        "model": "gpt-oss-120b",
        "hardware": "b200",
        "engine": "trtllm",
        "deployment": {"aggregated": _pool()},
        "precision": {"kv_cache": kv},
        "workload": {"isl": 5000, "osl": 1300},
    }
    return resolve_any(Scenario.model_validate(data), None, metric)


def test_an_unknown_kv_cache_dtype_is_searched_with_an_unknown_layout():
    """gpt-oss-120b's checkpoint has no ModelOpt KV quantization, so TensorRT-LLM's default KV cache is
    BF16; with the layout unknown, the KV dtype (a launch flag) is searched like it, as `planner plan`
    searches it: FP8 holds twice the sequences, so a saturated run reads more tokens per GPU with it.
    A stated KV dtype is kept."""
    searched = _gpt_oss(U)
    assert all(p.instance.precision.kv_cache == "fp8" for p in searched.deployment.pools)
    assert any(n.startswith("precision: searched (kv_cache unknown") for n in searched.assumed)
    stated = _gpt_oss("bf16")
    assert all(p.instance.precision.kv_cache == "bf16" for p in stated.deployment.pools)
    assert not any(n.startswith("precision: searched") for n in stated.assumed)


def test_a_saturated_search_picks_its_deployment_by_the_figure_it_reports():
    """A throughput question with no traffic is answered by the saturated estimate of the chosen
    deployment; the search must rank candidates by that figure. Ranked by the plan sweep's operating
    points (prefill pool sized for 80% load, swept batches), DeepSeek-V3 32k/2k on one B300 node chose
    2x prefill DP2 + 2x decode DP2, 200 tok/s/GPU saturated, where 2x prefill DP2 + 1x decode TP4 gives
    253 (on a 72-GPU GB300 long-context search: 95.5 chosen against 112 for another layout)."""
    data = {
        "model": "deepseek-v3",
        "hardware": "b300",
        "engine": "sglang",
        "deployment": {"prefill": U, "decode": U},
        "precision": {"moe": "nvfp4", "kv_cache": "fp8"},
        "workload": {"isl": 32768, "osl": 2048},
    }
    searched = resolve_any(Scenario.model_validate(data), None, "output_tok_s_per_gpu")
    got = estimate(searched).output_tok_s_per_gpu
    dp2 = {"instances": 2, "gpus_per_instance": 2, "tp": 1, "dp_attention": 2, "ep": 1, "pp": 1}
    swept_best = {"prefill": dp2, "decode": dp2}
    stated = resolve_any(Scenario.model_validate({**data, "deployment": swept_best}), None, "output_tok_s_per_gpu")
    assert got > estimate(stated).output_tok_s_per_gpu


def test_a_stated_gpu_count_is_the_deployments_whatever_the_traffic():
    """`deployment.gpus` with the layout unknown: every layout searched uses exactly that many GPUs. At a
    request rate beyond what they serve (MLPerf's 4x RTX PRO 6000 at its submitted rate) the search found
    no deployment of 4 GPUs (it sized instances for the rate) and the anchor was one error; saturated, it
    chose 12 of 16 GPUs and divided by 12."""
    data = {
        "model": "llama-3.1-8b",
        "hardware": "rtx-pro-6000",
        "engine": "trtllm",
        "deployment": {"gpus": 4, "aggregated": U},
        "precision": {"dense": "nvfp4"},
        "workload": {"isl": 871, "osl": 129, "request_rate": 400.0},
    }
    res = resolve_any(Scenario.model_validate(data), None, "ttft_ms")
    assert res.deployment.gpus == 4
    gb300 = {
        "model": "deepseek-v3",
        "hardware": "gb300-nvl72",
        "engine": "sglang",
        "deployment": {"gpus": 16, "prefill": U, "decode": U},
        "precision": {"attention": "fp8", "kv_cache": "fp8", "moe": "nvfp4"},
        "workload": {"isl": 131072, "osl": 8192},
    }
    assert resolve_any(Scenario.model_validate(gb300), None, "output_tok_s_per_gpu").deployment.gpus == 16


def test_a_saturated_search_skips_a_layout_its_saturated_run_cannot_price():
    """DeepSeek-V3 8k/1k on GB200 NVL72, every deployment field unknown: a TP4 layout the sweep priced at
    small batches cannot hold its saturated run's full prefill batch beside the weights under SGLang's
    memory fraction; the search drops it instead of failing the whole question."""
    data = {
        "model": "deepseek-v3",
        "hardware": "gb200-nvl72",
        "engine": "sglang",
        "workload": {"isl": 8192, "osl": 1024},
    }
    res = resolve_any(Scenario.model_validate(data), None, "output_tok_s_per_gpu")
    assert estimate(res).output_tok_s_per_gpu > 0


def test_the_search_prices_each_layout_at_its_own_default_memory_fraction():
    """SGLang's default fraction depends on the layout (a rule by TP size; 0.85 under attention DP). The
    search priced every layout at the fraction of its one-GPU probe, so on 4 GB300 GPUs it chose DP4 for
    DeepSeek-V4-Pro with NVFP4 experts (245.1 GB of weights under the probe's fraction of 279 GB),
    which the resolution then refused at DP4's own 0.85 (237 GB): one error for the anchor."""
    data = {
        "model": "deepseek-v4-pro",
        "hardware": "gb300-nvl72",
        "engine": "sglang",
        "deployment": {"aggregated": {**_pool(instances=1, gpus_per_instance=4, pp=1)}},
        "precision": {"attention": "fp8", "kv_cache": "fp8", "dense": "fp8", "moe": "nvfp4"},
        "workload": {"isl": 8192, "osl": 1024, "concurrency": 16},
    }
    res = resolve_any(Scenario.model_validate(data), None, "tpot_ms")
    pool = res.pool("aggregated")
    assert pool.gpus_per_instance == 4
    assert estimate(res).tpot_s > 0

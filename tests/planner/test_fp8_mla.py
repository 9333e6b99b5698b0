"""An unstated attention precision follows the engine: TensorRT-LLM (and SGLang's trtllm_mla backend on
sm100) run the MLA generation attention in FP8 against an FP8 KV cache (engine profile
`fp8_mla_decode_with_fp8_kv`); everything else, and every MLA prefill, keeps BF16 math."""

from __future__ import annotations

import pytest

from planner.inputs.scenario import parse_scenario
from planner.model.defaults import Resolved, resolve
from roofline.batch import StepBatch
from roofline.deployment import InstanceSpec
from roofline.step import step_cost


def _resolve(engine: str, hardware: str, kv: str = "fp8", model: str = "deepseek-v3", dp: int = 1) -> Resolved:
    ep = 1 if model.startswith("llama") else 8
    return resolve(
        parse_scenario(
            {
                "model": model,
                "hardware": hardware,
                "engine": engine,
                "deployment": {"aggregated": {"gpus_per_instance": 8, "tp": 8 // dp, "dp_attention": dp, "ep": ep}},
                "precision": {"kv_cache": kv},
                "workload": {"isl": 1000, "osl": 100, "concurrency": 4},
            }
        )
    )


def _attention(engine: str, hardware: str, **kw: str) -> str:
    return str(_resolve(engine, hardware, **kw).deployment.first("aggregated").instance.precision.attention)


@pytest.mark.parametrize(
    ("engine", "hardware", "expected"),
    [
        ("trtllm", "h200-sxm", "fp8"),  # FP8 FlashMLA, TRT-LLM's Hopper default (PR #3190)
        ("trtllm", "b200", "fp8"),  # trtllm-gen FP8 MLA
        ("sglang", "b200", "fp8"),  # trtllm_mla, SGLang's DeepSeek default on sm100
        ("sglang", "gb300-nvl72", "fp8"),  # sm_103 runs sm_100's profile
        ("sglang", "h200-sxm", "bf16"),
        ("vllm", "b200", "bf16"),
        ("other", "b200", "bf16"),
    ],
)
def test_unstated_mla_attention_follows_the_engine(engine: str, hardware: str, expected: str) -> None:
    assert _attention(engine, hardware) == expected


def test_a_bf16_kv_cache_or_a_non_mla_model_keeps_bf16_math() -> None:
    assert _attention("trtllm", "b200", kv="bf16") == "bf16"
    assert _attention("trtllm", "b200", model="llama-3.1-70b") == "bf16"


def test_the_assumption_is_listed_with_its_source() -> None:
    notes = _resolve("trtllm", "b200").assumed
    assert any(n.startswith("precision.attention: fp8 (on MLA decode") and "PR #3190" in n for n in notes), notes


def test_fp8_math_speeds_the_mla_decode_not_the_prefill() -> None:
    fp8 = _resolve("trtllm", "b200", dp=8).deployment.first("aggregated").instance
    bf16 = fp8.model_copy(update={"precision": fp8.precision.model_copy(update={"attention": "bf16"})})

    def attention(inst: InstanceSpec, batch: StepBatch) -> float:
        return sum(o.time_s for o in step_cost(inst, batch).ops if o.category == "attention")

    decode = StepBatch.decode(4096, 3000)
    # attention DP: each rank runs all 128 heads, a compute-bound MLA decode at twice the rate (a TP8
    # rank's 16 heads read the same latent KV for an eighth of the math: memory-bound either way)
    assert attention(bf16, decode) / attention(fp8, decode) > 1.5
    prefill = StepBatch.prefill([(8192, 0)])
    assert attention(bf16, prefill) == pytest.approx(attention(fp8, prefill))  # the context MLA stays BF16


@pytest.mark.parametrize(("hardware", "expected"), [("b200", "fp8"), ("h200-sxm", "bf16")])
def test_a_searched_fp8_cache_gets_the_attention_math_the_engine_runs_over_it(hardware: str, expected: str) -> None:
    """An unknown KV dtype is searched (FP8 where it serves the metric better); the attention math that
    comes with the FP8 cache is the engine's (SGLang: trtllm_mla FP8 on sm100, BF16 on Hopper)."""
    from pathlib import Path

    from planner.search.unknowns import resolve_any

    s = parse_scenario(
        {
            "model": "deepseek-v3",
            "hardware": hardware,
            "engine": "sglang",
            "deployment": {"aggregated": {"instances": 1, "gpus_per_instance": 8, "tp": "unknown", "ep": "unknown"}},
            "workload": {"isl": 1000, "osl": 1000, "concurrency": 2048},
        }
    )
    prec = resolve_any(s, Path("."), "output_tok_s_per_gpu").deployment.first("aggregated").instance.precision
    assert prec.kv_cache == "fp8"
    assert prec.attention == expected


@pytest.mark.parametrize(
    ("model", "precision", "expected"),
    [
        ("deepseek-v3", {}, "bf16"),  # DeepSeek's own block-FP8 release: no kv_cache_quant_algo
        ("kimi-k2", {}, "bf16"),
        ("deepseek-v3", {"moe": "nvfp4"}, "fp8"),  # NVIDIA's ModelOpt NVFP4 checkpoint
        ("llama-3.1-70b", {"dense": "fp8"}, "fp8"),  # ModelOpt FP8 of a 16-bit model
        ("llama-3.1-70b", {}, "bf16"),
    ],
)
def test_trtllm_kv_cache_follows_the_checkpoint(model: str, precision: dict[str, str], expected: str) -> None:
    ep = 1 if model.startswith("llama") else 8
    s = parse_scenario(
        {
            "model": model,
            "hardware": "b200",
            "engine": "trtllm",
            "deployment": {"aggregated": {"gpus_per_instance": 8, "tp": 8, "ep": ep}},
            "precision": precision,
            "workload": {"isl": 1000, "osl": 100, "concurrency": 4},
        }
    )
    pool = resolve(s).deployment.first("aggregated")
    assert pool is not None
    assert pool.instance.precision.kv_cache == expected


def test_explain_offers_fp8_mla_math_only_where_the_engine_runs_it() -> None:
    """`planner explain`'s levers follow the same rule: vLLM keeps BF16 MLA math over an FP8 cache, so no
    'fp8 attention' lever is offered there, and its FP8-cache lever keeps BF16 math; TensorRT-LLM's is FP8."""
    from planner.model.explain import candidate_levers

    def levers(engine: str, kv: str) -> dict[str, str]:
        res = _resolve(engine, "h200-sxm", kv=kv)
        main = res.deployment.first("aggregated").instance
        found = candidate_levers(res, main).items()
        return {name: str(change(main).precision.attention) for name, (change, _) in found}

    assert not any("attention (KV cache already fp8)" in n for n in levers("vllm", "fp8"))
    assert levers("vllm", "bf16")["fp8 KV cache (bf16 attention math, the engine's)"] == "bf16"
    assert levers("trtllm", "bf16")["fp8 attention and KV cache"] == "fp8"


def test_the_search_tries_a_published_checkpoints_own_experts_everywhere_they_run() -> None:
    """gpt-oss-120b's and DeepSeek-V4's published experts are MXFP4: the plan tries them on Blackwell too
    (beside NVFP4 and FP8), not only on Hopper; an imported NVFP4 checkpoint defaults to NVFP4 experts."""
    from planner.model.defaults import checkpoint_formats
    from planner.search.space import precisions
    from roofline.catalog import get_hardware, get_model

    for model in ("gpt-oss-120b", "deepseek-v4-flash"):
        for hw in ("b200", "h200-sxm", "rtx-pro-6000"):
            assert "mxfp4" in {p.moe for p in precisions(get_model(model), get_hardware(hw))}, (model, hw)
    assert "mxfp4" not in {p.moe for p in precisions(get_model("deepseek-v3"), get_hardware("b200"))}
    nvfp4 = get_model("qwen3-30b-a3b").model_copy(update={"checkpoint_format": "nvfp4"})
    assert checkpoint_formats(nvfp4) == ("fp8", "nvfp4")

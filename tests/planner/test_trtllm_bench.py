"""trtllm-bench's own engine limits (planner/inputs/trtllm_bench.py): its tuning heuristic's arithmetic,
and anchors measured with it that state no limits."""

from __future__ import annotations

import copy
from pathlib import Path

from planner.inputs.scenario import load_yaml
from planner.inputs.trtllm_bench import settings
from planner.search.validate import predict_anchor
from roofline.catalog import get_hardware, get_model

PUBLIC = Path(__file__).resolve().parents[2] / "validation" / "public"


def _bench(model, hw, world, dense, moe, isl, osl, pp=1, chunked=False):
    return settings(get_model(model), get_hardware(hw), world, pp, dense, moe, "fp8", isl, osl, 0.9, chunked)


def test_a_small_model_hits_the_4096_request_and_the_token_caps():
    """Llama-3.1-8B FP8 on one H100 at 128/128: the KV pool holds far more than 4096 requests, so the
    batch is the cap (4096) and the tokens 4096 x (1 + 128/128) = 8192."""
    assert _bench("llama-3.1-8b", "h100-sxm", 1, "fp8", "fp8", 128, 128) == (4096, 8192)


def test_mla_models_are_sized_as_128_kv_heads_of_56():
    """DeepSeek-V3's config declares num_key_value_heads 128 and no head_dim: the heuristic counts
    2 x 61 x 128 x 56 bytes of FP8 KV per token (not the 35 KB latent), so at 8192/1024 on 4 B200 a few
    dozen requests fit: the batch rounds up to 96 (32s above the 64 floor), and the tokens to the
    whole prompt beside it (no chunked prefill): 8192 + 96."""
    assert _bench("deepseek-v3", "b200", 4, "nvfp4", "nvfp4", 8192, 1024) == (96, 8288)
    bs, tokens = _bench("deepseek-v3", "b200", 4, "nvfp4", "nvfp4", 8192, 1024, chunked=True)
    assert (bs, tokens) == (96, 2048)  # chunked: the heuristic's own floor of 2048 tokens


def test_pipeline_stages_divide_the_batch():
    one = _bench("llama-3.1-70b", "rtx-pro-6000", 2, "nvfp4", "nvfp4", 1000, 1000)
    two = _bench("llama-3.1-70b", "rtx-pro-6000", 2, "nvfp4", "nvfp4", 1000, 1000, pp=2)
    assert one is not None
    assert two is not None
    assert two[0] < one[0]


def test_untuned_quantizations_keep_the_build_defaults():
    """MXFP4 experts (gpt-oss) are outside TUNED_QUANTS: BuildConfig's 2048 and 8192."""
    assert _bench("gpt-oss-120b", "b200", 2, "bf16", "mxfp4", 1000, 1000) == (2048, 8192)


def test_an_anchor_run_with_trtllm_bench_runs_its_limits_unless_it_states_them():
    (a,) = [x for x in load_yaml(PUBLIC / "trtllm-perf-overview.yaml")["anchors"]
            if x["id"] == "trtllm-perf-deepseek-v3-h200-sxm-dep8-fp8-1024-1024"]  # fmt: skip
    assert a["client"] == "trtllm-bench"
    r = predict_anchor(a, PUBLIC)
    said = [n for n in r.assumed if "trtllm-bench's own" in n]
    assert len(said) == 1
    assert "max_running_per_rank" in said[0]
    stated = copy.deepcopy(a)
    stated.setdefault("runtime", {}).update({"max_running_per_rank": 2048, "max_prefill_tokens": 8192})
    r2 = predict_anchor(stated, PUBLIC)
    assert not [n for n in r2.assumed if "trtllm-bench's own" in n]
    assert r2.predicted != r.predicted

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


def _bench(model, hw, world, dense, moe, isl, osl, pp=1, floor=True, frac=0.9):
    return settings(get_model(model), get_hardware(hw), world, pp, dense, moe, "fp8", isl, osl, frac, floor)


def _overview(aid):
    (a,) = [x for x in load_yaml(PUBLIC / "trtllm-perf-overview.yaml")["anchors"] if x["id"] == aid]
    return a


def _said(r):
    return [n for n in r.assumed if "trtllm-bench's own" in n]


def test_a_small_model_hits_the_4096_request_cap():
    """Llama-3.1-8B FP8 on one H100 at 128/128: the KV pool holds far more than 4096 requests, so the
    batch is the cap (4096) and the tokens 4096 x (1 + 128/128) = 8192, already above isl + batch."""
    assert _bench("llama-3.1-8b", "h100-sxm", 1, "fp8", "fp8", 128, 128) == (4096, 8192)


def test_mla_models_are_sized_as_128_kv_heads_of_56():
    """DeepSeek-V3's config declares num_key_value_heads 128 and no head_dim: the heuristic counts
    2 x 61 x 128 x 56 bytes of FP8 KV per token (not the 35 KB latent), so at 8192/1024 on 4 B200 a few
    dozen requests fit: the batch rounds up to 96 (32s above the 64 floor), and the tokens to the
    whole prompt beside it (no chunked prefill): 8192 + 96."""
    assert _bench("deepseek-v3", "b200", 4, "nvfp4", "nvfp4", 8192, 1024) == (96, 8288)
    bs, tokens = _bench("deepseek-v3", "b200", 4, "nvfp4", "nvfp4", 8192, 1024, floor=False)
    assert (bs, tokens) == (96, 2048)  # no whole-prompt floor: the heuristic's own minimum of 2048 tokens


def test_pipeline_stages_divide_the_batch():
    """Llama-3.3-70B FP4 on two RTX PRO 6000 at 1000/1000: about 508 requests fit, 512 as one batch
    (rounded up to 128s), 256 per micro-batch over two stages (254, rounded up to 32s)."""
    assert _bench("llama-3.1-70b", "rtx-pro-6000", 2, "nvfp4", "nvfp4", 1000, 1000) == (512, 2048)
    assert _bench("llama-3.1-70b", "rtx-pro-6000", 2, "nvfp4", "nvfp4", 1000, 1000, pp=2) == (256, 2048)


def test_untuned_quantizations_keep_the_build_defaults():
    """MXFP4 experts (gpt-oss) are outside TUNED_QUANTS: BuildConfig's 2048 and 8192, and on the PyTorch
    path without chunked prefill at least isl + batch (8192 + 2048)."""
    assert _bench("gpt-oss-120b", "b200", 2, "bf16", "mxfp4", 1000, 1000) == (2048, 8192)
    assert _bench("gpt-oss-120b", "b200", 2, "bf16", "mxfp4", 8192, 1024) == (2048, 10240)


def test_a_tensorrt_engine_keeps_the_engine_profile_limits():
    """v0.17 cells build TensorRT engines (`trtllm-bench build`), whose limits come from that release's
    heuristic, which is not read: they keep the engine profile's."""
    a = _overview("trtllm-perf-v017-llama-3-1-70b-h200-sxm-tp8-fp8-20000-2000")
    assert a["runtime"]["backend"] == "tensorrt"
    assert not _said(predict_anchor(a, PUBLIC))


def test_pipeline_anchors_run_max_batch_size_per_micro_batch():
    r = predict_anchor(_overview("trtllm-perf-llama-3-1-70b-rtx-pro-6000-tp1-pp2-fp4-1000-1000"), PUBLIC)
    (said,) = _said(r)
    assert said.startswith("runtime.max_running_per_rank: 512,")  # 256 per micro-batch x 2 stages
    assert "max_batch_size 256 " in said


def test_unknown_lengths_leave_the_anchor_as_it_is():
    a = copy.deepcopy(_overview("trtllm-perf-deepseek-v3-h200-sxm-dep8-fp8-1024-1024"))
    a["workload"]["osl"] = "unknown"
    r = predict_anchor(a, PUBLIC)
    assert r.error is None
    assert not _said(r)


def test_an_anchor_run_with_trtllm_bench_fills_only_the_limits_it_does_not_state():
    a = _overview("trtllm-perf-deepseek-v3-h200-sxm-dep8-fp8-1024-1024")
    assert a["client"] == "trtllm-bench"
    r = predict_anchor(a, PUBLIC)
    (said,) = _said(r)
    assert said.startswith("runtime.max_running_per_rank: ")
    assert "runtime.max_prefill_tokens: " in said
    one = copy.deepcopy(a)
    one.setdefault("runtime", {})["max_running_per_rank"] = 2048
    (said1,) = _said(predict_anchor(one, PUBLIC))
    assert said1.startswith("runtime.max_prefill_tokens: ")  # the stated batch is kept
    both = copy.deepcopy(one)
    both["runtime"]["max_prefill_tokens"] = 8192
    r2 = predict_anchor(both, PUBLIC)
    assert not _said(r2)
    assert r2.predicted != r.predicted


def test_an_offline_run_of_a_stated_size_is_simulated_whole():
    """trtllm-bench throughput without --concurrency enqueues its whole dataset at once and reports output
    tokens over the run's whole span (ramp-up and drain included). The overview states the dataset size
    per ISL/OSL (3000 requests at 1024/1024): such a cell is simulated as that run; without a stated size
    it is the saturated steady state (the estimate). DeepSeek-R1 FP8 on 8 H200 (DEP8) at 1024/1024 holds
    about 3000 requests at once, so the run is one wave that ramps up through 375 prefill steps and
    drains: its throughput is below the steady state's."""
    a = _overview("trtllm-perf-deepseek-v3-h200-sxm-dep8-fp8-1024-1024")
    assert a["simulation"] == {"requests": 3000}
    whole = predict_anchor(a, PUBLIC)
    assert whole.method == "simulate"
    assert any("an offline run of 3,000 requests enqueued at once" in n for n in whole.assumed)
    steady = copy.deepcopy(a)
    del steady["simulation"]
    est = predict_anchor(steady, PUBLIC)
    assert est.method == "estimate"
    assert whole.predicted is not None
    assert est.predicted is not None
    assert 0.75 * est.predicted < whole.predicted < 0.95 * est.predicted

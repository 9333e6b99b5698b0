"""Memory per rank: what fits, by how much it misses, and how many sequences the KV pool holds."""

from __future__ import annotations

import pytest

from roofline.deployment import RuntimeOptions
from roofline.errors import InsufficientMemoryError
from roofline.memory import plan_memory, weight_bytes
from tests.conftest import make_instance


def test_deepseek_v3_fp8_does_not_fit_eight_h100s_and_says_by_how_much():
    with pytest.raises(InsufficientMemoryError, match=r"does not fit: .* by \d+\.\d GB"):
        plan_memory(make_instance(hardware="h100-sxm"))


def test_deepseek_v3_fp8_fits_eight_h200s():
    plan = plan_memory(make_instance())
    assert plan.kv_pool_bytes > 20e9
    assert plan.max_seqs(4000) > 0


def test_fp8_kv_doubles_capacity():
    bf16 = plan_memory(make_instance()).max_seqs(2000)
    fp8 = plan_memory(make_instance(kv_cache="fp8")).max_seqs(2000)
    assert fp8 == pytest.approx(2 * bf16, rel=0.01)


def test_expert_weights_split_over_ep_ranks():
    base8, exp8 = weight_bytes(make_instance("deepseek-v3", "gb200-nvl72", gpus=8, tp=1, dp=8, ep=8))
    base48, exp48 = weight_bytes(make_instance("deepseek-v3", "gb200-nvl72", gpus=48, tp=1, dp=48, ep=48))
    assert exp8 == pytest.approx(6 * exp48)
    assert base8 == pytest.approx(base48)  # attention and dense layers are replicated under DP


def test_gb200_offloads_experts_to_host_over_c2c_when_they_do_not_fit():
    inst = make_instance(
        "deepseek-v3", "gb200-nvl72", gpus=2, tp=1, dp=2, ep=2, attention="fp8", kv_cache="fp8", moe="nvfp4"
    )
    plan = plan_memory(inst, kv_needed_tokens=32768)
    assert plan.offloaded_bytes > 10e9
    assert plan.kv_pool_bytes >= 32768 * plan.kv_bytes_per_token


def test_no_offload_without_a_fast_host_link():
    inst = make_instance("deepseek-v3", "b200", gpus=2, tp=1, dp=2, ep=2, moe="nvfp4")
    with pytest.raises(InsufficientMemoryError, match="offload is off"):
        plan_memory(inst, kv_needed_tokens=32768)


def test_mtp_adds_its_layer_to_memory():
    from roofline.deployment import MTPConfig

    plain = sum(weight_bytes(make_instance()))
    mtp = sum(weight_bytes(make_instance(mtp=MTPConfig(draft_tokens=1, accepted_tokens=0.8))))
    assert 1.0e9 < mtp - plain < 3e9  # ~11.7B params / 8 GPUs in fp8


def test_equal_window_shares_hold_gpt_oss_as_if_every_layer_were_full():
    """TRT-LLM gives each attention-window size the same share of the KV pool, so gpt-oss's 18 full
    layers get half of it: sequences held at 2,000 tokens are what 36 full layers would hold. Engines
    that keep only the 128-token window on sliding layers (the default) hold almost twice as many."""
    inst = make_instance("gpt-oss-120b", gpus=1, tp=1, ep=1, dense="bf16", moe="mxfp4")
    window = plan_memory(inst)
    equal = plan_memory(inst.model_copy(update={"runtime": RuntimeOptions(kv_window_shares="equal")}))
    a = inst.model.attention
    all_full = 2 * a.num_kv_heads * a.head_dim * 2 * inst.model.num_layers  # BF16 K and V, every layer
    assert equal.kv_pool_bytes == window.kv_pool_bytes
    assert equal.max_seqs(2000) == int(equal.kv_pool_bytes // (all_full * 2000))
    assert window.max_seqs(2000) > 1.8 * equal.max_seqs(2000)


def test_sglang_ratio_sizes_gpt_oss_tokens_at_its_full_layers_plus_a_share_of_its_sliding_layers():
    """SGLang solves full_tokens = memory / (F n_full + r S n_swa) with r = swa_full_tokens_ratio 0.8
    (model_runner_kv_cache_mixin.py): gpt-oss's 18 full and 18 sliding layers of one size make a token
    cost 1.8 full-layer tokens, between the window-only reading (1.0 plus a window) and TRT-LLM's equal
    shares (2.0)."""
    inst = make_instance("gpt-oss-120b", gpus=1, tp=1, ep=1, dense="bf16", moe="mxfp4")
    ratio = plan_memory(
        inst.model_copy(update={"runtime": RuntimeOptions(kv_window_shares="ratio", swa_full_tokens_ratio=0.8)})
    )
    equal = plan_memory(inst.model_copy(update={"runtime": RuntimeOptions(kv_window_shares="equal")}))
    assert ratio.kv_bytes_per_token == pytest.approx(equal.kv_bytes_per_token * 1.8 / 2.0)
    assert ratio.window_bytes_per_seq == 0.0

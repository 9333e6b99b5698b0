"""FLOP and byte counts of single ops against hand-computed values."""

from __future__ import annotations

import math

import pytest

from roofline.attention_ops import attention_ops
from roofline.batch import StepBatch
from roofline.ops import ffn_ops
from roofline.params import expert_params
from roofline.precision import BYTES_PER_PARAM
from tests.conftest import make_instance


def _op(ops, name):
    return next(o for o in ops if o.name == name)


def test_mla_absorbed_decode_flops_and_kv_bytes():
    """Per layer: 2 x heads x (576 QK + 512 PV) FLOPs per cached token; 576 KV values read."""
    inst = make_instance(gpus=1, tp=1, ep=1)
    ops = attention_ops(inst, StepBatch.decode(1, 1000), 1.0)
    att = _op(ops, "attention.decode")
    assert att.flops == pytest.approx(61 * 1000 * 128 * 2 * (576 + 512))
    assert att.bytes == pytest.approx(61 * 1000 * 576 * 2)


def test_tensor_parallel_splits_heads_but_every_rank_reads_the_whole_latent():
    one = _op(attention_ops(make_instance(gpus=1, tp=1, ep=1), StepBatch.decode(4, 1000), 1.0), "attention.decode")
    eight = _op(attention_ops(make_instance(), StepBatch.decode(4, 1000), 1.0), "attention.decode")
    assert eight.flops == pytest.approx(one.flops / 8)
    assert eight.bytes == pytest.approx(one.bytes)


def test_dsa_attends_to_at_most_topk_keys_but_indexes_all():
    inst = make_instance("deepseek-v3.2", kv_cache="fp8")
    short = attention_ops(inst, StepBatch.decode(1, 2048), 1.0)
    long = attention_ops(inst, StepBatch.decode(1, 8192), 1.0)
    assert _op(long, "attention.decode").flops == pytest.approx(_op(short, "attention.decode").flops)
    assert _op(long, "attention.indexer").flops == pytest.approx(4 * _op(short, "attention.indexer").flops)


def test_causal_pairs_of_a_prefill_chunk():
    assert StepBatch.prefill([(4, 0)]).causal_pairs() == 10  # 1 + 2 + 3 + 4
    assert StepBatch.prefill([(2, 3)]).causal_pairs() == 2 * 3 + 3  # prefix 3: rows see 4, 5 keys
    assert StepBatch.prefill([(4, 0)]).causal_pairs(cap=2) == 1 + 2 + 2 + 2


def test_gemm_flops_are_two_per_multiply_add():
    inst = make_instance(gpus=1, tp=1, ep=1)
    b = StepBatch.decode(16, 100)
    ops = ffn_ops(inst, b, 1.0)
    dense = _op(ops, "dense_ffn")
    assert dense.flops == pytest.approx(2 * 16 * 3 * 7168 * 18432 * 3)


def test_batch_one_decode_reads_about_topk_experts():
    """One token touches top_k experts: about 8 of DeepSeek-V3's 256 are read per layer."""
    inst = make_instance(gpus=1, tp=1, ep=1)
    moe = _op(ffn_ops(inst, StepBatch.decode(1, 100), 1.0), "moe.experts")
    per_layer = moe.bytes / 58
    expected = 8 * expert_params(inst.model) * BYTES_PER_PARAM["fp8"]
    assert per_layer == pytest.approx(expected, rel=0.03)


def test_large_batch_decode_reads_every_local_expert():
    inst = make_instance()
    moe = _op(ffn_ops(inst, StepBatch.decode(4096, 100), 1.0), "moe.experts")
    weights = 32 * expert_params(inst.model) * BYTES_PER_PARAM["fp8"] * 58
    assert moe.bytes >= weights * 0.999


def test_expert_load_imbalance_shrinks_with_tokens_per_rank():
    from roofline.ops import expected_imbalance

    inst = make_instance(gpus=48, tp=1, dp=48, ep=48)
    few, many = expected_imbalance(inst, 64), expected_imbalance(inst, 100_000)
    assert few > many > 1.0
    # no EPLB: the hot-expert excess of a rank holding 256 / 48 experts stays at any batch
    assert many == pytest.approx(1 + 12.0 * 48 / 256, rel=0.02)
    assert expected_imbalance(make_instance(gpus=1, tp=1, ep=1), 64) == 1.0


def test_v4_compressed_layers_attend_window_plus_compressed_keys():
    inst = make_instance("deepseek-v4-flash", "rtx-pro-6000", gpus=4, tp=4, ep=1, dense="fp8", moe="mxfp4")
    ops = attention_ops(inst, StepBatch.decode(1, 4096), 1.0)
    decode = [o for o in ops if o.name == "attention.decode"]
    heads, d = 64 / 4, 512
    # window-only x2, CSA x21 (128 + min(1024, 512)), HCA x20 (128 + 32)
    attended = 2 * 128 + 21 * (128 + 512) + 20 * (128 + 32)
    assert sum(o.flops for o in decode) == pytest.approx(attended * heads * 4 * d)
    assert math.isclose(sum(o.bytes for o in decode), attended * d * 2)


def test_a_small_batch_pays_for_the_busiest_ranks_experts_not_the_average():
    """EP8, one sequence verifying 3 MTP drafts (4 tokens x top-8 of 256 experts): the average
    rank reads ~3.8 of its 32 experts per layer, but the layer waits for the busiest of 8 ranks,
    which reads ~6.5 (E[max] of 8 Binomial(32, p) counts)."""
    inst = make_instance()
    moe = _op(ffn_ops(inst, StepBatch.decode(1, 100, 3), 1.0), "moe.experts")
    per_layer = moe.bytes / 58 / (expert_params(inst.model) * BYTES_PER_PARAM["fp8"])
    mean = 32 * (1 - math.exp(-4 * 8 / 256))
    assert mean == pytest.approx(3.76, abs=0.01)
    assert per_layer == pytest.approx(6.49, abs=0.05)


def test_busiest_rank_experts_is_the_mean_without_ep_and_saturates_at_the_local_count():
    from roofline.ops import busiest_rank_experts

    assert busiest_rank_experts(256, 0.1, 1) == pytest.approx(25.6)
    assert busiest_rank_experts(32, 0.999999, 8) == pytest.approx(32, rel=1e-3)
    few, more = busiest_rank_experts(32, 0.05, 8), busiest_rank_experts(32, 0.05, 64)
    assert 32 * 0.05 < few < more < 32


def test_sparse_decode_gathers_topk_keys_per_query_token():
    """DSA: each of a sequence's 1 + 3 MTP query tokens has its own top-k, so the kernel gathers
    4 x 2048 KV entries per layer (dense MLA reads the sequence's KV once for all its queries)."""
    inst = make_instance("deepseek-v3.2", "b200", kv_cache="fp8")
    one = _op(attention_ops(inst, StepBatch.decode(1, 4096), 1.0), "attention.decode")
    four = _op(attention_ops(inst, StepBatch.decode(1, 4096, 3), 1.0), "attention.decode")
    assert four.bytes == pytest.approx(4 * one.bytes)
    assert one.bytes == pytest.approx(61 * 2048 * 576 * 1)


def test_hopper_sparse_mla_pads_a_tp8_ranks_16_heads_to_64():
    """FlashMLA's sparse kernels take 64 or 128 query heads: on H200 at TP8 the FLOPs are those of
    64 heads; B200's path is priced at the rank's own 16."""
    h200 = _op(
        attention_ops(make_instance("deepseek-v3.2", kv_cache="fp8"), StepBatch.decode(1, 4096), 1.0),
        "attention.decode",
    )
    b200 = _op(
        attention_ops(make_instance("deepseek-v3.2", "b200", kv_cache="fp8"), StepBatch.decode(1, 4096), 1.0),
        "attention.decode",
    )
    assert h200.flops == pytest.approx(61 * 2048 * 64 * 2 * (576 + 512))
    assert b200.flops == pytest.approx(h200.flops / 4)


@pytest.mark.parametrize(("tokens", "ep"), [(1, 8), (4, 8), (32, 4)])
def test_busiest_rank_experts_matches_sampled_top8_routing(tokens, ep):
    """Against routing sampled as DeepSeek-V3 routes (each token picks 8 distinct of 256 experts,
    uniformly): the binomial expected maximum is within 3% of the sampled busiest rank."""
    import numpy as np

    from roofline.ops import busiest_rank_experts

    rng = np.random.default_rng(0)
    trials, experts, top_k = 1500, 256, 8
    picks = rng.random((trials, tokens, experts)).argpartition(top_k, axis=2)[:, :, :top_k]
    touched = np.zeros((trials, experts), dtype=bool)
    np.put_along_axis(touched, picks.reshape(trials, -1), True, axis=1)
    sampled = touched.reshape(trials, ep, experts // ep).sum(axis=2).max(axis=1).mean()
    p_touch = 1 - math.exp(-tokens * top_k / experts)
    assert busiest_rank_experts(experts // ep, p_touch, ep) == pytest.approx(sampled, rel=0.03)


def test_grouped_gemm_rows_pad_to_the_kernels_tile():
    """A CuTe-DSL grouped GEMM pads each expert's rows to 128; the trtllm-gen batched GEMMs that run
    MXFP4 experts on sm_100 pick the next power of two of the expert's tokens, 8 to 128, then whole
    128-token tiles (TensorRT-LLM calculate_tile_tokens_dim)."""
    from roofline.kernel_paths import KERNELS
    from roofline.kernels import select
    from roofline.step import _padding

    cute, gen = KERNELS["cute-dsl-grouped-sm100"], KERNELS["trtllm-gen-mxfp4-sm100"]
    assert _padding(cute, 2.0) == 64.0
    assert _padding(gen, 2.0) == 4.0  # an 8-token tile
    assert _padding(gen, 9.0) == pytest.approx(16 / 9)
    assert _padding(gen, 64.0) == 1.0
    assert _padding(gen, 200.0) == pytest.approx(256 / 200)
    assert select("sm_100", "moe_gemm", "mxfp4", {}, {}).name == "trtllm-gen-mxfp4-sm100"
    assert select("sm_100", "moe_gemm", "nvfp4", {}, {}).name == "cute-dsl-grouped-sm100"


def test_a_models_own_expert_kernels_come_before_the_engines_mxfp4_default(shared_dir):
    """DeepSeek-V4's FP4 experts run on DeepGEMM (128-row tiles) in every engine, even where the engine's
    MXFP4 choice is FlashInfer's (vLLM on sm_100); gpt-oss keeps the engine's; Hopper is untouched; an
    imported V4 config.json gets the catalog entry's kernels."""
    from roofline.catalog import get_model
    from roofline.kernels import path_for

    vllm = {"moe_gemm:mxfp4": "flashinfer-mxfp4-bf16-grouped-sm100"}

    def moe_path(model: str, hardware: str) -> str:
        inst = make_instance(model, hardware, gpus=8, tp=1, dp=8, moe="mxfp4")
        if inst.hardware.is_blackwell:  # the profile gives vLLM's choice on sm_100 only
            inst = inst.model_copy(update={"runtime": inst.runtime.model_copy(update={"engine_kernels": vllm})})
        return path_for(inst, "moe_gemv", "mxfp4").name

    assert moe_path("deepseek-v4-pro", "b200") == "deepgemm-fp8-fp4-grouped-sm100"
    assert moe_path("deepseek-v4-flash", "gb300-nvl72") == "deepgemm-fp8-fp4-grouped-sm100"  # sm_103
    assert moe_path("gpt-oss-120b", "b200") == "flashinfer-mxfp4-bf16-grouped-sm100"
    assert moe_path("deepseek-v4-pro", "h200-sxm") == "marlin-w4a16-sm90"
    imported = get_model(str(shared_dir / "reference/hf_configs/deepseek-ai--DeepSeek-V4-Pro_config.json"))
    assert imported.moe is not None
    assert imported.moe.kernels == get_model("deepseek-v4-pro").moe.kernels  # type: ignore[union-attr]


def test_a_chosen_path_is_priced_on_its_own_prior_and_the_models_choice_covers_decode_only_steps():
    """A measured table prices only the architecture's default path: an engine's choice for `moe_gemm:fp8`
    also moves decode-only steps (`moe_gemv` falls back to it) off the H200's calibrated MoE table; a
    model's own `moe_gemm` kernel wins over an engine's `moe_gemv` choice."""
    from roofline.kernels import path_for
    from roofline.step import step_cost

    def with_engine(inst, kernels):
        return inst.model_copy(update={"runtime": inst.runtime.model_copy(update={"engine_kernels": kernels})})

    b = StepBatch(decode_seqs=64, decode_kv_sum=64 * 2000)
    plain = make_instance("deepseek-v3", "h200-sxm")
    chosen = with_engine(plain, {"moe_gemm:fp8": "marlin-w4a16-sm90"})
    moe = next(o for o in step_cost(plain, b).ops if o.name == "moe.experts")
    moe_chosen = next(o for o in step_cost(chosen, b).ops if o.name == "moe.experts")
    assert moe.source == "calibrated"
    assert moe_chosen.source != "calibrated"
    assert moe_chosen.kernel == "marlin-w4a16-sm90"
    v4 = with_engine(make_instance("deepseek-v4-pro", "b200", gpus=8, tp=1, dp=8, moe="mxfp4"),
                     {"moe_gemv:mxfp4": "trtllm-gen-mxfp4-sm100"})  # fmt: skip
    assert path_for(v4, "moe_gemv", "mxfp4").name == "deepgemm-fp8-fp4-grouped-sm100"

"""The step-cost model: ratios the seeds report must come out of the model, not constants."""

from __future__ import annotations

import pytest

from roofline.batch import StepBatch
from roofline.deployment import MTPConfig
from roofline.kernels import KERNELS, select
from roofline.ops import expected_imbalance, ffn_ops
from roofline.step import step_cost
from tests.conftest import make_instance


def _cat(cost, name):
    return sum(o.time_s for o in cost.ops if o.name == name)


def gb200(**prec):
    return make_instance("deepseek-v3", "gb200-nvl72", gpus=48, tp=1, dp=48, ep=48, **prec)


def test_fp8_decode_attention_is_about_1_8x_bf16_on_gb200():
    """Seed 000: FP8 attention kernels about 1.8x faster than BF16 (same batch and context)."""
    batch = StepBatch.decode(48 * 512, 2000)
    bf16 = _cat(step_cost(gb200(), batch), "attention.decode")
    fp8 = _cat(step_cost(gb200(attention="fp8", kv_cache="fp8"), batch), "attention.decode")
    assert 1.6 <= bf16 / fp8 <= 2.0


def test_nvfp4_moe_gemm_is_up_to_about_1_9x_fp8_on_gb200():
    """Seed 000: NVFP4 GEMMs up to 1.9x over FP8; never more than the 2x of peak and bytes."""
    ratios = []
    for per_gpu in (8, 64, 512, 2048):
        batch = StepBatch.decode(48 * per_gpu, 2000)
        fp8 = _cat(step_cost(gb200(), batch), "moe.experts")
        fp4 = _cat(step_cost(gb200(moe="nvfp4"), batch), "moe.experts")
        ratios.append(fp8 / fp4)
    assert max(ratios) == pytest.approx(1.9, abs=0.15)
    assert all(1.0 < r <= 2.0 for r in ratios)


def test_step_time_grows_with_batch_and_context():
    inst = make_instance()
    t = [step_cost(inst, StepBatch.decode(b, 2000)).time_s for b in (1, 8, 64, 256)]
    assert t == sorted(t)
    assert step_cost(inst, StepBatch.decode(64, 8000)).time_s > step_cost(inst, StepBatch.decode(64, 2000)).time_s


def test_every_op_is_tagged_with_its_source_and_kernel():
    cost = step_cost(make_instance(), StepBatch.decode(32, 2000))
    assert {o.source for o in cost.ops} <= {"roofline", "calibrated", "measured"}
    assert all(o.kernel for o in cost.ops)
    assert sum(o.time_s for o in cost.ops) == pytest.approx(cost.time_s)


def test_eager_execution_costs_launch_overhead_per_kernel():
    inst = make_instance()
    eager = inst.model_copy(update={"runtime": inst.runtime.model_copy(update={"cuda_graphs": False})})
    b = StepBatch.decode(1, 1000)
    assert step_cost(eager, b).time_s > step_cost(inst, b).time_s * 1.3


def test_measured_elementwise_traffic_replaces_the_per_kernel_estimate():
    inst = make_instance()
    b = StepBatch.prefill([(4096, 0)])

    def traffic(**rt: float) -> float:
        spec = inst.model_copy(update={"runtime": inst.runtime.model_copy(update=rt)})
        return next(o.bytes for o in step_cost(spec, b).ops if o.name == "norms_residual_rope")

    layers = inst.model.num_layers
    # default: 8 kernels, the FFN activation priced apart (below), the other 7 each 1.25 passes over a
    # 7168-wide bf16 activation
    assert traffic() == pytest.approx(4096 * 7168 * 2 * 1.25 * 7 * layers)
    assert traffic(elementwise_bytes_per_token_layer=4.0e6) == pytest.approx(4096 * 4.0e6 * layers)


def _activation(inst, b):
    return [o for o in ffn_ops(inst, b, 1.0) if o.name == "ffn.activation"]


def test_ffn_activation_reads_gate_and_up_and_writes_the_down_gemm_input_at_the_intermediate_width():
    """A dense model's gated activation: per token and layer, 2 x intermediate BF16 in and the
    intermediate out in the down GEMM's format, split over TP. Llama-3.1-8B: 14,336 wide, 3.5x its
    hidden size, so the hidden-size estimate alone misses most of this kernel's traffic."""
    b = StepBatch.prefill([(4096, 0)])
    llama = make_instance("llama-3.1-8b", "b200", gpus=1, tp=1, ep=1, dense="nvfp4")
    (op,) = _activation(llama, b)
    assert op.bytes == pytest.approx(4096 * 14336 * (2 * 2 + 0.5 + 1 / 16) * 32)
    assert op.launches == 32
    tp2 = make_instance("llama-3.1-8b", "b200", gpus=2, tp=2, ep=1, dense="fp8")
    (op2,) = _activation(tp2, b)
    assert op2.bytes == pytest.approx(4096 * 14336 / 2 * (2 * 2 + 1 + 1 / 32) * 32)
    measured = llama.model_copy(
        update={"runtime": llama.runtime.model_copy(update={"elementwise_bytes_per_token_layer": 4e6})}
    )
    assert not _activation(measured, b)
    assert any(o.name == "ffn.activation" for o in step_cost(llama, b).ops)


def test_moe_activation_covers_routed_pairs_and_shared_experts():
    """DeepSeek-V3: 3 dense layers (18,432 wide), then 58 MoE layers whose routed pairs (top-8 of
    2,048-wide experts) and one shared expert each run their own activation."""
    inst = make_instance()  # TP8, EP8, FP8
    b = StepBatch.prefill([(8192, 0)])
    (op,) = _activation(inst, b)
    fp8 = 2 * 2 + 1 + 4 / 128
    dense = 8192 * 18432 / 8 * fp8 * 3
    shared = 8192 * 2048 / 8 * fp8 * 58
    routed_even = 8192 * 8 / 8 * 2048 * fp8 * 58  # pairs per rank before the busiest rank's excess
    assert op.launches == 3 + 58  # the shared expert's activation adds traffic, not a counted launch
    busiest = expected_imbalance(inst, 8192 * 8 / 8)
    assert busiest > 1.1  # no EPLB: the busiest rank carries more than its even share
    assert op.bytes == pytest.approx(dense + shared + routed_even * busiest)


def test_negative_elementwise_traffic_is_rejected():
    from pydantic import ValidationError

    from roofline.deployment import RuntimeOptions

    with pytest.raises(ValidationError, match="elementwise_bytes_per_token_layer"):
        RuntimeOptions(elementwise_bytes_per_token_layer=-1)


def test_mtp_verifies_drafts_and_runs_the_draft_layer():
    inst = make_instance(mtp=MTPConfig(draft_tokens=3, accepted_tokens=1.65))
    plain = step_cost(make_instance(), StepBatch.decode(8, 2000))
    spec = step_cost(inst, StepBatch.decode(8, 2000, draft_tokens=3))
    assert spec.tokens == 32
    assert any(o.name.startswith("mtp.") for o in spec.ops)
    assert plain.time_s < spec.time_s < 2.65 * plain.time_s


def test_sm120_decode_uses_cuda_core_fallbacks_and_prefill_does_not():
    sglang = {"moe_gemv:mxfp4": "triton-mxfp4-slot-gemv-sm120"}  # planner/engines/sglang.yaml, sm_120
    assert not select("sm_120", "sparse_attn").tensor_cores
    assert not select("sm_120", "moe_gemv", "mxfp4", engine=sglang).tensor_cores
    assert select("sm_120", "moe_gemm", "mxfp4", engine=sglang).tensor_cores
    assert select("sm_120", "moe_gemv", "nvfp4").tensor_cores
    assert select("sm_90", "moe_gemv", "fp8") == select("sm_90", "moe_gemm", "fp8")


def test_a_tensor_core_override_lifts_the_sm120_attention_ceiling():
    inst = make_instance("deepseek-v4-flash", "rtx-pro-6000", gpus=4, tp=4, ep=1, dense="fp8", moe="mxfp4")
    tc = inst.model_copy(
        update={
            "runtime": inst.runtime.model_copy(
                update={"kernel_overrides": {"sparse_attn": "tensor-core-sparse-mla-sm120"}}
            )
        }
    )
    b = StepBatch.decode(16, 1536)
    assert _cat(step_cost(tc, b), "attention.decode") < _cat(step_cost(inst, b), "attention.decode") / 20


def test_unknown_kernel_override_is_an_error_listing_known_paths():
    from roofline.errors import MissingKernelDataError

    with pytest.raises(MissingKernelDataError, match=r"known: .*flashmla-sm90"):
        select("sm_90", "mla_decode", overrides={"mla_decode": "nope"})


def test_kernel_table_priors_are_efficiencies():
    for k in KERNELS.values():
        assert 0 < k.compute_eff <= 1, k.name
        assert 0 < k.memory_eff <= 1, k.name
        assert k.source, k.name


def test_wide_ep_beyond_the_nvlink_domain_pays_rdma():
    """EP72 on H100 (9 nodes) is communication-heavy; the same EP on NVL72 is not."""
    b = StepBatch.decode(72 * 256, 2000)
    h100 = make_instance("deepseek-v3", "h100-sxm", gpus=72, tp=1, dp=72, ep=72)
    nvl = make_instance("deepseek-v3", "gb200-nvl72", gpus=72, tp=1, dp=72, ep=72)
    comm = lambda c: c.by_category()["ep_comm"] + c.hidden_comm_s  # noqa: E731
    assert comm(step_cost(h100, b)) > 5 * comm(step_cost(nvl, b))


def test_engine_kernels_come_between_overrides_and_the_architecture_default():
    trtllm = {"moe_gemm:mxfp4": "cutlass-fp4-grouped-sm120"}  # planner/engines/trtllm.yaml, sm_120
    assert select("sm_120", "moe_gemv", "mxfp4").name == "marlin-w4a16-sm120"  # vLLM #30135: Marlin
    assert select("sm_120", "moe_gemv", "mxfp4", engine=trtllm).name == "cutlass-fp4-grouped-sm120"
    assert select("sm_120", "moe_gemm", "fp8", engine=trtllm).name == "triton-fused-moe-sm120"  # format-keyed
    what_if = {"moe_gemm": "triton-fused-moe-sm120"}
    assert select("sm_120", "moe_gemv", "mxfp4", what_if, trtllm).name == "triton-fused-moe-sm120"


def _moe_time(inst, b):
    return sum(o.time_s for o in step_cost(inst, b).ops if o.name == "moe.experts")


def test_a_path_with_its_own_math_rate_prices_at_that_peak():
    """vLLM's SM100 MXFP4 x BF16 MoE (vllm #23008) at half the MXFP8 path's rate on a compute-bound
    prefill; the FlashMLA sparse decode dequantizes FP8 KV to BF16, so FP8 attention is no faster."""
    inst = make_instance("gpt-oss-120b", "b200", gpus=1, tp=1, ep=1, dense="bf16", moe="mxfp4")
    vllm = inst.model_copy(
        update={
            "runtime": inst.runtime.model_copy(
                update={"engine_kernels": {"moe_gemm:mxfp4": "flashinfer-mxfp4-bf16-grouped-sm100"}}
            )
        }
    )
    b = StepBatch.prefill([(16384, 0)])
    assert _moe_time(vllm, b) == pytest.approx(2 * _moe_time(inst, b), rel=0.05)
    assert KERNELS["dsa-sparse-sm100"].math == "bf16"
    assert KERNELS["flashmla-sparse-sm90"].math == "bf16"
    dec = StepBatch.decode(64, 32768)
    bf16 = make_instance("deepseek-v3.2", "h200-sxm")
    fp8 = make_instance("deepseek-v3.2", "h200-sxm", attention="fp8", kv_cache="fp8")
    assert _cat(step_cost(fp8, dec), "attention.decode") >= 0.9 * _cat(step_cost(bf16, dec), "attention.decode")


def test_tensor_core_what_ifs_name_only_ops_the_model_runs():
    """`planner explain` on Qwen3-235B (GQA) on RTX PRO 6000 offered 'tensor-core kernels for indexer,
    sparse_attn' (+0%): a GQA model has neither. A DSA model on sm_120 keeps them."""
    from roofline.kernels import tensor_core_alternatives

    gqa = make_instance("qwen3-235b-a22b", "rtx-pro-6000", gpus=4, tp=4, ep=4, moe="mxfp4")
    assert not {"indexer", "sparse_attn"} & set(tensor_core_alternatives(gqa))
    assert set(tensor_core_alternatives(gqa)) <= {"moe_gemv"}
    dsa = make_instance("deepseek-v3.2", "rtx-pro-6000", gpus=8, tp=8, ep=8, kv_cache="fp8")
    assert "sparse_attn" in tensor_core_alternatives(dsa)


def test_attention_dp_with_tensor_parallel_experts_pays_the_gather_and_scatter():
    """Sixteenth trial: DP8 attention with ep 1 sharded the experts eight ways with no communication at all,
    so the unknown-layout search chose it over DP8 EP8. Every rank's tokens are gathered before the MoE and
    reduce-scattered after: an all-reduce's traffic over the whole batch, per MoE layer."""
    from roofline.batch import StepBatch
    from roofline.catalog import get_hardware, get_model
    from roofline.deployment import InstanceSpec, Parallelism
    from roofline.step import step_cost

    def inst(ep: int) -> InstanceSpec:
        return InstanceSpec(
            model=get_model("deepseek-v3"),
            hardware=get_hardware("h200-sxm"),
            parallel=Parallelism(gpus=8, tp=1, dp_attention=8, ep=ep),
        )

    b = StepBatch.decode(256, 3000, 0)
    names = {o.name: o for o in step_cost(inst(1), b).ops}
    assert "moe.gather_scatter" in names
    assert names["moe.gather_scatter"].time_s > 0
    assert "moe.gather_scatter" not in {o.name for o in step_cost(inst(8), b).ops}

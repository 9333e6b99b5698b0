"""The operations one forward step of one instance runs, before any is priced: each stage's layers
(attention, FFN or MoE, the elementwise kernels between them), the LM head and sampling, the
communication the layout needs (TP all-reduce, EP dispatch/combine, attention DP's gather/scatter
around tensor-parallel experts) and MTP's drafting passes. `roofline.step.step_cost` prices them on
their kernel paths and adds launch gaps and host time; this module computes no time except the
communication ops' own (`roofline.comm`).
"""

from __future__ import annotations

from roofline.attention_ops import attention_ops
from roofline.batch import StepBatch
from roofline.comm import allreduce_time, alltoall_time, ep_copies
from roofline.deployment import InstanceSpec
from roofline.ops import ACT, Op, activation_launches_per_layer, ffn_ops, gemm_op
from roofline.precision import DISPATCH_BYTES


def elementwise_kernels(inst: InstanceSpec) -> float:
    """Kernels per layer priced here: the engine's `elementwise_launches_per_layer` less the FFN's
    gated activation, which `roofline.ops.ffn_activation_op` prices at the intermediate width
    (unless the runtime gives measured traffic, which covers every kernel)."""
    rt = inst.runtime
    return rt.elementwise_launches_per_layer - (activation_launches_per_layer(rt) or 0.0)


def elementwise_bytes_per_token(inst: InstanceSpec) -> float:
    """Activation traffic of one layer's elementwise kernels per token (norms, RoPE, quantization,
    residuals): measured when the runtime gives it (the FFN activation included), else each kernel
    other than the FFN activation reads and writes about one hidden-size activation tensor (1.25
    passes each: 7 of a fused engine's default 8, proportionally more for an unfused one)."""
    rt = inst.runtime
    if rt.elementwise_bytes_per_token_layer is not None:
        return rt.elementwise_bytes_per_token_layer
    return inst.model.hidden_size * ACT * 1.25 * elementwise_kernels(inst)


def layer_ops(inst: InstanceSpec, b: StepBatch, scale: float) -> list[Op]:
    """Everything one stage's layers do except communication and launch gaps."""
    m, p = inst.model, inst.parallel
    ops = attention_ops(inst, b, scale) + ffn_ops(inst, b, scale)
    t_dp = b.tokens / p.dp_attention
    layers = m.num_layers * scale
    hc = m.hyper_connections
    sinkhorn = 0.0
    if m.sinkhorn_iters:  # mHC: fused kernels on sm_90/sm_100; assumed unfused torch ops on sm_120
        sinkhorn = 2 * (2 * m.sinkhorn_iters + 4) if inst.hardware.arch == "sm_120" else 8
    ops.append(
        Op(
            "norms_residual_rope",
            "other",
            "elementwise",
            "bf16",
            bytes=t_dp * elementwise_bytes_per_token(inst) * hc * layers,
            launches=(elementwise_kernels(inst) + sinkhorn) * layers,
            calls=(elementwise_kernels(inst) + sinkhorn) * layers,
            rows=t_dp,
        )
    )
    return ops


def head_ops(inst: InstanceSpec, b: StepBatch) -> list[Op]:
    m, p = inst.model, inst.parallel
    logits = (b.decode_tokens + b.prefill_seqs) / p.dp_attention
    if not logits:
        return []
    vocab_params = m.vocab_size * m.hidden_size / p.tp
    fmt = inst.precision.lm_head
    return [
        gemm_op(inst, "lm_head", "dense_gemm", logits, vocab_params, fmt, 1.0),
        Op("sampling", "other", "elementwise", "bf16", bytes=logits * m.vocab_size / p.tp * 4 * 2, launches=4),
    ]


def comm_ops(inst: InstanceSpec, b: StepBatch, scale: float) -> list[Op]:
    m, p, hw = inst.model, inst.parallel, inst.hardware
    stage_gpus = p.gpus // p.pp
    t_dp = b.tokens / p.dp_attention
    ops: list[Op] = []
    act = t_dp * m.hidden_size * ACT
    if p.tp > 1:
        custom = inst.runtime.custom_allreduce_max_bytes
        t = allreduce_time(hw, p.tp, act, custom_max_bytes=custom) * (m.num_layers + m.dense_layers) * scale
        ops.append(Op("tp.allreduce", "tp_comm", "comm", "bf16", bytes=act, comm_s=t))
    if m.moe and b.tokens:
        n_moe = m.moe_layers * scale
        if p.dp_attention > 1 and p.ep > 1:
            moe = m.moe
            limit = moe.topk_group if moe.n_group > 1 else moe.top_k
            nv, rdma = ep_copies(hw, p.ep, moe.top_k, limit, normal_mode=bool(b.prefill_tokens))
            elems = b.tokens / stage_gpus * m.hidden_size
            disp_b = DISPATCH_BYTES[inst.precision.moe]
            disp = alltoall_time(hw, p.ep, nv * elems * disp_b, rdma * elems * disp_b)
            comb = alltoall_time(hw, p.ep, nv * elems * ACT, rdma * elems * ACT)
            ops.append(
                Op(
                    "ep.dispatch_combine",
                    "ep_comm",
                    "comm",
                    "bf16",
                    bytes=(nv + rdma) * elems * 3,
                    comm_s=(disp + comb) * n_moe,
                )
            )
        elif stage_gpus > 1 and p.dp_attention > 1:
            # attention DP with the experts tensor-parallel (ep 1): every rank's tokens are gathered before the
            # MoE and reduce-scattered after (SGLang dp_attention gather/scatter, TRT-LLM attention DP with MoE
            # TP), an all-reduce's traffic over the whole batch; it was free (sixteenth trial: the unknown-layout
            # search chose DP8 EP1 over DP8 EP8 for it)
            every = b.tokens * m.hidden_size * ACT
            custom = inst.runtime.custom_allreduce_max_bytes
            ops.append(
                Op(
                    "moe.gather_scatter",
                    "tp_comm",
                    "comm",
                    "bf16",
                    bytes=every,
                    comm_s=allreduce_time(hw, stage_gpus, every, custom_max_bytes=custom) * n_moe,
                )
            )
        elif stage_gpus > 1 and p.dp_attention == 1:
            ops.append(
                Op(
                    "moe.allreduce",
                    "tp_comm",
                    "comm",
                    "bf16",
                    bytes=act,
                    comm_s=allreduce_time(hw, stage_gpus, act, custom_max_bytes=inst.runtime.custom_allreduce_max_bytes)
                    * n_moe,
                )
            )
    return ops


def mtp_ops(inst: InstanceSpec, b: StepBatch) -> list[Op]:
    """MTP drafting: `draft_tokens` sequential passes of the MTP layer and the LM head (its FFN
    activation included; its norms and residual kernels are not priced)."""
    if not b.draft_tokens or not b.decode_seqs:
        return []
    m = inst.model
    one = StepBatch.decode(b.decode_seqs, b.decode_kv_mean)
    per_pass = attention_ops(inst, one, 1.0 / m.num_layers) + ffn_ops(inst, one, 0.0, mtp=True)
    per_pass.append(
        gemm_op(
            inst,
            "eh_proj",
            "dense_gemm",
            one.tokens / inst.parallel.dp_attention,
            2.0 * m.hidden_size * m.hidden_size,
            inst.precision.dense,
            1.0,
        )
    )
    per_pass += head_ops(inst, one) + comm_ops(inst, one, 1.0 / m.num_layers)
    for op in per_pass:
        op.name = "mtp." + op.name
        op.flops *= b.draft_tokens
        op.bytes *= b.draft_tokens
        op.launches *= b.draft_tokens
        op.calls *= b.draft_tokens  # one pass per draft: each call keeps its size (the calibrated lookup)
        op.comm_s *= b.draft_tokens
    return per_pass

"""FLOPs and bytes of every op of one forward step, as seen by one GPU of an instance: the `Op`
record, GEMMs, dense FFN and MoE. Attention builders live in `roofline.attention_ops`.

Each builder returns `Op` records already summed over the layers this GPU holds (its pipeline
stage). Formulas (FLOPs = 2 x multiply-adds):
- GEMM: 2 x tokens x params; bytes = weights (by format) + activations in and out.
- MoE: tokens x top_k pairs spread over ep ranks (x the busiest rank's imbalance,
  `roofline.imbalance`); weights read once per touched
  expert on the busiest rank (the expected maximum over ep ranks), or once per pair for
  slot-GEMV kernels.
- FFN activation (`ffn_activation_op`): the gated activation between the gate/up and the down GEMM,
  a memory-bound kernel of its own per FFN that reads the gate and up halves (BF16) and writes the
  down GEMM's input in that GEMM's activation format, at the FFN's intermediate width.
Communication and pricing live in `roofline.step`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Literal

from roofline.batch import StepBatch
from roofline.deployment import InstanceSpec, RuntimeOptions
from roofline.imbalance import imbalance, max_normal_mean, popularity_excess
from roofline.kernels import path_for
from roofline.params import (
    dense_ffn_params,
    expert_params,
    gate_params,
    shared_expert_params,
)
from roofline.precision import BYTES_PER_PARAM, DISPATCH_BYTES, gemm_rate_key

Category = Literal["attention", "indexer", "dense_gemm", "moe", "ep_comm", "tp_comm", "other"]
ACT = 2.0  # bytes per BF16 activation element
# GEMM launches of a gated FFN (dense layers, shared experts): gate and up read the same input and
# run as one GEMM, then down (vLLM and SGLang MergedColumnParallelLinear gate_up_proj, TRT-LLM
# GatedMLP gate_up_proj, runtime.engine's w13/w2)
FFN_GEMMS = 2


@dataclass(slots=True)
class Op:
    name: str
    category: Category
    family: str  # kernel op family (roofline.kernels.OpFamily) or "comm"
    rate: str  # tensor-core rate key: bf16 | fp8 | fp4
    flops: float = 0.0
    bytes: float = 0.0
    launches: float = 0.0
    fmt: str = "*"  # weight format, for kernel selection
    rows_per_group: float = 0.0  # grouped GEMM rows per expert (MMA tile padding)
    comm_s: float = 0.0  # communication ops carry their time directly
    calls: float = 0.0  # kernel calls the FLOPs/bytes split over (calibrated lookups); 0: launches
    rows: float = 0.0  # rows per call: tokens, decode sequences, tokens per expert


def gemm_op(
    inst: InstanceSpec,
    name: str,
    cat: Category,
    tokens: float,
    params: float,
    fmt: str,
    layers: float,
    launches: float = 1.0,
) -> Op:
    h = inst.model.hidden_size
    wbytes = params * BYTES_PER_PARAM[fmt]
    act = tokens * h * ACT * 2 if tokens else 0.0
    return Op(
        name,
        cat,
        "gemm",
        gemm_rate_key(fmt, inst.hardware, name),
        flops=2 * tokens * params * layers,
        bytes=(wbytes + act) * layers if tokens else 0.0,
        launches=launches * layers,
        fmt=fmt,
        calls=launches * layers,
        rows=tokens,
    )


def expected_imbalance(inst: InstanceSpec, pairs_per_rank: float) -> float:
    """Max-over-ranks / mean expert load in one step (`roofline.imbalance`): the hot-expert excess
    of the rank holding the most popular experts (small with EPLB) plus the routing noise of
    `pairs_per_rank` pairs on the busiest of `ep` ranks; a stated `runtime.ep_imbalance` instead."""
    ep = inst.parallel.ep
    if inst.runtime.ep_imbalance is not None:
        return inst.runtime.ep_imbalance
    if ep <= 1 or pairs_per_rank <= 0 or inst.model.moe is None:
        return 1.0
    return imbalance(expert_popularity(inst), pairs_per_rank, max_normal_mean(ep))


def expert_popularity(inst: InstanceSpec) -> float:
    """The busiest EP rank's excess load from expert popularity (`roofline.imbalance.popularity_excess`)
    for this instance's experts, redundant slots, top-k and EPLB: the one figure the estimator and the
    simulator's per-step draws share."""
    moe = inst.model.moe
    if moe is None:
        return 0.0
    slots = moe.num_experts + inst.runtime.redundant_experts
    return popularity_excess(inst.parallel.ep, slots, inst.runtime.load_balanced, moe.num_experts, moe.top_k)


@functools.lru_cache(maxsize=65536)  # on the simulator's step path; a pure function of its arguments
def busiest_rank_experts(local: float, p_touch: float, ranks: int) -> float:
    """Expected distinct experts touched on the busiest of `ranks` EP ranks in one layer.

    Each rank holds `local` experts, each touched with probability `p_touch` by the step's
    routed tokens, so a rank's count is Binomial(local, p_touch) (ranks taken as independent).
    The layer waits for the rank that reads the most expert weights (the next collective syncs
    the ranks), so a step pays E[max of `ranks` counts] = sum_j (1 - F(j)^ranks) per layer, not
    the mean local * p_touch. At a few tokens per step the two differ most (DeepSeek-V3, EP8,
    4 tokens: about 3.8 experts on the average rank, 6.5 on the busiest); once every expert is
    touched they coincide. Where ranks hold unequal counts (experts not divisible by ep) the
    mean is kept."""
    mean = local * p_touch
    n = round(local)
    if ranks <= 1 or n < 1 or p_touch <= 0.0 or p_touch >= 1.0 or abs(local - n) > 1e-9:
        return mean
    pmf = [math.comb(n, j) * p_touch**j * (1 - p_touch) ** (n - j) for j in range(n + 1)]
    cdf, busiest = 0.0, 0.0
    for j in range(n):
        cdf += pmf[j]
        busiest += 1.0 - min(cdf, 1.0) ** ranks
    return busiest


@dataclass(frozen=True, slots=True)
class Act:
    """One FFN kind's gated activation on one GPU: rows per layer, intermediate width, the down
    GEMM's input format, the layers it runs in, and whether it is the layer's one counted launch."""

    rows: float
    width: float
    fmt: str
    layers: float
    launch: bool = True


def ffn_ops(inst: InstanceSpec, b: StepBatch, layer_scale: float, mtp: bool = False) -> list[Op]:
    """Dense FFN layers, the router, routed experts and shared experts (per GPU). `mtp`: the
    one MoE layer of an MTP module instead of the model's stack."""
    m, p, prec = inst.model, inst.parallel, inst.precision
    t_dp = b.tokens / p.dp_attention
    ops: list[Op] = []
    acts: list[Act] = []
    if m.dense_layers and t_dp and not mtp:
        ops.append(
            gemm_op(
                inst,
                "dense_ffn",
                "dense_gemm",
                t_dp,
                dense_ffn_params(m) / p.tp,
                prec.dense,
                m.dense_layers * layer_scale,
                FFN_GEMMS,
            )
        )
        acts.append(Act(t_dp, m.dense_intermediate / p.tp, prec.dense, m.dense_layers * layer_scale))
    if m.moe is None or not b.tokens:
        return [*ops, *ffn_activation_op(inst, acts)]
    n = 1.0 if mtp else m.moe_layers * layer_scale
    e = m.moe
    ops.append(
        Op(
            "moe.router",
            "moe",
            "gemm",
            "bf16",
            flops=2 * t_dp * gate_params(m) * n,
            bytes=gate_params(m) * 4 * n,
            launches=3 * n,
        )
    )
    pairs = b.tokens * e.top_k / p.ep
    pairs_max = pairs * expected_imbalance(inst, pairs)
    local = (e.num_experts + inst.runtime.redundant_experts) / p.ep
    touched = busiest_rank_experts(local, 1 - math.exp(-b.tokens * e.top_k / e.num_experts), p.ep)
    ep_params = expert_params(m) / p.moe_tp
    wb = BYTES_PER_PARAM[prec.moe]
    family = "moe_gemv" if not b.prefill_tokens else "moe_gemm"  # decode-only steps may use GEMV kernels
    path = path_for(inst, family, prec.moe)
    weights = (pairs_max if not path.weight_reuse else max(touched, 1.0)) * ep_params * wb
    ops.append(
        Op(
            "moe.experts",
            "moe",
            family,
            gemm_rate_key(prec.moe, inst.hardware, "precision.moe"),
            flops=2 * pairs_max * ep_params * n,
            bytes=(weights + pairs_max * m.hidden_size * ACT * 3) * n,
            launches=5 * n,
            fmt=prec.moe,
            rows_per_group=pairs_max / max(touched, 1.0),
            calls=2 * n,
            rows=pairs_max / max(touched, 1.0),
        )
    )
    acts.append(Act(pairs_max, e.expert_intermediate / p.moe_tp, prec.moe, n))
    if e.num_shared_experts:
        ops.append(
            gemm_op(
                inst, "moe.shared_expert", "dense_gemm", t_dp, shared_expert_params(m) / p.tp, prec.dense, n, FFN_GEMMS
            )
        )
        acts.append(Act(t_dp, e.num_shared_experts * e.expert_intermediate / p.tp, prec.dense, n, launch=False))
    return [*ops, *ffn_activation_op(inst, acts)]


def activation_launches_per_layer(rt: RuntimeOptions) -> float | None:
    """How many of the engine's `elementwise_launches_per_layer` are the FFN activation that
    `ffn_activation_op` prices apart: one (never more than the engine runs), or None where the runtime
    gives measured elementwise traffic, which covers every kernel. `roofline.step` prices the rest."""
    if rt.elementwise_bytes_per_token_layer is not None:
        return None
    return min(1.0, rt.elementwise_launches_per_layer)


def ffn_activation_op(inst: InstanceSpec, acts: list[Act]) -> list[Op]:
    """The gated activation of each FFN kind (dense, routed experts, shared experts): one kernel per
    FFN layer between the two GEMMs (SGLang and vLLM silu_and_mul, with the down GEMM's activation
    quantization fused or next to it; TRT-LLM GatedMLP's SwiGLU kernel; the MoE runners' activation
    between their grouped GEMMs), reading the gate and up halves in BF16 and writing the intermediate
    in the down GEMM's input format (`DISPATCH_BYTES`: FP8, NVFP4 or BF16; MXFP4 experts are priced with
    BF16 inputs, as Hopper and vLLM run them, where TRT-LLM and SGLang on sm_100 write MXFP8, 1 B). Its
    traffic scales with the intermediate width, not the hidden size, so it weighs most on small models.
    Launches: one per layer, one of the engine's `elementwise_launches_per_layer` (roofline.step
    prices the others at the hidden size; a shared expert's activation adds traffic, not a counted
    launch). An engine that gives measured elementwise traffic (`elementwise_bytes_per_token_layer`)
    has it inside that measurement, and no separate op. Not modelled: kernels that fuse the activation
    into the gate/up GEMM's epilogue (TRT-LLM ships such gated-activation GEMMs for sm_100), which
    have no separate pass; and the MTP layer's other elementwise kernels (`roofline.step_ops.mtp_ops`)."""
    per_layer = activation_launches_per_layer(inst.runtime)
    if per_layer is None or not acts:
        return []
    nbytes = sum(a.rows * a.width * (2 * ACT + DISPATCH_BYTES[a.fmt]) * a.layers for a in acts)
    launches = per_layer * sum(a.layers for a in acts if a.launch)
    return [Op("ffn.activation", "other", "elementwise", "bf16", bytes=nbytes, launches=launches)]

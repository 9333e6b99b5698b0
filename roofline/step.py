"""The step-cost model: time of one forward step of one instance, with a per-op breakdown.

`step_cost(inst, batch)` is the only place step time is computed; the estimator and the
simulator both call it. Ops come from `roofline.ops` and `roofline.attention_ops`; each is priced
on its kernel path (`roofline.kernels`) and tagged with the source of its number. Communication is priced by
`roofline.comm`; the `comm_overlap` share of EP communication hides under compute (two-batch or
fine-grained overlap). Launch gaps (CUDA graphs vs eager) are one op of their own.

Pipeline parallelism: the returned time is the latency of one micro-batch through all stages;
`stage_time_s` is one stage's time (the throughput limit with `pp` micro-batches in flight).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from roofline.attention_ops import attention_ops
from roofline.batch import StepBatch
from roofline.calibrated import lookup
from roofline.comm import allreduce_time, alltoall_time, ep_copies
from roofline.deployment import InstanceSpec
from roofline.kernel_paths import KernelPath
from roofline.kernels import path_for, select
from roofline.ops import ACT, Op, activation_launches_per_layer, ffn_ops, gemm_op
from roofline.precision import DISPATCH_BYTES, peak_flops

Source = Literal["roofline", "calibrated", "measured"]
CATEGORIES = ("attention", "indexer", "dense_gemm", "moe", "ep_comm", "tp_comm", "other")


@dataclass(frozen=True, slots=True)
class OpTime:
    name: str
    category: str
    time_s: float
    flops: float
    bytes: float
    kernel: str
    bound: str  # compute | memory | latency | comm
    source: Source


@dataclass(frozen=True, slots=True)
class StepCost:
    time_s: float
    stage_time_s: float
    ops: tuple[OpTime, ...]
    tokens: int
    hidden_comm_s: float = 0.0
    notes: tuple[str, ...] = field(default=())

    @property
    def carries_prompt(self) -> bool:
        """The step prefills prompt tokens: a prefill step, or a mixed scheduler's decode step with a prompt."""
        return any(op.name == "attention.prefill" for op in self.ops)

    def by_category(self) -> dict[str, float]:
        out = dict.fromkeys(CATEGORIES, 0.0)
        for op in self.ops:
            out[op.category] += op.time_s
        return out

    def share(self, category: str) -> float:
        total = sum(o.time_s for o in self.ops)
        return self.by_category()[category] / total if total else 0.0


def _calibrated(op: Op, inst: InstanceSpec, default: bool) -> OpTime | None:
    """Price from a measured efficiency table (roofline.calibrated), where one applies: to the op's
    path only if it is the architecture's `default`, the kernel the table measured, not one a what-if,
    the model or the engine chose."""
    if not op.flops and not op.bytes:
        return None
    hit = lookup(inst.hardware, op.family, op.fmt)
    if hit is None or not default:
        return None
    table, label = hit
    hw = inst.hardware
    calls = op.calls or op.launches or 1.0
    ideal = max(op.flops / peak_flops(hw, op.rate), op.bytes / hw.mem_bw)  # type: ignore[arg-type]
    eta = table.eta(op.flops / calls, op.bytes / calls, op.rows)
    bound = "compute" if op.flops / peak_flops(hw, op.rate) >= op.bytes / hw.mem_bw else "memory"  # type: ignore[arg-type]
    return OpTime(op.name, op.category, ideal / eta, op.flops, op.bytes, f"{op.family} ({label})", bound, "calibrated")


def _padding(path: KernelPath, rows: float) -> float:
    """FLOPs run over FLOPs needed for a grouped GEMM with a mean of `rows` rows per touched expert:
    the rows padded to the kernel's tile, `tile_m`, or for a token-tiled kernel to the power of two from
    8 up to `tile_m` that holds them (one tile for the launch, as TensorRT-LLM's calculate_tile_tokens_dim
    picks it), then whole tiles."""
    assert rows > 0, rows
    assert path.tile_m > 0, path.name
    tile = path.tile_m
    if path.token_tile:
        tile = min(tile, max(8, 1 << max(0, math.ceil(rows) - 1).bit_length()))
    return math.ceil(rows / tile) * tile / rows


def _path(inst: InstanceSpec, op: Op, paths: dict[tuple[str, str], tuple[KernelPath, bool]]) -> tuple[KernelPath, bool]:
    """The kernel path `op` runs and whether it is the architecture's default, once per op family and
    format of a step (`paths`: the step's own, so nothing outlives it)."""
    key = (op.family, op.fmt)
    hit = paths.get(key)
    if hit is None:
        path = path_for(inst, op.family, op.fmt)
        hit = paths[key] = (path, path.name == select(inst.hardware.arch, op.family, op.fmt).name)
    return hit


def _price(
    op: Op, inst: InstanceSpec, source: Source, paths: dict[tuple[str, str], tuple[KernelPath, bool]] | None = None
) -> OpTime:
    if op.family == "comm":
        lib = "deepep" if op.category == "ep_comm" else "nccl"  # a TP all-reduce read 'nccl/deepep' (trial)
        return OpTime(op.name, op.category, op.comm_s, 0.0, op.bytes, lib, "comm", "roofline")
    path, default = _path(inst, op, {} if paths is None else paths)
    calibrated = _calibrated(op, inst, default)
    if calibrated is not None:
        return calibrated
    hw = inst.hardware
    rate = path.math or op.rate
    peak = peak_flops(hw, rate) if path.tensor_cores else hw.cuda_core_fp32_tflops * 1e12  # type: ignore[arg-type]
    flops = op.flops
    if path.tile_m and op.rows_per_group > 0:
        flops *= _padding(path, op.rows_per_group)
    t_c = flops / (peak * path.compute_eff)
    t_m = op.bytes / (hw.mem_bw * path.memory_eff)
    fixed = op.launches * max(0.0, path.fixed_s - inst.runtime.pdl_hidden_s)
    bound = "compute" if t_c >= t_m else "memory"
    if fixed > max(t_c, t_m):
        bound = "latency"
    return OpTime(op.name, op.category, fixed + max(t_c, t_m), op.flops, op.bytes, path.name, bound, source)


def _elementwise_kernels(inst: InstanceSpec) -> float:
    """Kernels per layer priced here: the engine's `elementwise_launches_per_layer` less the FFN's
    gated activation, which `roofline.ops.ffn_activation_op` prices at the intermediate width
    (unless the runtime gives measured traffic, which covers every kernel)."""
    rt = inst.runtime
    return rt.elementwise_launches_per_layer - (activation_launches_per_layer(rt) or 0.0)


def _elementwise_bytes_per_token(inst: InstanceSpec) -> float:
    """Activation traffic of one layer's elementwise kernels per token (norms, RoPE, quantization,
    residuals): measured when the runtime gives it (the FFN activation included), else each kernel
    other than the FFN activation reads and writes about one hidden-size activation tensor (1.25
    passes each: 7 of a fused engine's default 8, proportionally more for an unfused one)."""
    rt = inst.runtime
    if rt.elementwise_bytes_per_token_layer is not None:
        return rt.elementwise_bytes_per_token_layer
    return inst.model.hidden_size * ACT * 1.25 * _elementwise_kernels(inst)


def _layer_ops(inst: InstanceSpec, b: StepBatch, scale: float) -> list[Op]:
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
            bytes=t_dp * _elementwise_bytes_per_token(inst) * hc * layers,
            launches=(_elementwise_kernels(inst) + sinkhorn) * layers,
            calls=(_elementwise_kernels(inst) + sinkhorn) * layers,
            rows=t_dp,
        )
    )
    return ops


def _head_ops(inst: InstanceSpec, b: StepBatch) -> list[Op]:
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


def _comm_ops(inst: InstanceSpec, b: StepBatch, scale: float) -> list[Op]:
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


def _mtp_ops(inst: InstanceSpec, b: StepBatch) -> list[Op]:
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
    per_pass += _head_ops(inst, one) + _comm_ops(inst, one, 1.0 / m.num_layers)
    for op in per_pass:
        op.name = "mtp." + op.name
        op.flops *= b.draft_tokens
        op.bytes *= b.draft_tokens
        op.launches *= b.draft_tokens
        op.calls *= b.draft_tokens  # one pass per draft: each call keeps its size (the calibrated lookup)
        op.comm_s *= b.draft_tokens
    return per_pass


def _host_bound(inst: InstanceSpec, b: StepBatch, gpu_s: float, launches: float, graph: bool) -> OpTime | None:
    """Host time per step that the GPU waits for: each rank's executor does per-request work every
    iteration (`host_us_per_request` x its requests); an overlapping scheduler prepares step n+1
    while the GPU runs step n, so the step lasts max(GPU time, host time) and the excess shows.
    A PyTorch executor also launches every kernel of a step it does not replay from a CUDA graph
    (steps with prefill: TRT-LLM captures generation-only batches) from Python, one eager dispatch
    per kernel (`launch_gap_eager_us`) on the same host thread, so those launches are host time too;
    programmatic dependent launch overlaps a kernel's prologue on the GPU, not its host dispatch."""
    rt = inst.runtime
    per_req = rt.host_us_per_request
    if not per_req:
        return None
    requests = (b.decode_seqs + len(b.prefill_chunks)) / inst.parallel.dp_attention
    host_s = per_req * 1e-6 * requests
    if not graph and rt.backend == "pytorch":
        host_s += launches * rt.launch_gap_eager_us * 1e-6
    if host_s <= gpu_s:
        return None
    return OpTime("host_per_request", "other", host_s - gpu_s, 0.0, 0.0, "host", "latency", "calibrated")


def step_cost(inst: InstanceSpec, batch: StepBatch, offload_bytes: float = 0.0) -> StepCost:
    """Time of one forward step of `inst` on `batch` (whole instance), with its breakdown."""
    if batch.tokens == 0:
        return StepCost(0.0, 0.0, (), 0)
    p = inst.parallel
    scale = 1.0 / p.pp
    ops = _layer_ops(inst, batch, scale)
    if p.pp == 1:  # the head runs on the last stage; with pp it adds to the latency below
        ops += _head_ops(inst, batch)
    ops += _mtp_ops(inst, batch)
    paths: dict[tuple[str, str], tuple[KernelPath, bool]] = {}
    priced = [_price(op, inst, "roofline", paths) for op in ops if op.family != "comm"]
    compute = sum(o.time_s for o in priced)
    comm = [_price(op, inst, "roofline") for op in _comm_ops(inst, batch, scale)]
    hidden = 0.0
    timed: list[OpTime] = []
    for c in comm:
        if c.category == "ep_comm" and inst.runtime.comm_overlap:
            # two-batch / fine-grained overlap hides part of the shorter of comm and compute
            h = inst.runtime.comm_overlap * min(c.time_s, compute)
            hidden += h
            timed.append(OpTime(c.name, c.category, c.time_s - h, c.flops, c.bytes, c.kernel, c.bound, c.source))
        else:
            timed.append(c)
    launches = sum(op.launches for op in ops) + 2 * len(comm) * inst.model.num_layers * scale
    rt = inst.runtime
    graph = rt.cuda_graphs and not batch.prefill_tokens  # engines capture decode steps only
    if graph or rt.pdl:
        gap = rt.launch_gap_s if rt.cuda_graphs else rt.launch_gap_eager_us * 1e-6
        timed.append(
            OpTime(
                "launch_overhead",
                "other",
                launches * gap,
                0.0,
                0.0,
                "cuda-graph" if graph else "pdl",
                "latency",
                "roofline",
            )
        )
    else:  # eager: each launch costs its host-side dispatch (additive; matches seed 003's eager deployment)
        gap = rt.launch_gap_eager_us * 1e-6
        timed.append(OpTime("launch_overhead", "other", launches * gap, 0.0, 0.0, "eager", "latency", "roofline"))
    if rt.step_overhead_us:
        timed.append(
            OpTime("host_step_overhead", "other", rt.step_overhead_us * 1e-6, 0.0, 0.0, "host", "latency", "measured")
        )
    host = _host_bound(inst, batch, sum(o.time_s for o in priced + timed), launches, graph)
    if host is not None:
        timed.append(host)
    all_ops = tuple(priced + timed)
    stage = sum(o.time_s for o in all_ops)
    notes: list[str] = []
    if offload_bytes > 0:
        t_off = offload_bytes / (inst.hardware.host_link.bw_gbps_unidir * 1e9)
        exposed = max(0.0, t_off - stage)
        all_ops += (
            OpTime(
                "weights.offload_prefetch",
                "other",
                exposed,
                0.0,
                offload_bytes,
                inst.hardware.host_link.kind,
                "memory",
                "roofline",
            ),
        )
        stage += exposed
        notes.append(f"{offload_bytes / 1e9:.1f} GB of weights per GPU streamed from host each step")
    latency = stage
    if p.pp > 1:
        head = [_price(op, inst, "roofline", paths) for op in _head_ops(inst, batch)]
        all_ops += tuple(head)
        hop = batch.tokens / p.dp_attention * inst.model.hidden_size * ACT
        p2p = (p.pp - 1) * allreduce_time(inst.hardware, 2, hop / 2)
        latency = p.pp * stage + sum(o.time_s for o in head) + p2p
    return StepCost(latency, stage, all_ops, batch.tokens, hidden, tuple(notes))

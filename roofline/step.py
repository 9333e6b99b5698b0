"""The step-cost model: time of one forward step of one instance, with a per-op breakdown.

`step_cost(inst, batch)` is the only place step time is computed; the estimator and the
simulator both call it. The step's ops come from `roofline.step_ops`; each is priced
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

from roofline.batch import StepBatch
from roofline.calibrated import lookup
from roofline.comm import allreduce_time
from roofline.deployment import InstanceSpec
from roofline.kernel_paths import KernelPath
from roofline.kernels import path_for, select
from roofline.ops import ACT, Op
from roofline.precision import peak_flops
from roofline.step_ops import comm_ops, head_ops, layer_ops, mtp_ops

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
    ops = layer_ops(inst, batch, scale)
    if p.pp == 1:  # the head runs on the last stage; with pp it adds to the latency below
        ops += head_ops(inst, batch)
    ops += mtp_ops(inst, batch)
    paths: dict[tuple[str, str], tuple[KernelPath, bool]] = {}
    priced = [_price(op, inst, "roofline", paths) for op in ops if op.family != "comm"]
    compute = sum(o.time_s for o in priced)
    comm = [_price(op, inst, "roofline") for op in comm_ops(inst, batch, scale)]
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
        head = [_price(op, inst, "roofline", paths) for op in head_ops(inst, batch)]
        all_ops += tuple(head)
        hop = batch.tokens / p.dp_attention * inst.model.hidden_size * ACT
        p2p = (p.pp - 1) * allreduce_time(inst.hardware, 2, hop / 2)
        latency = p.pp * stage + sum(o.time_s for o in head) + p2p
    return StepCost(latency, stage, all_ops, batch.tokens, hidden, tuple(notes))

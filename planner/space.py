"""The candidate space of a planning question, and why candidates are pruned.

A candidate is a serving mode (aggregated, or disaggregated prefill + decode), an instance
layout per pool (TP, attention DP, EP, PP), a precision mix the hardware can run, MTP on/off and
a KV memory fraction. Concurrency per instance is not part of the candidate: `planner.score`
sweeps it. Layouts include non-powers of two (EP 24, 48, 72, 144) where the NVLink domain and
the budget allow; PP appears only where the PP=1 layout of the same GPUs cannot hold the weights.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from planner.defaults import mtp_acceptance
from planner.question import Question
from roofline.catalog.schema import CompressedAttention, HardwareSpec, MLAAttention, ModelSpec
from roofline.deployment import InstanceSpec, MTPConfig, Parallelism, RuntimeOptions
from roofline.errors import PlannerError
from roofline.memory import plan_memory
from roofline.precision import PrecisionMix

WIDE_EP = (16, 24, 32, 40, 48, 56, 64, 72, 96, 128, 144)


@dataclass(frozen=True, slots=True)
class Layout:
    gpus: int
    tp: int = 1
    dp: int = 1
    ep: int = 1
    pp: int = 1

    @property
    def label(self) -> str:
        parts = [
            f"TP{self.tp}" if self.tp > 1 or self.dp == 1 else "",
            f"DP{self.dp}" if self.dp > 1 else "",
            f"EP{self.ep}" if self.ep > 1 else "",
            f"PP{self.pp}" if self.pp > 1 else "",
        ]
        return " ".join(p for p in parts if p)


@dataclass(frozen=True, slots=True)
class Candidate:
    mode: str
    decode: Layout  # the aggregated instance, or the decode pool's instance
    prefill: Layout | None
    precision: PrecisionMix
    mtp: bool
    mem_fraction: float

    @property
    def precision_label(self) -> str:
        p = self.precision
        return f"attn {p.attention}/kv {p.kv_cache}, dense {p.dense}, experts {p.moe}"


def _layouts(m: ModelSpec, hw: HardwareSpec, budget: int, role: str) -> list[Layout]:
    node = min(hw.gpus_per_node * 2, 8) if hw.scaleup.domain_gpus > 1 else hw.gpus_per_node
    out: list[Layout] = []
    tps = [g for g in (1, 2, 4, 8) if g <= min(budget, node)]
    if m.moe is None:
        for tp in tps:
            out.append(Layout(tp, tp=tp))
            if 2 * tp <= budget and tp >= 4:
                out.append(Layout(2 * tp, tp=tp, pp=2))
        return out
    experts = m.moe.num_experts
    for g in tps:
        out.append(Layout(g, tp=g, ep=g))
    wide = [g for g in (2, 4, 8, *WIDE_EP) if (g <= budget and experts % g == 0) or g in (24, 48, 72, 144)]
    cap = 16 if role == "prefill" else budget
    for g in wide:
        if 2 <= g <= min(budget, cap):
            out.append(Layout(g, dp=g, ep=g))
    for g in (4, 8):  # pipeline over two groups where one group cannot hold the model
        if 2 * g <= budget:
            out.append(Layout(2 * g, tp=g, ep=g, pp=2))
    return sorted(set(out), key=lambda lay: (lay.gpus, lay.pp, lay.dp))


def _precisions(m: ModelSpec, hw: HardwareSpec) -> list[PrecisionMix]:
    sparse = isinstance(m.attention, CompressedAttention) or (
        isinstance(m.attention, MLAAttention) and m.attention.indexer is not None
    )
    kv = [("bf16", "fp8"), ("fp8", "fp8")] if sparse else [("bf16", "bf16"), ("fp8", "fp8")]
    fmt = m.checkpoint_format
    dense = ["fp8"] if fmt.startswith("fp8") or fmt.startswith("nvfp4") else ["bf16", "fp8"]
    experts = {"fp8"} if m.moe else {dense[0]}
    if m.moe and hw.is_blackwell and hw.peak_tflops.fp4:
        experts.add("nvfp4")
    if m.moe and "fp4" in fmt and not hw.is_blackwell:
        experts.add("mxfp4")
    return [
        PrecisionMix.model_validate({"attention": a, "kv_cache": k, "dense": d, "moe": e})
        for a, k in kv
        for d in dense
        for e in sorted(experts)
    ]


def instance(
    engine: str, m: ModelSpec, hw: HardwareSpec, lay: Layout, prec: PrecisionMix, mtp: bool, frac: float, role: str
) -> InstanceSpec:
    """The step-cost instance of a layout, with the engine's runtime defaults. Weight offload to
    host is considered for SGLang prefill instances only (seed 000); a decode step cannot hide
    streaming the weights."""
    wide = lay.ep > 1 and lay.dp > 1
    rt = RuntimeOptions(
        cuda_graphs=True,
        comm_overlap=0.5 if wide else 0.0,
        mem_fraction=frac,
        redundant_experts=32 if wide and lay.ep > 8 and engine == "sglang" else 0,
        kv_from_free_memory=engine == "trtllm",
        pdl=engine == "trtllm",
        offload=None if engine == "sglang" and role == "prefill" else False,
    )
    spec = MTPConfig(draft_tokens=3, accepted_tokens=mtp_acceptance(3)) if mtp and role != "prefill" else None
    return InstanceSpec(
        model=m,
        hardware=hw,
        precision=prec,
        runtime=rt,
        mtp=spec,
        parallel=Parallelism(gpus=lay.gpus, tp=lay.tp, dp_attention=lay.dp, ep=lay.ep, pp=lay.pp),
    )


def candidates(q: Question, m: ModelSpec, hw: HardwareSpec) -> tuple[list[Candidate], Counter[str]]:
    """All candidates whose instances fit in memory, and the count of pruned ones by reason."""
    pruned: Counter[str] = Counter()
    fits: dict[tuple[Layout, PrecisionMix, bool, float, str], bool] = {}

    def ok(lay: Layout, prec: PrecisionMix, mtp: bool, frac: float, role: str) -> bool:
        key = (lay, prec, mtp, frac, role)
        if key not in fits:
            try:
                plan = plan_memory(
                    instance(q.engine, m, hw, lay, prec, mtp, frac, role), kv_needed_tokens=q.isl + q.osl
                )
                fits[key] = plan.max_seqs(q.isl + q.osl) >= 1
                if not fits[key]:
                    pruned["KV pool holds no sequence"] += 1
            except PlannerError as exc:
                pruned[type(exc).__name__] += 1
                fits[key] = False
        return fits[key]

    out: list[Candidate] = []
    mtps = [x for x in q.mtp if not x or m.mtp_layers]
    decode_layouts = _layouts(m, hw, q.budget, "decode")
    prefill_layouts = _layouts(m, hw, q.budget, "prefill")
    for cand in _enumerate(q, decode_layouts, prefill_layouts, _precisions(m, hw), mtps):
        if cand.decode.pp > 1 and ok(
            Layout(cand.decode.gpus // 2, tp=cand.decode.tp, ep=cand.decode.ep),
            cand.precision,
            cand.mtp,
            cand.mem_fraction,
            "decode",
        ):
            pruned["pipeline parallelism not needed"] += 1
            continue
        if cand.prefill and cand.decode.gpus + cand.prefill.gpus > q.budget:
            pruned["over the GPU budget"] += 1
            continue
        role = "aggregated" if cand.mode == "aggregated" else "decode"
        if not ok(cand.decode, cand.precision, cand.mtp, cand.mem_fraction, role):
            continue
        if cand.prefill and not ok(cand.prefill, cand.precision, False, cand.mem_fraction, "prefill"):
            continue
        out.append(cand)
    return out, pruned


def _enumerate(
    q: Question, dec: list[Layout], pre: list[Layout], precs: list[PrecisionMix], mtps: list[bool]
) -> Iterator[Candidate]:
    for prec in precs:
        for frac in q.kv_mem_fractions:
            for mtp in mtps:
                for d in dec:
                    if "aggregated" in q.modes:
                        yield Candidate("aggregated", d, None, prec, mtp, frac)
                    if "disaggregated" in q.modes:
                        for p in pre:
                            if p.pp == 1:
                                yield Candidate("disaggregated", d, p, prec, mtp, frac)

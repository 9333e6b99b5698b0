"""`planner explain`: where a deployment's time goes, how far it is from the hardware's limit,
and which single change buys the most.

The hardware limit of a step is its speed of light: all its FLOPs at the tensor-core peak and
all its bytes at full memory bandwidth, whichever is longer, with no fixed costs or
communication. Levers are re-estimated with the same estimator (one change at a time) and
ranked by output tokens/s per GPU at the same concurrency (a stated request rate: the
concurrency it holds, by Little's law).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from planner.engines import profile
from planner.model.defaults import MTP_DRAFTS, Resolved, fp8_cache_attention, mtp_acceptance
from planner.model.deployment import Deployment, Pool
from planner.model.estimator import estimate
from planner.model.metrics import Metrics
from roofline.deployment import InstanceSpec, MTPConfig
from roofline.errors import PlannerError
from roofline.kernels import TENSOR_CORE_ALTERNATIVE, tensor_core_alternatives
from roofline.precision import peak_flops
from roofline.step import CATEGORIES, StepCost


@dataclass(slots=True)
class Lever:
    name: str
    output_tok_s_per_gpu: float | None
    tpot_ms: float | None
    gain: float | None  # relative change of output tok/s per GPU
    note: str = ""
    tpot_at_rate_ms: float | None = None  # a stated request rate: the TPOT the change gives at that rate


@dataclass(slots=True)
class Explanation:
    estimate: Metrics
    phase_step: str  # which step the breakdown shows
    categories: dict[str, float]  # seconds per category
    bottleneck: str
    speed_of_light_s: float
    levers: list[Lever] = field(default_factory=list)
    # a stated request rate: the rate, and the requests in flight it holds, at which levers are priced
    rate: float | None = None
    held: float | None = None
    fallbacks: list[str] = field(default_factory=list)  # CUDA-core kernels in use
    saturated: bool = False  # no traffic stated: each change is priced at its own saturated throughput
    # each fallback an engine chose on this architecture -> the engine, and what its choice was measured on
    chosen_by: dict[str, str] = field(default_factory=dict)


def speed_of_light(step: StepCost, inst: InstanceSpec) -> float:
    """Lower bound of the step on this GPU: total FLOPs at the best tensor-core rate of the mix,
    or total bytes at peak bandwidth."""
    hw = inst.hardware
    best = max(peak_flops(hw, "fp8"), peak_flops(hw, "fp4") if hw.peak_tflops.fp4 else 0.0)
    flops = sum(o.flops for o in step.ops)
    data = sum(o.bytes for o in step.ops if o.category not in ("ep_comm", "tp_comm"))
    return max(flops / best, data / hw.mem_bw)


def _with(res: Resolved, change: Callable[[InstanceSpec], InstanceSpec]) -> Resolved:
    """The same scenario with `change` applied to every pool's instance."""
    dep = res.deployment
    pools = tuple(Pool(p.role, p.instances, change(p.instance)) for p in dep.pools)
    return replace(res, deployment=Deployment(dep.engine, pools), assumed=list(res.assumed))


def _runtime(inst: InstanceSpec, **kw: object) -> InstanceSpec:
    return inst.model_copy(update={"runtime": inst.runtime.model_copy(update=kw)})


def _precision(inst: InstanceSpec, **kw: str) -> InstanceSpec:
    new = inst.model_copy(update={"precision": inst.precision.model_copy(update=kw)})
    return InstanceSpec.model_validate(new.model_dump(), strict=False)


def candidate_levers(
    res: Resolved, main: InstanceSpec
) -> dict[str, tuple[Callable[[InstanceSpec], InstanceSpec], str]]:
    hw, m, prec, rt = res.hardware, res.model, main.precision, main.runtime
    out: dict[str, tuple[Callable[[InstanceSpec], InstanceSpec], str]] = {}
    tc = tensor_core_alternatives(main)
    if tc:
        out["tensor-core kernels for " + ", ".join(sorted(tc))] = (
            lambda i: _runtime(i, kernel_overrides={**i.runtime.kernel_overrides, **tc}),
            "replaces the CUDA-core fallbacks (the ceiling a custom kernel would reach)",
        )
    att = fp8_cache_attention(res.deployment.engine, m, hw)  # as the plan's precision mixes pair them
    if prec.attention == "bf16" and prec.kv_cache == "fp8" and att == "fp8":  # the KV bytes are already halved
        out["fp8 attention (KV cache already fp8)"] = (
            lambda i: _precision(i, attention="fp8"),
            "FP8 attention math; KV bytes and capacity unchanged",
        )
    elif prec.attention == "bf16" and prec.kv_cache != "fp8":
        name = "fp8 attention and KV cache" if att == "fp8" else f"fp8 KV cache ({att} attention math, the engine's)"
        out[name] = (
            lambda i: _precision(i, attention=att, kv_cache="fp8"),
            "halves KV bytes, doubles KV capacity",
        )
    if prec.dense == "bf16" and hw.peak_tflops.fp8:  # a bf16 checkpoint's projections and dense FFNs
        what = "dense FFN layers" if m.moe is None else "shared experts and dense layers"
        out["fp8 dense weights"] = (
            lambda i: _precision(i, dense="fp8"),
            f"FP8 tensor cores, half the bytes of the attention projections, {what}",
        )
    if m.moe is None and hw.is_blackwell and hw.peak_tflops.fp4 and prec.dense != "nvfp4":  # a dense model's FP4
        out["nvfp4 dense weights"] = (
            lambda i: _precision(i, dense="nvfp4"),
            "FP4 tensor cores, "
            + {"bf16": "about a quarter of the weight bytes", "fp8": "about half the weight bytes"}.get(
                prec.dense, "about the same weight bytes as its 4-bit format"
            ),
        )
    if m.moe is not None and hw.is_blackwell and hw.peak_tflops.fp4 and prec.moe != "nvfp4":
        why = {
            "mxfp4": "FP4 tensor cores on NVFP4's kernel path (expert bytes about the same as MXFP4)",
            "w4a16": "FP4 tensor cores instead of 4-bit weights dequantized to BF16 (expert bytes about the same)",
            "bf16": "FP4 tensor cores, about a quarter of the expert bytes",
        }
        note = why.get(prec.moe, "FP4 tensor cores, about half the expert bytes")  # fmt: skip
        out["nvfp4 experts"] = (lambda i: _precision(i, moe="nvfp4"), note)
    if not rt.cuda_graphs:
        out["CUDA graphs on"] = (lambda i: _runtime(i, cuda_graphs=True), "removes eager launch overhead")
    if m.mtp_layers and main.mtp is None:  # the MTP the plan's search tries (it read 1 draft here; trial)
        mtp = MTPConfig(draft_tokens=MTP_DRAFTS, accepted_tokens=mtp_acceptance(MTP_DRAFTS))
        out[f"MTP, {MTP_DRAFTS} draft tokens"] = (
            lambda i: i.model_copy(update={"mtp": mtp}),
            f"{mtp.accepted_tokens:.2f} drafts accepted a step (85% of the first, DeepSeek-V3 report; 0.20 less "
            "for each further draft, assumed: planner.model.defaults.mtp_acceptance)",
        )
    if main.parallel.ep > 1 and main.parallel.dp_attention > 1 and rt.comm_overlap < 0.9:
        out["full comm/compute overlap"] = (lambda i: _runtime(i, comm_overlap=0.9), "hides EP all-to-all")
    return out


def explain(res: Resolved) -> Explanation:
    base = estimate(res)
    main = res.pool("decode", "aggregated", "prefill").instance
    step = base.decode_step or base.prefill_step
    assert step is not None
    cats = step.by_category()
    bottleneck = max(CATEGORIES, key=lambda c: cats[c])
    fallbacks = sorted({o.kernel for o in step.ops if o.kernel in TENSOR_CORE_ALTERNATIVE})
    chosen_by = {}  # sixteenth trial: gpt-oss on RTX PRO 6000 ran a kernel measured on DeepSeek-V4-Flash, unsaid
    if fallbacks and set(fallbacks) & set(main.runtime.engine_kernels.values()):
        kernels = profile(res.deployment.engine).for_arch(main.hardware.arch).kernels
        for k in fallbacks:
            if kernels is not None and k in main.runtime.engine_kernels.values():
                chosen_by[k] = f"{res.deployment.engine}'s kernel on {main.hardware.arch}: {kernels.source}"
    mixed = step is base.decode_step and any("prefill" in o.name for o in step.ops)  # a vLLM/TRT-LLM mixed step
    exp = Explanation(
        base,
        ("mixed decode + prefill-chunk" if mixed else "decode") if step is base.decode_step else "prefill",
        cats,
        bottleneck,
        speed_of_light(step, main),
        fallbacks=fallbacks,
        chosen_by=chosen_by,
    )
    base_tput = base.output_tok_s_per_gpu or base.input_tok_s_per_gpu
    # at a stated request rate every change serves the same rate (a +0% gain for a 35% faster TPOT):
    # price each change at the base's concurrency instead (Little's law), as the table says
    # (the capacity the change adds at that load); at the rate itself the throughput is the rate's and TPOT
    # is what changes, so that is priced too (trial: '+20%' read as more throughput at a fixed 4 req/s)
    conc = base.concurrency if res.request_rate is not None and res.phase == "end-to-end" else None
    if conc is not None:
        exp.rate, exp.held = res.request_rate, conc
    exp.saturated = res.concurrency is None and res.request_rate is None
    for name, (change, note) in candidate_levers(res, main).items():
        try:
            changed = _with(res, change)
            e = estimate(changed, conc)
            at_rate = estimate(changed) if conc is not None else None
        except PlannerError as exc:
            exp.levers.append(Lever(name, None, None, None, f"not possible: {exc}"))
            continue
        tput = e.output_tok_s_per_gpu or e.input_tok_s_per_gpu
        gain = tput / base_tput - 1 if base_tput else None
        lever = Lever(name, tput, e.tpot_s * 1e3 if e.tpot_s else None, gain, note)
        if at_rate is not None and at_rate.tpot_s and not at_rate.saturated:
            lever.tpot_at_rate_ms = at_rate.tpot_s * 1e3
        exp.levers.append(lever)
    exp.levers.sort(key=lambda lv: -(lv.gain if lv.gain is not None else -1e9))
    return exp

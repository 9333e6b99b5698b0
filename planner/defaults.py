"""Engine defaults for what a scenario leaves `unknown`, and the resolution of a scenario into
step-cost instances. Every default used is appended to `Resolved.assumed` with its reason, so
outputs can say what they assumed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from planner.scenario import PoolSpec, Scenario, ScenarioError, format_validation_error
from roofline.catalog import get_hardware, get_model
from roofline.catalog.schema import CompressedAttention, HardwareSpec, MLAAttention, ModelSpec
from roofline.deployment import InstanceSpec, MTPConfig, Parallelism, RuntimeOptions
from roofline.precision import PrecisionMix

DEFAULT_ISL = DEFAULT_OSL = 1024  # the 1k/1k point SGLang, TRT-LLM and InferenceMAX publish first
MEM_FRACTION = {"sglang": 0.85, "trtllm": 0.90, "vllm": 0.90, "other": 0.85}
PREFILL_TOKENS_PER_RANK = 16384  # SGLang chunked-prefill size on >=80 GB GPUs, per attention-DP rank


def mtp_acceptance(draft_tokens: int) -> float:
    """Mean accepted drafts per step: the first draft is accepted 85% of the time (DeepSeek-V3
    technical report, sec. 5.4.3: 85-90%); engines draft further tokens by reusing the one MTP
    module autoregressively, whose conditional acceptance we assume falls by 0.20 per extra
    draft (assumption; 3 drafts -> 1.65 accepted, 2.65 tokens per step)."""
    total, chain = 0.0, 1.0
    for i in range(draft_tokens):
        chain *= max(0.85 - 0.20 * i, 0.0)
        total += chain
    return total


@dataclass(frozen=True, slots=True)
class Pool:
    role: str  # prefill | decode | aggregated
    spec: PoolSpec
    instance: InstanceSpec


@dataclass(slots=True)
class Resolved:
    scenario: Scenario
    model: ModelSpec
    hardware: HardwareSpec
    pools: dict[str, Pool]
    isl: int
    osl: int
    kv_len: float
    concurrency: float | None  # total over the deployment (or over the phase's pool)
    request_rate: float | None
    max_prefill_tokens: int
    assumed: list[str] = field(default_factory=list)
    all_pools: list[Pool] = field(default_factory=list)  # every pool, several per role allowed

    @property
    def gpus(self) -> int:
        return sum(p.spec.gpus for p in (self.all_pools or self.pools.values()))


def _checkpoint_formats(m: ModelSpec) -> tuple[str, str]:
    fmt = m.checkpoint_format
    dense = "fp8" if fmt.startswith("fp8") else "bf16"
    if "fp4" in fmt or "mxfp4" in fmt:
        moe = "mxfp4"
    elif fmt.startswith("nvfp4"):
        dense, moe = "fp8", "nvfp4"
    else:
        moe = dense
    return dense, moe


def _precision(s: Scenario, m: ModelSpec, note: list[str]) -> PrecisionMix:
    p = s.precision
    dense_ck, moe_ck = _checkpoint_formats(m)
    sparse = isinstance(m.attention, CompressedAttention) or (
        isinstance(m.attention, MLAAttention) and m.attention.indexer is not None
    )
    kv = p.kv_cache
    if kv == "unknown":
        kv = "fp8" if sparse or p.attention == "fp8" else "bf16"
        why = (
            "sparse-attention kernels (FlashMLA sparse, TRT-LLM DSA) read an FP8 KV cache"
            if sparse
            else "engine default"
        )
        note.append(f"precision.kv_cache: {kv} ({why})")
    att = p.attention
    if att == "unknown":
        att = "bf16"
        note.append("precision.attention: bf16 (TRT-LLM and SGLang keep BF16 attention math by default)")
    dense: str = p.dense
    moe: str = p.moe
    if dense == "unknown":
        dense = dense_ck
        note.append(f"precision.dense: {dense} (checkpoint format of {m.id})")
    if moe == "unknown":
        moe = moe_ck
        note.append(f"precision.moe: {moe} (checkpoint format of {m.id})")
    return PrecisionMix.model_validate({"attention": att, "kv_cache": kv, "dense": dense, "moe": moe})


def _mtp(s: Scenario, m: ModelSpec, note: list[str]) -> MTPConfig | None:
    if s.mtp is None:
        return None
    if s.mtp == "unknown":
        if s.engine != "trtllm" or not m.mtp_layers:
            note.append(f"mtp: off ({s.engine} does not enable speculative decoding by default)")
            return None
        acc = mtp_acceptance(3)
        note.append(f"mtp: engine default for trtllm min-latency (3 draft tokens, {acc:.2f} accepted)")
        return MTPConfig(draft_tokens=3, accepted_tokens=acc)
    given = s.mtp.accepted
    acc = mtp_acceptance(s.mtp.draft_tokens) if given is None else given
    if given is None:
        note.append(f"mtp.accepted_tokens: {acc:.2f} (DeepSeek-V3 report acceptance, see mtp_acceptance)")
    return MTPConfig(draft_tokens=s.mtp.draft_tokens, accepted_tokens=float(acc))


def _runtime(s: Scenario, hw: HardwareSpec, pool: PoolSpec, note: list[str]) -> RuntimeOptions:
    r = s.runtime
    wide_ep = pool.ep > 1 and pool.dp_attention > 1
    graphs = r.cuda_graphs
    if graphs == "unknown":
        graphs = not (s.engine == "sglang" and hw.arch == "sm_120")
        if not graphs:
            note.append(
                "runtime.cuda_graphs: off (seed 003: SGLang's sm_120 deployment ran without "
                "effective CUDA graphs until they were added by hand)"
            )
    overlap = r.comm_overlap
    if overlap == "unknown":
        overlap = 0.5 if wide_ep and s.engine in ("sglang", "trtllm") else 0.0
        if overlap:
            note.append(
                "runtime.comm_overlap: 0.5 (two-batch overlap; SGLang large-EP blog: TBO adds 27-35% "
                "to prefill throughput)"
            )
    redundant = r.redundant_experts
    if redundant == "unknown":
        redundant = 32 if wide_ep and pool.ep > 8 and s.engine == "sglang" else 0
        if redundant:
            note.append("runtime.redundant_experts: 32 (SGLang large-scale EP recipe, EPLB)")
    frac = r.mem_fraction if r.mem_fraction != "unknown" else MEM_FRACTION[s.engine]
    trt = s.engine == "trtllm"
    offload = r.offload
    if offload is None:  # only SGLang implements host offload with prefetch (seed 000)
        offload = None if s.engine == "sglang" else False
    return RuntimeOptions(
        cuda_graphs=graphs,
        comm_overlap=float(overlap),
        ep_imbalance=r.ep_imbalance,
        redundant_experts=int(redundant),
        mem_fraction=float(frac),
        offload=offload,
        kernel_overrides=dict(r.kernel_overrides),
        kv_from_free_memory=trt,
        **{
            k: v
            for k, v in (
                ("elementwise_launches_per_layer", r.elementwise_launches_per_layer),
                ("step_overhead_us", r.step_overhead_us),
                ("elementwise_bytes_per_token_layer", r.elementwise_bytes_per_token_layer),
            )
            if v is not None
        },
        pdl=trt,
    )


def resolve(s: Scenario, base_dir: Path | None = None) -> Resolved:
    """Fill unknowns with engine defaults and build one InstanceSpec per pool."""
    m = get_model(s.model, base_dir)
    hw = get_hardware(s.hardware)
    note: list[str] = []
    prec = _precision(s, m, note)
    mtp = _mtp(s, m, note)
    pools: dict[str, Pool] = {}
    every: list[Pool] = []
    for role, spec in ((r, p) for r in ("prefill", "decode", "aggregated") for p in s.deployment.groups(r)):
        try:
            par = Parallelism(
                gpus=spec.gpus_per_instance, tp=spec.tp, dp_attention=spec.dp_attention, ep=spec.ep, pp=spec.pp
            )
            inst = InstanceSpec(
                model=m,
                hardware=hw,
                parallel=par,
                precision=prec,
                runtime=_runtime(s, hw, spec, note),
                mtp=mtp if role != "prefill" else None,
            )
        except ValidationError as exc:
            raise ScenarioError(format_validation_error(exc, f"deployment.{role}")) from exc
        every.append(Pool(role, spec, inst))
        if role in pools:
            note.append(f"deployment.{role}: the estimator uses the first {role} pool; simulate runs them all")
        else:
            pools[role] = every[-1]
    w = s.workload
    isl = w.isl if w.isl != "unknown" else DEFAULT_ISL
    osl = w.osl if w.osl != "unknown" else DEFAULT_OSL
    if w.isl == "unknown" or w.osl == "unknown":
        note.append(f"workload: isl {isl}, osl {osl} where unknown (the 1k/1k benchmark default)")
    kv_len = float(w.kv_len) if isinstance(w.kv_len, int | float) else isl + osl / 2
    conc: float | None = None
    if isinstance(w.concurrency, int):
        phase_pool = pools.get("decode") if s.phase == "decode" else None
        phase_pool = phase_pool or pools.get("prefill" if s.phase == "prefill" else "aggregated")
        scope_gpus = phase_pool.spec.gpus if phase_pool else sum(p.spec.gpus for p in pools.values())
        scope_inst = phase_pool.spec.instances if phase_pool else 1
        conc = (
            float(w.concurrency) * {"per_gpu": scope_gpus, "per_instance": scope_inst, "total": 1}[w.concurrency_scope]
        )
    max_prefill = s.runtime.max_prefill_tokens
    if max_prefill == "unknown":
        max_prefill = PREFILL_TOKENS_PER_RANK
    return Resolved(
        s,
        m,
        hw,
        pools,
        int(isl),
        int(osl),
        kv_len,
        conc,
        w.request_rate,
        int(max_prefill),
        list(dict.fromkeys(note)),
        every,
    )

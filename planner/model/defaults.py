"""Resolution of a scenario into a `Deployment` with its traffic: what the scenario leaves
`unknown` comes from the checkpoint (precision), the engine profile (runtime options, MTP; see
`planner.engines`) or the 1k/1k benchmark default (lengths). Every default used is appended to
`Resolved.assumed` with its reason, so outputs can say what they assumed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import ValidationError

from planner.engines import fp8_kv_default, fp8_mla_decode_default, mtp_default_drafts
from planner.inputs.scenario import (
    PER_POOL_RUNTIME,
    Scenario,
    ScenarioError,
    SLOSpec,
    anchored,
    format_validation_error,
)
from planner.model.context import context_problem
from planner.model.deployment import ROLES, Deployment, Pool, check_hand_off, make_pool
from roofline.catalog import get_hardware, get_model
from roofline.catalog.schema import HardwareSpec, MLAAttention, ModelSpec
from roofline.deployment import MTPConfig, Parallelism
from roofline.precision import PrecisionMix
from simulator.config import SimConfig
from simulator.workload import in_flight_kv, longest_prompt

DEFAULT_ISL = DEFAULT_OSL = 1024  # the 1k/1k point SGLang, TRT-LLM and InferenceMAX publish first


MTP_DRAFTS = 3  # drafts the search tries when MTP is on (the engines' DeepSeek recipes), and explain's what-if


def mtp_acceptance(draft_tokens: int) -> float:
    """Mean accepted drafts per step: the first draft is accepted 85% of the time (DeepSeek-V3
    technical report, sec. 5.4.3: 85-90%); engines draft further tokens by reusing the one MTP
    module autoregressively, whose conditional acceptance we assume falls by 0.20 per extra
    draft (assumption; 3 drafts -> 1.65 accepted, 2.65 tokens per step)."""
    total, chain = 0.0, 1.0
    for i in range(draft_tokens):
        chain *= max(0.85 - 0.20 * i, 0.0)
        total += chain
    return round(total, 9)  # 1.651125, not the products' 1.6511249999999997 (written into scenarios)


@dataclass(slots=True)
class Resolved:
    """A scenario made concrete: the deployment, its traffic, and what was assumed."""

    deployment: Deployment
    isl: int
    osl: int
    kv_len: float
    concurrency: float | None  # total over the deployment (or over the phase's pool)
    request_rate: float | None
    assumed: list[str] = field(default_factory=list)
    phase: str = "end-to-end"
    slo: SLOSpec | None = None
    simulation: SimConfig | None = None
    name: str = "scenario"
    model_ref: str = ""  # how the scenario named the model: a catalog id or a config.json path

    @property
    def model(self) -> ModelSpec:
        return self.deployment.model

    @property
    def hardware(self) -> HardwareSpec:
        return self.deployment.hardware

    @property
    def gpus(self) -> int:
        return self.deployment.gpus

    def pool(self, *roles: str) -> Pool:
        """The first pool of the first role present (e.g. pool("decode", "aggregated"))."""
        for role in roles:
            p = self.deployment.first(role)
            if p is not None:
                return p
        raise ScenarioError(f"deployment: needs a {' or '.join(roles)} pool for this phase")

    def in_process(self) -> Resolved:
        """The same scenario driven in process (an offline benchmark, trtllm-bench, an MLPerf
        harness): the deployment without its HTTP serving path (`Deployment.without_serving_path`)."""
        return replace(self, deployment=self.deployment.without_serving_path())


def checkpoint_formats(m: ModelSpec) -> tuple[str, str]:
    """The (dense, experts) formats of the model's published checkpoint: what a deployment that states
    no precision runs, and the mix the plan's search always tries."""
    fmt = m.checkpoint_format
    dense = "fp8" if fmt.startswith("fp8") else "bf16"
    if fmt == "nvfp4 experts":  # NVFP4 experts, attention and shared experts left 16-bit (ModelOpt `ignore`:
        dense, moe = "bf16", "nvfp4"  # nvidia/Kimi-K2.6-NVFP4 lists every self_attn and shared_experts)
    elif fmt.startswith("nvfp4"):  # an NVFP4 (ModelOpt / compressed-tensors group-16) checkpoint
        dense, moe = "fp8", "nvfp4"
    elif "fp4" in fmt:  # MXFP4 experts (gpt-oss; DeepSeek-V4's FP4 experts)
        moe = "mxfp4"
    elif fmt == "w4a16":  # INT4 weights, 16-bit activations (Kimi K2.5's compressed-tensors experts)
        dense, moe = ("bf16", "w4a16") if m.moe is not None else ("w4a16", "w4a16")
    else:
        moe = dense
    return dense, moe


def carried_dense(m: ModelSpec, fmt: str) -> str:
    """The format of the dense layers (attention projections, dense FFNs, shared experts) in the catalog
    checkpoint of MoE model `m` whose routed experts are `fmt`: the model's own release carries its own
    (`checkpoint_formats`), a BF16 release BF16, and an FP8 release of a 16-bit
    model (block FP8 over every linear layer, e.g. Qwen/Qwen3-235B-A22B-FP8) or an NVIDIA ModelOpt NVFP4
    quantization FP8, as `checkpoint_formats` reads an NVFP4 checkpoint."""
    dense_ck, moe_ck = checkpoint_formats(m)
    if fmt == moe_ck:
        return dense_ck
    return "bf16" if fmt == "bf16" else "fp8"


def attention_default(engine: str, m: ModelSpec, hw: HardwareSpec, kv: str) -> tuple[str, str]:
    """The attention math an engine runs when it is not stated, and why: FP8 for a dense MLA model
    over an FP8 KV cache where the engine's MLA decode quantizes the query to FP8 (engine profile
    `fp8_mla_decode_with_fp8_kv`, per architecture; the MLA prefill stays BF16 in roofline.attention_ops),
    else BF16."""
    if not isinstance(m.attention, MLAAttention) or m.sparse_attention:
        return (
            "bf16",
            "not a dense MLA model: BF16 attention math unless its kernel path sets its own (roofline.kernels)",
        )
    if kv != "fp8":
        return "bf16", "BF16 attention math over a BF16 KV cache"
    fp8_mla, why = fp8_mla_decode_default(engine if engine != "unknown" else "other", hw.arch)
    if fp8_mla:
        return "fp8", f"on MLA decode: {why}"
    return "bf16", f"BF16 MLA math over the FP8 cache: {why}"


def fp8_cache_attention(engine: str, m: ModelSpec, hw: HardwareSpec) -> str:
    """The attention math the plan's search pairs with an FP8 KV cache (and `planner explain`'s FP8-cache
    lever). Not a choice an operator makes where the kernels decide it: a dense MLA model's is the
    engine's, and a sparse-attention model's kernels set their own math whatever the precision says
    (both `attention_default`, as a resolved scenario gets it). For a GQA model FP8 attention is a launch
    choice (an FP8 FMHA), so the search tries it; a resolved scenario with the attention unstated, and
    the unknowns search's FP8-cache trial, take `attention_default` there: what runs when nothing is chosen."""
    if isinstance(m.attention, MLAAttention) or m.sparse_attention:
        return attention_default(engine, m, hw, "fp8")[0]
    return "fp8"


def _precision(s: Scenario, m: ModelSpec, hw: HardwareSpec, note: list[str]) -> PrecisionMix:
    p = s.precision
    dense_ck, moe_ck = checkpoint_formats(m)
    sparse = m.sparse_attention
    dense: str = p.dense
    moe: str = p.moe
    if dense == "unknown":
        dense = dense_ck
        note.append(f"precision.dense: {dense} (checkpoint format of {m.id})")
    if moe == "unknown":
        moe = moe_ck
        note.append(f"precision.moe: {moe} (checkpoint format of {m.id})")
    kv = p.kv_cache
    if kv == "unknown":
        follows, source = fp8_kv_default(s.engine if s.engine != "unknown" else "other")
        if sparse:
            kv, why = "fp8", "sparse-attention kernels (FlashMLA sparse, TRT-LLM DSA) read an FP8 KV cache"
        elif p.attention == "fp8":
            kv, why = "fp8", "FP8 attention reads an FP8 KV cache"
        elif follows and ("nvfp4" in (dense, moe) or (dense == "fp8" and dense_ck != "fp8")):
            kv, why = "fp8", source  # an NVIDIA ModelOpt quantization of the model (NVFP4, or FP8 of a 16-bit model)
        elif follows and dense == "fp8":
            own = f"{m.id}'s own FP8 checkpoint, not a ModelOpt one: no kv_cache_quant_algo to follow"
            kv, why = "bf16", f"{own} ({source})"
        else:
            kv, why = "bf16", source
        note.append(f"precision.kv_cache: {kv} ({why})")
    att: str = p.attention
    if att == "unknown":
        att, why = attention_default(s.engine, m, hw, kv)
        note.append(f"precision.attention: {att} ({why})")
    return PrecisionMix.model_validate({"attention": att, "kv_cache": kv, "dense": dense, "moe": moe})


def _mtp(s: Scenario, m: ModelSpec, note: list[str]) -> MTPConfig | None:
    if s.mtp is None:
        return None
    if s.mtp == "unknown":
        if not m.mtp_layers:  # a model without MTP layers has nothing to assume
            return None
        drafts, source = mtp_default_drafts(s.engine if s.engine != "unknown" else "other")
        if not drafts:
            note.append(f"mtp: off ({source})")
            return None
        acc = mtp_acceptance(drafts)
        note.append(f"mtp: {drafts} draft tokens, {acc:.2f} accepted ({source})")
        return MTPConfig(draft_tokens=drafts, accepted_tokens=acc)
    given = s.mtp.accepted
    acc = mtp_acceptance(s.mtp.draft_tokens) if given is None else given
    if given is None:
        note.append(f"mtp.accepted_tokens: {acc:.2f} (DeepSeek-V3 report acceptance, see mtp_acceptance)")
    return MTPConfig(draft_tokens=s.mtp.draft_tokens, accepted_tokens=float(acc))


STATED_RUNTIME = (
    "cuda_graphs",
    "comm_overlap",
    "redundant_experts",
    "eplb",
    "scheduler",
    "chunked_prefill",
    "fused_mla_a_proj",
    "mem_fraction",
    "max_prefill_tokens",
    "max_running_per_rank",
    "adp_balance_timeout_iters",
    "adp_balance_batching_wait_iters",
    "ep_imbalance",
    "offload",
    "kernel_overrides",
    "elementwise_launches_per_layer",
    "elementwise_bytes_per_token_layer",
    "step_overhead_us",
    "host_us_per_request",
    "backend",
)


def stated_runtime(s: Scenario, role: str) -> dict[str, object]:
    """The scenario's known `runtime:` fields for a pool of `role` under RuntimeOptions names
    (unknown ones left out, so the engine profile decides them; PER_POOL_RUNTIME fields may differ
    per pool)."""
    out: dict[str, object] = {}
    for name in STATED_RUNTIME:
        v = s.runtime.for_pool(name, role) if name in PER_POOL_RUNTIME else getattr(s.runtime, name)
        if v == "unknown" or v is None or (name == "kernel_overrides" and not v):
            continue
        out["prefill_tokens_per_rank" if name == "max_prefill_tokens" else name] = v
    return out


def _engine_note(s: Scenario) -> list[str]:
    """What the scenario's engine is where it states none or `unknown` (said, as every other default is; trial,
    twenty-first session)."""
    if s.engine == "unknown":
        return ["engine: unknown; SGLang's defaults stand in, without a serving path (planner/engines/other.yaml)"]
    if "engine" not in s.model_fields_set:
        return [f"engine: {s.engine} (the default; a scenario's engine: sglang | trtllm | vllm | unknown)"]
    return []


def resolve(s: Scenario, base_dir: Path | None = None) -> Resolved:
    """Fill unknowns with engine defaults and build the deployment. The deployment's layout must be
    stated; `planner.search.unknowns.resolve_any` searches a layout left unknown."""
    if not s.deployment.known:
        raise ScenarioError("deployment: some pool fields are unknown; they are searched by `resolve_any`")
    m = get_model(s.model, base_dir)
    hw = get_hardware(s.hardware)
    w = s.workload
    isl = w.isl if w.isl != "unknown" else DEFAULT_ISL
    osl = w.osl if w.osl != "unknown" else DEFAULT_OSL
    if too_long := context_problem(m, int(isl), int(osl)):
        raise ScenarioError(f"workload.{too_long}")
    note = _engine_note(s)
    engine = s.engine if s.engine != "unknown" else "other"
    prec = _precision(s, m, hw, note)
    mtp = _mtp(s, m, note)
    sim = anchored(s.simulation, base_dir)
    longest = longest_prompt(sim, int(isl), int(osl))  # what an engine that takes prompts only whole must hold
    pools: list[Pool] = []
    for role, spec in ((r, p) for r in ROLES for p in s.deployment.groups(r)):
        try:
            fields = {k: v for k, v in spec.stated().items() if k not in ("instances", "gpus_per_instance")}
            par = Parallelism(gpus=int(spec.gpus_per_instance), **fields)
            stated = stated_runtime(s, role)
            pools.append(make_pool(engine, role, int(spec.instances), par, m, hw, prec, mtp, stated, note, longest))
        except ValidationError as exc:
            raise ScenarioError(format_validation_error(exc, f"deployment.{role}")) from exc
        if len(s.deployment.groups(role)) > 1 and spec is s.deployment.groups(role)[1]:
            note.append(f"deployment.{role}: the estimator uses the first {role} pool; simulate runs them all")
    dep = Deployment(engine, tuple(pools))
    check_hand_off(dep)
    unknown = [name for name in ("isl", "osl") if getattr(w, name) == "unknown"]
    if unknown:  # name only the lengths that were unknown: 'isl 2000, osl 1024 where unknown' read as both
        taken = ", ".join(f"{name} {isl if name == 'isl' else osl}" for name in unknown)
        note.append(f"workload: {taken} (unknown: the 1k/1k benchmark default of {DEFAULT_ISL} tokens)")
    # the mean context in flight: stated, else from the simulation's length draws (isl + osl/2 when fixed)
    kv_len = float(w.kv_len) if isinstance(w.kv_len, int | float) else in_flight_kv(sim, isl, osl)
    if not isinstance(w.kv_len, int | float) and kv_len != isl + osl / 2:
        note.append(
            f"workload.kv_len: {kv_len:,.0f} (the mean context in flight over the simulation's lengths, "
            f"sum L(I + L/2) / sum L; fixed lengths would give {isl + osl / 2:,.0f})"
        )
    elif abs(kv_len - (drawn := in_flight_kv(sim, isl, osl))) > 0.01 * drawn:  # stated, and not what a run holds
        note.append(
            f"workload.kv_len: {kv_len:,.0f} as stated prices the estimate's steps; a simulation runs the "
            f"lengths, whose contexts in flight average {drawn:,.0f}, so its TPOT can differ"
        )
    conc: float | None = None
    if isinstance(w.concurrency, int):
        phase_pool = dep.first("decode") if s.phase == "decode" else None
        phase_pool = phase_pool or dep.first("prefill" if s.phase == "prefill" else "aggregated")
        scope_gpus = phase_pool.gpus if phase_pool else dep.gpus
        scope_inst = phase_pool.instances if phase_pool else 1
        scale = {"per_gpu": scope_gpus, "per_instance": scope_inst, "total": 1}[w.concurrency_scope]
        conc = float(w.concurrency) * scale
    assumed = list(dict.fromkeys(note))
    traffic = (int(isl), int(osl), kv_len, conc, w.request_rate)
    ref = s.model
    if base_dir is not None and (base_dir / ref).is_file():
        ref = str((base_dir / ref).resolve())
    return Resolved(dep, *traffic, assumed, s.phase, s.slo, sim, s.name, ref)

"""Scenario files: what a user (or an anchor) describes — model, GPUs, deployment, precision,
workload, SLO — validated strictly at the edge.

Any optional field may be `unknown`; `planner.model.defaults.resolve` fills it from the documented
engine default and records what it assumed. Every number is finite and within a physical range,
and the cross-field rules that need no catalog lookup are checked here (tp x dp_attention x pp =
gpus_per_instance, ep divides a stage, accepted <= draft tokens, isl + osl within the longest
context, concurrency or rate, the prefill budget). `load_scenario` turns file, YAML and pydantic
errors into one-line `ScenarioError` messages that name the field (see `planner.inputs.edge`). Rules
that need the model (ep <= experts, pp <= layers, KV fit) are checked by `resolve`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from planner.inputs.deployment_spec import LAYOUT_FIELDS, MAX_GPUS, DeploymentSpec, PoolSpec, Unknown
from planner.inputs.edge import ScenarioError, format_validation_error, load_yaml, parse_as
from simulator.config import MAX_CONCURRENCY, MAX_RATE, MAX_TOKENS, MIN_RATE, InputModel, SimConfig

__all__ = [
    "LAYOUT_FIELDS",
    "MAX_GPUS",
    "DeploymentSpec",
    "PoolSpec",
    "ScenarioError",
    "format_validation_error",
    "load_yaml",
    "parse_as",
]

Engine = Literal["sglang", "trtllm", "vllm", "other"]
Phase = Literal["prefill", "decode", "end-to-end"]
WeightFmt = Literal["bf16", "fp8", "nvfp4", "mxfp4", "w4a16"]
KVFmt = Literal["bf16", "fp8"]
Role = Literal["prefill", "decode", "aggregated"]
Budget = Annotated[int, Field(ge=16, le=MAX_TOKENS)]
RunningLimit = Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)]
# runtime fields an engine sizes per worker, so a disaggregated launch may set them per pool: one value
# for every pool, or a mapping from pool role to value (a role left out takes the engine profile's)
PER_POOL_RUNTIME = ("max_prefill_tokens", "max_running_per_rank")

MAX_PREFILL_CHUNKS = 128  # isl / max_prefill_tokens: the estimator prices every chunk, 80 times over


class PrecisionSpec(InputModel):
    attention: KVFmt | Unknown = "unknown"
    kv_cache: KVFmt | Unknown = "unknown"
    dense: WeightFmt | Unknown = "unknown"
    moe: WeightFmt | Unknown = "unknown"


class MTPSpec(InputModel):
    """Speculative decoding with the model's MTP module. Sources state acceptance two ways:
    `accepted_tokens` is the mean number of accepted DRAFT tokens per step (a step emits
    1 + accepted_tokens); `acceptance_length` is the mean tokens emitted per step, the verified
    token included (acceptance_length = 1 + accepted_tokens). Give at most one of them."""

    draft_tokens: int = Field(gt=0, le=8)
    accepted_tokens: Annotated[float, Field(ge=0, le=8)] | Unknown = "unknown"
    acceptance_length: float | None = Field(default=None, ge=1, le=9)

    @model_validator(mode="after")
    def _check(self) -> MTPSpec:
        if self.acceptance_length is not None:
            if self.accepted_tokens != "unknown":
                raise ValueError(
                    "give accepted_tokens (drafts accepted per step) or acceptance_length "
                    "(tokens per step, verified token included), not both"
                )
            if self.acceptance_length > self.draft_tokens + 1:
                raise ValueError(
                    f"acceptance_length {self.acceptance_length:g} exceeds draft_tokens + 1 = {self.draft_tokens + 1}"
                )
        elif self.accepted_tokens != "unknown" and self.accepted_tokens > self.draft_tokens:
            raise ValueError(
                f"accepted_tokens {self.accepted_tokens:g} exceeds draft_tokens {self.draft_tokens} "
                "(accepted_tokens counts accepted drafts; a published 'acceptance length' "
                "goes in acceptance_length)"
            )
        return self

    @property
    def accepted(self) -> float | None:
        """Accepted drafts per step, whichever convention was given; None when unknown."""
        if self.acceptance_length is not None:
            return self.acceptance_length - 1.0
        return None if self.accepted_tokens == "unknown" else float(self.accepted_tokens)


class WorkloadSpec(InputModel):
    isl: Annotated[int, Field(le=MAX_TOKENS)] | Unknown = "unknown"
    osl: Annotated[int, Field(le=MAX_TOKENS)] | Unknown = "unknown"
    concurrency: Annotated[int, Field(le=MAX_CONCURRENCY)] | Unknown | None = None
    concurrency_scope: Literal["per_gpu", "per_instance", "total"] = "total"
    request_rate: float | None = Field(default=None, le=MAX_RATE)
    kv_len: Annotated[float, Field(le=MAX_TOKENS)] | Unknown | None = None

    @field_validator("request_rate", mode="before")
    @classmethod
    def _unknown_rate(cls, v: object) -> object:
        """`request_rate: unknown` is a rate not stated, as left out (it was refused: 'expected a valid number')."""
        return None if v == "unknown" else v

    @model_validator(mode="after")
    def _check(self) -> WorkloadSpec:
        for name in ("isl", "osl", "concurrency", "kv_len", "request_rate"):
            v = getattr(self, name)
            if isinstance(v, int | float) and not isinstance(v, bool) and v <= 0:
                raise ValueError(f"workload.{name} must be positive (got {v})")
        if self.request_rate is not None and 0 < self.request_rate < MIN_RATE:
            raise ValueError(
                f"workload.request_rate must be at least {MIN_RATE:g} requests/s (got {self.request_rate:g})"
            )
        if isinstance(self.concurrency, int) and self.request_rate is not None:
            raise ValueError("give concurrency or request_rate, not both")
        lengths = [v for v in (self.isl, self.osl) if isinstance(v, int)]
        if sum(lengths) > MAX_TOKENS:
            raise ValueError(
                f"isl + osl = {sum(lengths):,} exceeds {MAX_TOKENS:,} tokens, the longest context any model offers"
            )
        return self


class SLOSpec(InputModel):
    ttft_ms: float | None = Field(default=None, gt=0)
    tpot_ms: float | None = Field(default=None, gt=0)
    e2e_ms: float | None = Field(default=None, gt=0)
    # the percentile a scenario's targets bind in `planner simulate`'s verdict (unset: p90, the planner's
    # default); a plan row's exported scenario states its question's. Anchors leave it out: their SLO-bound
    # metrics read means, and MLPerf LoadGen's its p99 (planner.search.validate)
    statistic: Literal["p90", "p99"] | None = None


class RuntimeSpec(InputModel):
    cuda_graphs: bool | Unknown = "unknown"
    comm_overlap: Annotated[float, Field(ge=0, le=1)] | Unknown = "unknown"  # share of comm hidden
    ep_imbalance: float | None = Field(default=None, ge=1, le=1000)  # max-rank / mean expert load
    redundant_experts: Annotated[int, Field(ge=0, le=4096)] | Unknown = "unknown"
    eplb: bool | Unknown = "unknown"  # expert-parallel load balancing; unknown: the engine's default
    # how a step batches prefill with decodes: "mixed" (vLLM, TRT-LLM; SGLang --enable-mixed-chunk) or
    # "prefill_first" (SGLang's default); unknown: the engine profile's `scheduler`
    scheduler: Literal["prefill_first", "mixed"] | Unknown = "unknown"
    # whether a prompt may be split over steps (TRT-LLM enable_chunked_prefill, off by default; SGLang
    # --chunked-prefill-size -1 turns it off); unknown: the engine profile's `chunked_prefill`
    chunked_prefill: bool | Unknown = "unknown"
    # whether MLA's q_a and kv_a projections run as one GEMM (every serving engine fuses them;
    # runtime.engine does not); unknown: the engine profile's `fused_mla_a_proj`
    fused_mla_a_proj: bool | Unknown = "unknown"
    mem_fraction: Annotated[float, Field(gt=0, le=1)] | Unknown = "unknown"
    offload: bool | None = None
    # prefill tokens per step and DP rank; below 16 no engine runs, and a prompt may take at most
    # MAX_PREFILL_CHUNKS steps (checked against isl in Scenario)
    # (per pool: PER_POOL_RUNTIME)
    max_prefill_tokens: Budget | dict[Role, Budget] | Unknown = "unknown"
    # requests one attention-DP rank runs at most (TRT-LLM max_batch_size, per rank with attention DP;
    # vLLM max_num_seqs; SGLang max_running_requests / dp); per pool like max_prefill_tokens (a prefill
    # pool's limit is the prompts one rank prefills in a step); unknown: the engine profile's default
    max_running_per_rank: RunningLimit | dict[Role, RunningLimit] | Unknown = "unknown"

    kernel_overrides: dict[str, str] = Field(default_factory=dict)
    elementwise_launches_per_layer: float | None = Field(default=None, ge=0, le=10_000)
    elementwise_bytes_per_token_layer: float | None = Field(default=None, ge=0, le=1e9)
    step_overhead_us: float | None = Field(default=None, ge=0, le=1e7)
    host_us_per_request: float | None = Field(default=None, ge=0, le=1e6)  # overlapped host time
    # TRT-LLM only: attention-DP balance (attention_dp_config enable_balance, timeout_iters, batching_wait_iters;
    # simulator/adp_balance.py); stating either turns it on (the other from TRT-LLM's defaults); unknown: off
    adp_balance_timeout_iters: Annotated[int, Field(ge=0, le=100_000)] | Unknown = "unknown"
    adp_balance_batching_wait_iters: Annotated[int, Field(ge=0, le=100_000)] | Unknown = "unknown"
    # TRT-LLM only: which runtime executes the steps (PyTorch executor, or a TensorRT engine built
    # with trtllm-build and run by the C++ executor); unknown: the engine version's default
    backend: Literal["pytorch", "tensorrt"] | Unknown = "unknown"

    def for_pool(self, name: str, role: str) -> object:
        """A PER_POOL_RUNTIME field's value for a pool of `role` ("unknown" where not stated for it)."""
        v = getattr(self, name)
        return v.get(role, "unknown") if isinstance(v, dict) else v


UNKNOWN_SECTIONS = ("deployment", "precision", "workload", "runtime")  # sections whose every field may be unknown


class Scenario(InputModel):
    """A deployment under a workload. `deployment: unknown` (or absent) and any unknown field are
    searched by `planner.search.unknowns.resolve_any`; `planner.model.defaults.resolve` needs them stated."""

    @model_validator(mode="before")
    @classmethod
    def _unknown_sections(cls, data: Any) -> Any:
        """A section given as a whole as `unknown` is that section with every field unknown."""
        if isinstance(data, dict):
            return {**data, **{k: {} for k in UNKNOWN_SECTIONS if data.get(k) == "unknown"}}
        return data

    # free text, but printed in rich tables: no markup brackets, no control characters
    name: str = Field(default="scenario", max_length=200)
    model: str
    hardware: str
    engine: Engine | Unknown = "sglang"
    phase: Phase = "end-to-end"
    deployment: DeploymentSpec = DeploymentSpec()
    precision: PrecisionSpec = PrecisionSpec()
    # left out means unknown (the anchor format's rule, and the README's): the engine's default, said under
    # "assumed"; `mtp: null` states it off (left out read as off, silently, sixteenth trial)
    mtp: MTPSpec | Unknown | None = "unknown"
    workload: WorkloadSpec = WorkloadSpec()
    slo: SLOSpec | None = None
    runtime: RuntimeSpec = RuntimeSpec()
    simulation: SimConfig | None = None

    @field_validator("name")
    @classmethod
    def _plain_name(cls, v: str) -> str:
        if re.search(r"[\[\]\x00-\x1f\x7f]", v):
            raise ValueError("free text without square brackets or control characters")
        return v

    @field_validator("model", "hardware")
    @classmethod
    def _named(cls, v: str, info: ValidationInfo) -> str:
        """The two fields nothing is searched over: every other may be unknown (ninth trial: 'unknown
        hardware 'unknown'' named no field)."""
        if v.strip().lower() == "unknown":
            what = (
                "a catalog id or a HF config.json path (planner catalog models)"
                if info.field_name == "model"
                else "a catalog id (planner catalog hardware); `planner compare` sets every system side by side"
            )
            said = "cannot be unknown: the planner searches deployments of a stated model on stated hardware"
            raise ValueError(f"{said}; allowed: {what}")
        return v

    @model_validator(mode="after")
    def _check(self) -> Scenario:
        d = self.deployment
        has = d.present
        need = {
            "prefill": has("prefill") or has("aggregated"),
            "decode": has("decode") or has("aggregated"),
            "end-to-end": has("aggregated") or (has("prefill") and has("decode")),
        }[self.phase]
        unstated = not any(has(r) for r in ("prefill", "decode", "aggregated"))  # searched as a whole
        if not need and not unstated:
            pools = {
                "prefill": "a prefill or aggregated pool",
                "decode": "a decode or aggregated pool",
                "end-to-end": "an aggregated pool, or prefill and decode pools",
            }[self.phase]
            raise ValueError(f"phase: {self.phase} needs {pools} in deployment")
        adp = (self.runtime.adp_balance_timeout_iters, self.runtime.adp_balance_batching_wait_iters)
        if any(v != "unknown" for v in adp) and self.engine != "trtllm":
            raise ValueError(f"runtime.adp_balance_*: TensorRT-LLM's attention-DP balance; engine is {self.engine}")
        if self.runtime.backend != "unknown" and self.engine != "trtllm":
            raise ValueError(
                f"runtime.backend: {self.runtime.backend} is a TensorRT-LLM runtime; engine is {self.engine}"
            )
        w, budgets = self.workload, self.runtime.max_prefill_tokens
        for budget in budgets.values() if isinstance(budgets, dict) else [budgets]:
            if isinstance(w.isl, int) and isinstance(budget, int) and w.isl > budget * MAX_PREFILL_CHUNKS:
                raise ValueError(
                    f"runtime.max_prefill_tokens: {budget} splits isl {w.isl} into more than "
                    f"{MAX_PREFILL_CHUNKS} chunks; use at least {-(-w.isl // MAX_PREFILL_CHUNKS)}"
                )
        if isinstance(w.concurrency, int) and w.concurrency_scope != "total":
            counts = [p.instances for r in ("prefill", "decode", "aggregated") for p in d.groups(r)]
            per_gpu = d.total_gpus or 1  # unknown GPU count: checked once the layout is searched
            per = per_gpu if w.concurrency_scope == "per_gpu" else max(sum(c for c in counts if isinstance(c, int)), 1)
            if w.concurrency * per > MAX_CONCURRENCY:
                raise ValueError(
                    f"workload.concurrency: {w.concurrency} {w.concurrency_scope} is {w.concurrency * per:,} "
                    f"requests in flight; at most {MAX_CONCURRENCY:,}"
                )
        return self


def parse_scenario(data: Any, where: str = "scenario") -> Scenario:
    return parse_as(Scenario, data, where, "scenario")


def load_scenario(path: str | Path) -> Scenario:
    return parse_scenario(load_yaml(path), where=str(path))


def anchored(sim: SimConfig | None, base_dir: Path | None) -> SimConfig | None:
    """`sim` with its relative trace paths (`simulation.trace`, empirical lengths) made absolute
    against the scenario's folder, so that every later run finds them wherever it is started."""
    if sim is None or base_dir is None:
        return sim

    def fix(path: str) -> str:
        return path if Path(path).is_absolute() else str((base_dir / path).resolve())

    update: dict[str, Any] = {}
    for name in ("input_len", "output_len"):
        d = getattr(sim, name)
        if d is not None and d.trace is not None:
            update[name] = d.model_copy(update={"trace": fix(d.trace)})
    if sim.trace is not None:
        update["trace"] = sim.trace.model_copy(update={"path": fix(sim.trace.path)})
    return sim.model_copy(update=update) if update else sim

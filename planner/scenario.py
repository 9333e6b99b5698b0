"""Scenario files: what a user (or an anchor) describes — model, GPUs, deployment, precision,
workload, SLO — validated strictly at the edge.

Any optional field may be `unknown`; `planner.defaults.resolve` fills it from the documented
engine default and records what it assumed. `load_scenario` turns YAML and pydantic errors
into `ScenarioError` messages that name the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator

from roofline.catalog.schema import StrictModel
from roofline.errors import PlannerError
from simulator.config import SimConfig

Unknown = Literal["unknown"]
Engine = Literal["sglang", "trtllm", "vllm", "other"]
Phase = Literal["prefill", "decode", "end-to-end"]
WeightFmt = Literal["bf16", "fp8", "nvfp4", "mxfp4", "w4a16"]
KVFmt = Literal["bf16", "fp8"]

M = TypeVar("M", bound=BaseModel)
PosInt = Annotated[int, Field(gt=0)]


class ScenarioError(PlannerError):
    """A scenario or anchor file that does not validate."""


LAYOUT_FIELDS = ("instances", "gpus_per_instance", "tp", "dp_attention", "ep", "pp")


class PoolSpec(StrictModel):
    """One pool's layout; any field may be `unknown` (the planner then searches it)."""

    instances: PosInt | Unknown = 1
    gpus_per_instance: PosInt | Unknown = "unknown"
    tp: PosInt | Unknown = 1
    dp_attention: PosInt | Unknown = 1
    ep: PosInt | Unknown = 1
    pp: PosInt | Unknown = 1

    @property
    def known(self) -> bool:
        return all(isinstance(getattr(self, f), int) for f in LAYOUT_FIELDS)

    def stated(self) -> dict[str, int]:
        return {f: v for f in LAYOUT_FIELDS if isinstance(v := getattr(self, f), int)}

    @property
    def gpus(self) -> int:
        assert isinstance(self.instances, int)
        assert isinstance(self.gpus_per_instance, int)
        return self.instances * self.gpus_per_instance


class DeploymentSpec(StrictModel):
    """Pools by role; a role may list several pools of different instance sizes, or be `unknown`
    (present, layout not stated). No pools at all means the whole deployment is unknown; `gpus`
    states the total GPU count when the layout is not stated."""

    prefill: PoolSpec | list[PoolSpec] | Unknown | None = None
    decode: PoolSpec | list[PoolSpec] | Unknown | None = None
    aggregated: PoolSpec | list[PoolSpec] | Unknown | None = None
    gpus: int | None = Field(default=None, gt=0)

    def groups(self, role: str) -> list[PoolSpec]:
        v = getattr(self, role)
        if v is None or v == "unknown":
            return []
        return v if isinstance(v, list) else [v]

    def present(self, role: str) -> bool:
        return getattr(self, role) is not None

    @property
    def known(self) -> bool:
        roles = [r for r in ("prefill", "decode", "aggregated") if self.present(r)]
        return bool(roles) and all(getattr(self, r) != "unknown" for r in roles) and all(
            p.known for r in roles for p in self.groups(r)
        )

    @model_validator(mode="after")
    def _check(self) -> DeploymentSpec:
        if self.present("aggregated") and (self.present("prefill") or self.present("decode")):
            raise ValueError("deployment: give either `aggregated` or `prefill`/`decode` pools, not both")
        return self

    @property
    def total_gpus(self) -> int | None:
        """GPUs of the deployment if stated (every pool known, or `gpus`)."""
        if self.known:
            return sum(p.gpus for role in ("prefill", "decode", "aggregated") for p in self.groups(role))
        return self.gpus


class PrecisionSpec(StrictModel):
    attention: KVFmt | Unknown = "unknown"
    kv_cache: KVFmt | Unknown = "unknown"
    dense: WeightFmt | Unknown = "unknown"
    moe: WeightFmt | Unknown = "unknown"


class MTPSpec(StrictModel):
    """Speculative decoding with the model's MTP module. Sources state acceptance two ways:
    `accepted_tokens` is the mean number of accepted DRAFT tokens per step (a step emits
    1 + accepted_tokens); `acceptance_length` is the mean tokens emitted per step, the verified
    token included (acceptance_length = 1 + accepted_tokens). Give at most one of them."""

    draft_tokens: int = Field(gt=0, le=8)
    accepted_tokens: Annotated[float, Field(ge=0)] | Unknown = "unknown"
    acceptance_length: float | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _check(self) -> MTPSpec:
        if self.acceptance_length is not None:
            if self.accepted_tokens != "unknown":
                raise ValueError("give accepted_tokens (drafts accepted per step) or acceptance_length "
                                 "(tokens per step, verified token included), not both")
            if self.acceptance_length > self.draft_tokens + 1:
                raise ValueError(f"acceptance_length {self.acceptance_length:g} exceeds draft_tokens + 1 = "
                                 f"{self.draft_tokens + 1}")
        elif self.accepted_tokens != "unknown" and self.accepted_tokens > self.draft_tokens:
            raise ValueError(f"accepted_tokens {self.accepted_tokens:g} exceeds draft_tokens {self.draft_tokens} "
                             "(accepted_tokens counts accepted drafts; a published 'acceptance length' "
                             "goes in acceptance_length)")
        return self

    @property
    def accepted(self) -> float | None:
        """Accepted drafts per step, whichever convention was given; None when unknown."""
        if self.acceptance_length is not None:
            return self.acceptance_length - 1.0
        return None if self.accepted_tokens == "unknown" else float(self.accepted_tokens)


class WorkloadSpec(StrictModel):
    isl: int | Unknown = Field(default="unknown")
    osl: int | Unknown = Field(default="unknown")
    concurrency: int | Unknown | None = None
    concurrency_scope: Literal["per_gpu", "per_instance", "total"] = "total"
    request_rate: float | None = None
    kv_len: float | Unknown | None = None

    @model_validator(mode="after")
    def _check(self) -> WorkloadSpec:
        for name in ("isl", "osl", "concurrency", "kv_len", "request_rate"):
            v = getattr(self, name)
            if isinstance(v, int | float) and not isinstance(v, bool) and v <= 0:
                raise ValueError(f"workload.{name} must be positive (got {v})")
        if isinstance(self.concurrency, int) and self.request_rate is not None:
            raise ValueError("workload: give concurrency or request_rate, not both")
        return self


class SLOSpec(StrictModel):
    ttft_ms: float | None = Field(default=None, gt=0)
    tpot_ms: float | None = Field(default=None, gt=0)
    e2e_ms: float | None = Field(default=None, gt=0)


class RuntimeSpec(StrictModel):
    cuda_graphs: bool | Unknown = "unknown"
    comm_overlap: float | Unknown = Field(default="unknown")
    ep_imbalance: float | None = Field(default=None, ge=1)
    redundant_experts: int | Unknown = "unknown"
    mem_fraction: float | Unknown = "unknown"
    offload: bool | None = None
    max_prefill_tokens: int | Unknown = "unknown"
    kernel_overrides: dict[str, str] = Field(default_factory=dict)
    elementwise_launches_per_layer: float | None = Field(default=None, ge=0)
    elementwise_bytes_per_token_layer: float | None = Field(default=None, ge=0)
    step_overhead_us: float | None = Field(default=None, ge=0)


class Scenario(StrictModel):
    """A deployment under a workload. `deployment: unknown` (or absent) and any unknown field are
    searched by `planner.unknowns.resolve_any`; `planner.defaults.resolve` needs them stated."""

    @model_validator(mode="before")
    @classmethod
    def _unknown_deployment(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("deployment") == "unknown":
            return {**data, "deployment": {}}
        return data

    name: str = "scenario"
    model: str
    hardware: str
    engine: Engine | Unknown = "sglang"
    phase: Phase = "end-to-end"
    deployment: DeploymentSpec = DeploymentSpec()
    precision: PrecisionSpec = PrecisionSpec()
    mtp: MTPSpec | Unknown | None = None
    workload: WorkloadSpec = WorkloadSpec()
    slo: SLOSpec | None = None
    runtime: RuntimeSpec = RuntimeSpec()
    simulation: SimConfig | None = None


def format_validation_error(exc: ValidationError, where: str) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"] if not str(x).startswith("function-after"))
        parts.append(f"{where}: {loc or '(top level)'}: {err['msg']}")
    return "; ".join(parts)


def parse_as(model: type[M], data: Any, where: str, what: str) -> M:
    """Validate a mapping as `model`; bad input is a ScenarioError naming each field."""
    if not isinstance(data, dict):
        raise ScenarioError(f"{where}: expected a mapping of {what} fields")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(format_validation_error(exc, where)) from exc


def parse_scenario(data: Any, where: str = "scenario") -> Scenario:
    return parse_as(Scenario, data, where, "scenario")


def load_yaml(path: str | Path) -> Any:
    p = Path(path)
    try:
        return yaml.safe_load(p.read_text())
    except FileNotFoundError as exc:
        raise ScenarioError(f"file not found: {p}") from exc
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{p}: not valid YAML: {exc}") from exc


def load_scenario(path: str | Path) -> Scenario:
    return parse_scenario(load_yaml(path), where=str(path))

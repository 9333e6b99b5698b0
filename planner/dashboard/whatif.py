"""What-if variants of a recommended deployment, and what they cost or buy.

A `WhatIf` is a change set applied to the recommendation's scenario mapping (the same mapping
`planner simulate` and the downloads take). Its figures come from the steady-state estimator
(`planner.model.estimator`), so they are compared with the recommendation's own estimate, never with
its simulated percentiles. Capacity at the SLO is the largest request rate whose estimate meets every
target (bisection), so a change that costs throughput shows as lost capacity even though the
request rate is held. This module does not plan, simulate or draw.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

from planner.engines import wide_ep_replicas
from planner.inputs.scenario import parse_scenario
from planner.model.defaults import Resolved, resolve
from planner.model.estimator import estimate, estimate_deployment
from planner.model.explain import speed_of_light
from planner.model.mem_fraction import above_highest
from planner.model.metrics import Metrics
from roofline.catalog import get_hardware, get_model
from roofline.errors import PlannerError
from roofline.kernels import tensor_core_alternatives
from roofline.memory import MemoryPlan
from roofline.step import CATEGORIES, StepCost

OFFLOAD_OP = "weights.offload_prefetch"  # the step op that streams offloaded weights from host
STEP_CATEGORIES = (*CATEGORIES, "weight offload")


@dataclass(frozen=True, slots=True)
class WhatIf:
    """One change set applied to a deployment; None leaves a field as it was."""

    kv_cache: str | None = None  # bf16 | fp8 (the attention math follows as the engine runs it)
    moe: str | None = None
    ep: int | None = None  # decode-pool EP scale (DP attention over the same ranks)
    batch: int | None = None  # sequences in flight per decode instance
    mtp_accepted: float | None = None  # of 3 draft tokens; 0 turns MTP off
    comm_overlap: float | None = None
    mem_fraction: float | None = None
    tensor_core_kernels: bool = False  # swap CUDA-core fallbacks (sm_120) for tensor-core kernels

    @property
    def active(self) -> bool:
        return any(getattr(self, f) not in (None, False) for f in self.__slots__)

    def changes(self) -> dict[str, Any]:
        """The fields set, by name (what a download records)."""
        return {f: getattr(self, f) for f in self.__slots__ if getattr(self, f) not in (None, False)}


def _main_pool(dep: dict[str, Any]) -> str:
    return "decode" if "decode" in dep else "aggregated"


def apply_what_if(scn: dict[str, Any], w: WhatIf) -> dict[str, Any]:
    """The scenario with the changes applied. A new EP scale keeps the main pool's GPU count
    where it can (fewer, wider instances); `gpu_budget_problem` reports what still exceeds the
    question's budget."""
    s = copy.deepcopy(scn)
    prec, rt = s.setdefault("precision", {}), s.setdefault("runtime", {}) or {}
    s["runtime"] = rt
    if w.kv_cache:
        prec["kv_cache"] = w.kv_cache
        prec["attention"] = "unknown"  # the engine's math over that cache (planner.model.defaults.attention_default)
    if w.moe:
        prec["moe"] = w.moe
    dep = s["deployment"]
    pool = _main_pool(dep)
    if w.ep:
        old = dep[pool]
        gpus = old.get("instances", 1) * old["gpus_per_instance"]
        instances = max(1, gpus // w.ep)
        dep[pool] = {
            **old,
            "instances": instances,
            "gpus_per_instance": w.ep,
            "tp": 1,
            "dp_attention": w.ep,
            "ep": w.ep,
            "pp": 1,
        }
    if w.batch:
        s["workload"] = {k: v for k, v in s["workload"].items() if k != "request_rate"}
        s["workload"]["concurrency"] = w.batch * dep[pool].get("instances", 1)
    if w.mtp_accepted is not None:
        s["mtp"] = {"draft_tokens": 3, "accepted_tokens": w.mtp_accepted} if w.mtp_accepted > 0 else None
    if w.comm_overlap is not None:
        rt["comm_overlap"] = w.comm_overlap
    if w.mem_fraction is not None:
        rt["mem_fraction"] = w.mem_fraction
    if w.tensor_core_kernels:
        rt["kernel_overrides"] = tensor_core_overrides(s)
    return s


def ep_scales(model: str, hardware: str, engine: str, budget: int) -> list[int]:
    """The EP scales a what-if offers for this model: the attention-DP + EP layouts the plan's search
    holds within `budget` GPUs (`planner.search.space.layouts`: EP that splits the experts, with the
    engine's wide-EP replicas, evenly). A fixed list offered EP 48 and 72 to Qwen3-235B's 128 experts and
    EP above 8 to Mixtral's 8, which the scenario then refused with advice the dashboard cannot follow."""
    from planner.search.space import layouts  # noqa: PLC0415  (the search imports the model layer)

    m, hw = get_model(model), get_hardware(hardware)
    replicas = wide_ep_replicas(engine, hw)
    return sorted({p.ep for p in layouts(m, hw, budget, "decode", replicas) if p.dp_attention > 1 and p.pp == 1})


def gpus_of(scn: dict[str, Any]) -> int:
    total = 0
    for spec in scn["deployment"].values():
        for p in spec if isinstance(spec, list) else [spec]:
            total += p.get("instances", 1) * p["gpus_per_instance"]
    return total


def gpu_budget_problem(scn: dict[str, Any], budget: int) -> str | None:
    n = gpus_of(scn)
    if n <= budget:
        return None
    return f"the what-if needs {n} GPUs, over the question's budget of {budget}: it is not a valid answer"


def tensor_core_overrides(scn: dict[str, Any]) -> dict[str, str]:
    """Kernel overrides that replace each CUDA-core fallback the deployment runs (empty if none)."""
    res = resolve(
        parse_scenario(
            {**scn, "runtime": {k: v for k, v in (scn.get("runtime") or {}).items() if k != "kernel_overrides"}}
        )
    )
    return tensor_core_alternatives(res.deployment.pools[0].instance)


@dataclass(slots=True)
class Breakdown:
    """A deployment's estimate with its steps split by category (ms) and memory per GPU."""

    estimate: Metrics
    decode_ms: dict[str, float]
    prefill_ms: dict[str, float]
    decode_limit_ms: float
    prefill_limit_ms: float
    memory: dict[str, MemoryPlan]
    tokens_per_step: float
    capacity_rps: float | None = None  # largest request rate whose estimate meets the SLO
    notes: list[str] = field(default_factory=list)

    @property
    def metrics(self) -> dict[str, float]:
        """The estimate's figures by label, each saying it is an estimate."""
        e = self.estimate
        return {
            "TTFT ms (estimate, mean)": e.ttft_s * 1e3,
            "TPOT ms (estimate, mean)": e.tpot_s * 1e3,
            "tok/s/GPU (estimate)": e.output_tok_s_per_gpu,
            "GPUs": float(e.gpus),
        }


def _cats(step: StepCost | None) -> dict[str, float]:
    out = dict.fromkeys(STEP_CATEGORIES, 0.0)
    for op in step.ops if step else ():
        cat = "weight offload" if op.name == OFFLOAD_OP else op.category
        out[cat] += op.time_s * 1e3
    return out


def breakdown(scn: dict[str, Any]) -> Breakdown:
    """Estimate a deployment at the scenario's traffic; split its steps by category."""
    res = resolve(parse_scenario(scn))
    e = estimate(res)
    dec = res.deployment.first("decode") or res.deployment.first("aggregated")
    pre = res.deployment.first("prefill") or res.deployment.first("aggregated")
    dl = speed_of_light(e.decode_step, dec.instance) * 1e3 if e.decode_step and dec else 0.0
    pl = speed_of_light(e.prefill_step, pre.instance) * 1e3 if e.prefill_step and pre else 0.0
    tps = dec.instance.mtp.tokens_per_step if dec and dec.instance.mtp else 1.0
    b = Breakdown(e, _cats(e.decode_step), _cats(e.prefill_step), dl, pl, dict(e.memory), tps)
    b.capacity_rps = capacity_at_slo(res)
    b.notes = above_highest(res)  # a what-if fraction the engine cannot run is priced, and said
    return b


def _meets(m: Metrics, slo: dict[str, float]) -> bool:
    got = {"ttft_ms": m.ttft_s * 1e3, "tpot_ms": m.tpot_s * 1e3, "e2e_ms": m.e2e_s * 1e3}
    return not m.saturated and all(got[k] <= v for k, v in slo.items())


def capacity_at_slo(res: Resolved, iterations: int = 30) -> float | None:
    """The largest request rate whose estimate (means) meets every SLO target, by bisection on
    the rate; 0.0 when even a trickle misses, None when the scenario states no SLO."""
    slo = res.slo.model_dump(exclude_none=True, exclude={"statistic"}) if res.slo else {}
    if not slo:
        return None
    dep = res.deployment

    def ok(rate: float) -> bool:
        try:
            return _meets(estimate_deployment(dep, res.isl, res.osl, res.kv_len, rate=rate), slo)
        except PlannerError:
            return False

    saturated = estimate_deployment(dep, res.isl, res.osl, res.kv_len)
    hi = saturated.output_tok_s / res.osl  # what the deployment serves at all
    lo = hi * 1e-4
    if not ok(lo):
        return 0.0
    if ok(hi):
        return hi
    for _ in range(iterations):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
        if hi / lo < 1.002:
            break
    return lo

"""Run the simulator on a resolved scenario: pools from the scenario's deployment, traffic from
its workload and `simulation:` section. The estimator seeds the closed-loop ramp (clients start
spread over one estimated E2E, as independent users would)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from planner.defaults import Resolved
from planner.estimator import estimate
from roofline.errors import PlannerError
from simulator import PoolDef, SimConfig, SimResult, build_workload, simulate, summarize


def pool_defs(res: Resolved) -> list[PoolDef]:
    """Every pool of the deployment; a prefill step holds up to the token budget per DP rank."""
    return [
        PoolDef(p.role, p.spec.instances, p.instance, res.max_prefill_tokens * p.instance.parallel.dp_attention)
        for p in (res.all_pools or list(res.pools.values()))
    ]


def run_simulation(
    res: Resolved, cfg: SimConfig | None = None, base: Path | None = None, progress: Any = None
) -> tuple[SimResult, dict[str, Any]]:
    cfg = cfg or res.scenario.simulation or SimConfig()
    if res.concurrency is None and res.request_rate is None and cfg.arrival is None and cfg.trace is None:
        raise PlannerError("simulate: the workload needs concurrency or request_rate (or simulation.arrival)")
    if cfg.closed_loop_ramp_s is None and res.request_rate is None:
        try:
            ramp = estimate(res).e2e_s
        except PlannerError:
            ramp = 0.0
        cfg = cfg.model_copy(update={"closed_loop_ramp_s": ramp})
    try:
        wl = build_workload(cfg, res.isl, res.osl, res.concurrency, res.request_rate, base)
    except ValueError as exc:
        raise PlannerError(f"simulation: {exc}") from exc
    same_domain = res.gpus <= res.hardware.scaleup.domain_gpus
    result = simulate(pool_defs(res), wl, cfg, same_domain, progress)
    slo = res.scenario.slo.model_dump() if res.scenario.slo else None
    return result, summarize(result, slo)

"""A resolved deployment and its traffic written back as a scenario mapping (YAML-ready): what a plan row's
download, `--scenarios`, a compare point's JSON and the dashboard export, and what `planner simulate` / `estimate`
read back. `resolve(parse_scenario(to_scenario(r)))` gives the same deployment (`planner.model.defaults.resolve`);
runtime options the engine profile decides are not written out. It resolves nothing itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from planner.engines import runtime_options
from planner.inputs.scenario import PER_POOL_RUNTIME, anchored
from planner.model.defaults import STATED_RUNTIME, Resolved
from planner.model.deployment import Pool
from simulator.config import SimConfig


def to_scenario(res: Resolved) -> dict[str, Any]:
    """The resolved deployment and traffic as a scenario mapping (YAML-ready): what a download,
    a launch recipe or `planner simulate` takes. `resolve(parse_scenario(to_scenario(r)))` gives
    the same deployment: runtime options the engine profile decides are not written out."""
    dep = res.deployment
    pools: dict[str, Any] = {}
    for p in dep.pools:
        pools.setdefault(p.role, []).append(p.layout())
    main = dep.first("decode") or dep.first("aggregated") or dep.pools[0]
    inst = main.instance
    mtp = inst.mtp
    workload: dict[str, Any] = {"isl": res.isl, "osl": res.osl}
    if res.concurrency is not None:
        workload["concurrency"] = round(res.concurrency) if res.concurrency >= 1 else 1
    elif res.request_rate is not None:
        workload["request_rate"] = res.request_rate
    slo = res.slo.model_dump(exclude_none=True) if res.slo else None
    return {
        "name": res.name,
        "model": res.model_ref or dep.model.id,
        "hardware": dep.hardware.id,
        "engine": dep.engine,
        "phase": res.phase,
        "deployment": {role: specs[0] if len(specs) == 1 else specs for role, specs in pools.items()},
        "precision": inst.precision.model_dump(exclude={"lm_head"}),
        "mtp": None if mtp is None else {"draft_tokens": mtp.draft_tokens, "accepted_tokens": mtp.accepted_tokens},
        "workload": workload,
        "slo": slo or None,
        "runtime": _runtime_stated(dep.engine, main, dep.pools),
        **({"simulation": _simulation_stated(res.simulation)} if res.simulation is not None else {}),
    }


def _simulation_stated(cfg: SimConfig) -> dict[str, Any]:
    """A `simulation:` section as the scenario writes it: the fields set, trace paths made absolute
    (`anchored` against the working directory, where the run read them: the scenario may be read
    from another folder)."""
    stated = anchored(cfg, Path.cwd())
    assert stated is not None
    return stated.model_dump(mode="json", exclude_unset=True)


def _runtime_stated(engine: str, pool: Pool, pools: tuple[Pool, ...] = ()) -> dict[str, Any]:
    """Runtime options of a pool that differ from its engine profile, under scenario names; a
    PER_POOL_RUNTIME field that differs from the profile in some pool is written per pool role."""
    out: dict[str, Any] = {"mem_fraction": pool.instance.runtime.mem_fraction}
    for name in STATED_RUNTIME:
        per_pool = {p.role: v for p in pools or (pool,) if (v := _differs(engine, p, name)) is not None}
        if name in PER_POOL_RUNTIME and per_pool and len(pools) > 1:
            out[name] = per_pool
        elif (v := _differs(engine, pool, name)) is not None:
            out[name] = v
    return out


def _differs(engine: str, pool: Pool, name: str) -> Any:
    """A pool's runtime option `name` (scenario name) where it differs from its engine profile, else None."""
    default = runtime_options(engine, pool.role, pool.parallel, pool.instance.hardware)
    field_name = "prefill_tokens_per_rank" if name == "max_prefill_tokens" else name
    v = getattr(pool.instance.runtime, field_name)
    return v if v != getattr(default, field_name) and v is not None else None

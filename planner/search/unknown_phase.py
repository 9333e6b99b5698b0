"""Resolve a prefill- or decode-phase scenario whose layout is `unknown`: the layouts of that role the
search space holds (`planner.search.space.stated_layouts`), constrained by what is stated, each estimated
on its own, the best for the quantity asked; and the small readings of a scenario that the search of
`planner.search.unknowns` shares (its fields, model reference, stated layout fields, default GPU count).
It does not search end-to-end deployments (`planner.search.unknowns.search_deployment`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planner.engines import wide_ep_replicas
from planner.inputs.scenario import Scenario, ScenarioError
from planner.model.defaults import Resolved, resolve
from planner.model.deployment import ROLES, Deployment
from planner.search.anchor_units import LATENCY_METRICS as LATENCY
from planner.search.space import stated_layouts
from roofline.catalog import get_hardware, get_model
from roofline.catalog.schema import HardwareSpec
from roofline.errors import PlannerError

LAYOUT_RULE = "a pool's tp x dp_attention x pp must equal its gpus_per_instance, and its ep divide it"


def stated_text(cons: dict[str, Any]) -> str:
    """What a deployment states, as words ('aggregated: instances 1, gpus_per_instance 3, tp 2'), not a
    Python dict (sixteenth trial)."""

    def one(v: Any) -> str:
        if isinstance(v, dict):
            return ", ".join(f"{k} {x}" for k, x in v.items()) or "nothing"
        if isinstance(v, list):
            return "; ".join(one(x) for x in v)
        return str(v)

    return "; ".join(f"{r}: {one(v)}" for r, v in cons.items()) or "nothing"


def scenario_data(s: Scenario) -> dict[str, Any]:
    """The scenario fields of `s` (an anchor carries more); the `simulation` section as written, so
    what it leaves unset stays unset (a benchmark client fills it: `planner.inputs.benchmarks`)."""
    sim = s.simulation.model_dump(exclude_unset=True) if s.simulation is not None else None
    return {**s.model_dump(include=set(Scenario.model_fields)), "simulation": sim}


def default_gpus(hw: HardwareSpec) -> int:
    """The shape engines commonly run when the GPU count is not stated: the NVLink domain of an
    NVL72 rack, else one node."""
    return hw.scaleup.domain_gpus if hw.scaleup.domain_gpus > hw.gpus_per_node * 2 else hw.gpus_per_node


def model_ref(s: Scenario, base_dir: Path | None) -> str:
    if base_dir is not None and (base_dir / s.model).is_file():
        return str((base_dir / s.model).resolve())
    return s.model


def constraints(s: Scenario) -> dict[str, dict[str, int]]:
    dep = s.deployment
    return {r: dep.groups(r)[0].stated() for r in ROLES if dep.groups(r)}


def search_phase(s: Scenario, metric: str, base_dir: Path | None) -> tuple[Deployment, list[str], None]:
    """A prefill or decode anchor: the layouts of that role the search space holds (`planner.search.space`),
    constrained by what is stated, each estimated on its own; the best for `metric`."""
    from planner.model.estimator import estimate  # noqa: PLC0415  (the estimator imports resolution helpers)

    role = s.phase
    hw, m = get_hardware(s.hardware), get_model(model_ref(s, base_dir))
    # an aggregated instance also prefills and decodes: its stated fields bind the phase's layout
    stated = role if s.deployment.groups(role) else "aggregated"
    cons = constraints(s).get(stated, {})
    spec = s.deployment.groups(stated)[0] if s.deployment.groups(stated) else None
    budget = int(spec.gpus_per_instance) if spec and isinstance(spec.gpus_per_instance, int) else default_gpus(hw)
    best: tuple[float, Resolved] | None = None
    engine = s.engine if s.engine != "unknown" else "other"  # as resolve prices an unknown engine
    replicas = wide_ep_replicas(engine, hw)
    for par in stated_layouts(m, hw, budget, role, cons, replicas):
        pool = {
            "instances": cons.get("instances", 1),
            "gpus_per_instance": par.gpus,
            "tp": par.tp,
            "dp_attention": par.dp_attention,
            "ep": par.ep,
            "pp": par.pp,
        }
        try:
            res = resolve(Scenario.model_validate({**scenario_data(s), "deployment": {role: pool}}), base_dir)
            e = estimate(res)
        except (PlannerError, ValidationError):
            continue
        value = (
            -e.tpot_s if metric in LATENCY else (e.input_tok_s_per_gpu if role == "prefill" else e.output_tok_s_per_gpu)
        )
        if best is None or value > best[0]:
            best = (value, res)
    if best is None:
        raise ScenarioError(
            f"deployment.{role}: no {role} layout in the search space matches what is stated "
            f"({stated_text({role: cons})}); {LAYOUT_RULE}"
        )
    dep = best[1].deployment
    goal = "lowest latency" if metric in LATENCY else "highest throughput per GPU"
    return dep, [f"deployment.{role}: searched ({goal}): {dep.describe()}"], None

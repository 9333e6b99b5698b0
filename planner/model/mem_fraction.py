"""The memory fraction as an unknown the search fills. When a scenario or anchor leaves
`runtime.mem_fraction` unknown and the engine's default fraction leaves no room (the weights, or
the KV the estimate needs, do not fit), the fraction is raised to the highest the engine can
physically run: the GPU's capacity minus what the engine keeps outside its static pool at the
least (`MemReserve.outside_mb`, from the engine's own memory code, see `planner/engines/sglang.yaml`),
with activations from the one activation model (`roofline.memory.activation_bytes`). The choice
is listed under `assumed` ("runtime.mem_fraction: searched ...").

It never changes a stated fraction (one above the highest is noted), and does not search where
the engine profile has no sourced rule (vLLM, TRT-LLM) or for pools with attention DP (their
recipes state the fraction): there the memory error stands and says so. A deployment that does
not fit at the highest fraction is an error saying it is physically impossible and why.
"""

from __future__ import annotations

import math
from pathlib import Path

from planner.engines import profile
from planner.inputs.scenario import Scenario
from planner.model.defaults import Resolved, resolve
from planner.model.deployment import Pool
from planner.model.estimator import estimate
from planner.model.simulate import pool_defs
from roofline.errors import InsufficientMemoryError, PlannerError
from roofline.memory import activation_bytes, weight_bytes

MIB = 2**20
DEFAULT_STEP_TOKENS = 8192  # the step `roofline.memory.plan_memory` checks activations at


def highest_fraction(engine: str, pool: Pool) -> tuple[float, dict[str, float]] | None:
    """(the highest memory fraction the engine can run for this pool, rounded down to 0.001 as
    SGLang rounds its own; what stays outside the static pool, MiB by part), or None where the
    engine profile has no sourced rule for it."""
    inst = pool.instance
    par = inst.parallel
    rule = profile(engine).for_arch(inst.hardware.arch).mem_reserve
    if rule is None or par.dp_attention > 1:
        return None
    mem_mib = inst.hardware.mem_bytes / MIB
    step = max(inst.runtime.prefill_tokens_per_rank * par.dp_attention, DEFAULT_STEP_TOKENS)
    parts = rule.value.outside_mb(mem_mib, pool.role, par, activation_bytes(inst, step) / MIB)
    return math.floor((mem_mib - sum(parts.values())) / mem_mib * 1000) / 1000, parts


def _fits(res: Resolved) -> InsufficientMemoryError | None:
    """The memory error the estimate or the simulator's memory plan raises, if any (other
    problems are reported where the figures are computed, as without this search)."""
    try:
        estimate(res)
        for d in pool_defs(res):  # the KV each simulated instance must hold (simulator.engine)
            d.memory_plan()
    except InsufficientMemoryError as exc:
        return exc
    except PlannerError:
        return None
    return None


def _why(frac: float, pool: Pool, parts: dict[str, float]) -> str:
    hw = pool.instance.hardware
    outside = ", ".join(f"{name} {mb * MIB / 1e9:.1f} GB" for name, mb in parts.items() if mb)
    return f"the highest {frac:.3f} of {hw.memory_gb:g} GB ({pool.role} pool; outside the static pool: {outside})"


def above_highest(res: Resolved) -> list[str]:
    """The note a stated fraction above what the engine can physically run carries (priced as stated: a
    0.99 fraction read 0.8 GB of reserve where SGLang keeps 5.7 GB outside its pool, unsaid: trial)."""
    out = []
    for pool in res.deployment.pools:
        h = highest_fraction(res.deployment.engine, pool)
        stated = pool.instance.runtime.mem_fraction
        if h is not None and stated > h[0]:
            out.append(f"runtime.mem_fraction: {stated:g} is above {_why(h[0], pool, h[1])}; priced as stated")
    return out


def resolve_fitting(s: Scenario, base_dir: Path | None = None) -> Resolved:
    """`resolve`, with the memory fraction searched when it is unknown and the default does not fit."""
    res = resolve(s, base_dir)
    if s.runtime.mem_fraction != "unknown":
        res.assumed.extend(above_highest(res))
        return res
    first = _fits(res)
    if first is None:
        return res
    engine, pools = res.deployment.engine, res.deployment.pools
    for pool in pools:
        weights = sum(weight_bytes(pool.instance))
        if weights > pool.instance.hardware.mem_bytes:
            raise InsufficientMemoryError(
                f"physically impossible: the {pool.role} pool's weights, {weights / 1e9:.1f} GB per GPU, exceed "
                f"the GPU's {pool.instance.hardware.memory_gb:g} GB at any memory fraction: {first}"
            ) from first
    found = [(pool, highest_fraction(engine, pool)) for pool in pools]
    if any(h is None for _, h in found):
        raise InsufficientMemoryError(
            f"{first}; {engine} has no sourced rule for the highest memory fraction it can run "
            "(planner/engines), so its default stands: state runtime.mem_fraction"
        ) from first
    pool, (frac, parts) = min(((p, h) for p, h in found if h is not None), key=lambda ph: ph[1][0])
    default = ", ".join(f"{p.role} {p.instance.runtime.mem_fraction:g}" for p in pools)
    why = _why(frac, pool, parts)
    if frac <= min(p.instance.runtime.mem_fraction for p in pools):
        raise InsufficientMemoryError(
            f"physically impossible: {engine} can run a memory fraction of at most {why}, "
            f"not above its default ({default}): {first}"
        ) from first
    runtime = s.runtime.model_copy(update={"mem_fraction": frac})
    searched = resolve(s.model_copy(update={"runtime": runtime}), base_dir)
    again = _fits(searched)
    if again is not None:
        raise InsufficientMemoryError(f"physically impossible even at {why}: {again}") from again
    note = f"runtime.mem_fraction: searched: {frac:.3f} (the {engine} default ({default}) does not fit; {why})"
    searched.assumed = [*[n for n in res.assumed if not n.startswith("runtime.mem_fraction")], note]
    return searched

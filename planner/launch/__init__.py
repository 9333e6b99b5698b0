"""Launch recipes for a recommendation: for SGLang, vLLM and TensorRT-LLM the commands that start
every pool (per node where an instance spans nodes), the disaggregation front door each engine
has (SGLang's PD router, TRT-LLM's disaggregated proxy), and for disaggregated plans a Dynamo
deployment resource.

Flags are data (planner/engines/<engine>.yaml `launch:`), each checked against the flag list of
a pinned engine version in planner/engines/flags/; planner/launch/check.py parses every printed
command with those lists. Numbers come from the deployment: layout, precision, memory fraction,
MTP drafts, token budgets and the decode batch per instance it admits (split per rank where the
engine's limit is per rank): the pool's own limit, which the simulation ran (also for a plan with no
traffic stated, whose Poisson check ran uncapped). A pool whose priced memory plan holds weights in host
memory gets the engine's prefetch offloader, or, on an engine that cannot offload, a line saying so in
place of its commands; `requirements` lists what a launch needs beyond its commands. Nothing here is
measured or estimated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.inputs.question import Question
from planner.launch import dynamo, sglang, trtllm, vllm
from planner.launch.common import Inst, Weights, cannot_offload, inst, offload_note, weights
from planner.model.steps import decode_capacity
from roofline.catalog.schema import MLAAttention

if TYPE_CHECKING:
    from planner.model.deployment import Deployment
    from planner.search.plan import Recommendation

ENGINES = ("sglang", "vllm", "trtllm")


def launch_commands(q: Question, r: Recommendation) -> dict[str, str]:
    """Engine name -> the shell text that launches the recommendation (and "dynamo" -> the
    Dynamo deployment for disaggregated plans)."""
    dep = r.deployment
    mla = isinstance(dep.model.attention, MLAAttention)
    batch = _running(q, r)
    pools = [(inst(p, batch, q.isl), weights(q, p)) for p in dep.pools]
    insts = [i for i, _ in pools]
    order = sorted(ENGINES, key=lambda e: e != q.engine)  # the engine the plan priced first
    out = {e: _planned(q, e) + (cannot_offload(e, insts) or _engine(e, pools, mla)) for e in order}
    pre, dec = dep.first("prefill"), dep.first("decode")
    if dep.mode == "disaggregated" and pre is not None and dec is not None:
        engine = q.engine if q.engine in ENGINES else "sglang"
        ip, wp = inst(pre, batch, q.isl), weights(q, pre)
        idc, wd = inst(dec, batch, q.isl), weights(q, dec)
        out["dynamo"] = cannot_offload(engine, [ip, idc]) or dynamo.deployment(
            engine, f"{dep.model.id}-disagg", ip, idc, wp, wd, mla
        )
    return out


UNAVAILABLE = "(none in the catalog)"  # ends a requirement for weights no catalog checkpoint holds


def requirements(q: Question, dep: Deployment) -> list[str]:
    """What launching `dep` needs beyond the printed commands, one short phrase each: weights held in
    host memory by a pool that offloads (as priced: planner.model.steps.step_memory) and a checkpoint
    the catalog lacks for the format the plan runs (the launch's CHECKPOINT placeholder)."""
    out = []
    for p in dep.pools:
        i = inst(p, 0, q.isl)
        if i.offload_groups is not None:
            out.append(f"{p.role} weights {i.offload_gb:.0f} GB/GPU on host (prefetch offload)")
    ws = [weights(q, p) for p in dep.pools]
    holes = {w.need or w.fmt for w in ws if w.missing and not w.own}
    out += [f"weights: {need} {UNAVAILABLE}" for need in sorted(holes)]
    if any(w.own for w in ws if w.missing):  # the config.json's own release: only its repo id is unknown
        out.append("weights: the config's own checkpoint (--checkpoint REPO_ID)")
    return out


def _running(q: Question, r: Recommendation) -> int:
    """The decode batch per instance the launch admits: what the simulation ran, the pool's own limit
    (the engine's running limit, else what its KV pool holds), not the sweep's batch, which only sized
    the instance count. With no traffic stated the check is Poisson at the operating point's rate,
    uncapped, so a launch capped at the operating batch would be a deployment nobody simulated (at
    that rate it would queue without bound)."""
    pool = r.deployment.first("decode") or r.deployment.first("aggregated")
    return decode_capacity(pool, q.in_flight_kv()) if pool is not None else r.point.batch


def _planned(q: Question, engine: str) -> str:
    if q.engine == engine:
        return ""
    return (
        f"# priced for {q.engine}: the same layout, batch, memory fraction and token budget on {engine}"
        " (its own defaults may differ)\n"
    )


def _engine(engine: str, pools: list[tuple[Inst, Weights]], mla: bool) -> str:
    parts = []
    for i, w in pools:
        if i.offload_groups is not None:
            parts.append(offload_note(i, engine).rstrip("\n"))
        if engine == "sglang":
            parts.append(sglang.pool_commands(i, w))
        elif engine == "vllm":
            parts.append(vllm.pool_commands(i, w, mla))
        else:
            parts.append(trtllm.pool_commands(i, w))
    pre = next((i for i, _ in pools if i.role == "prefill"), None)
    dec = next((i for i, _ in pools if i.role == "decode"), None)
    if pre is not None and dec is not None:
        if engine == "sglang":
            parts.append(sglang.router(pre, dec))
        elif engine == "trtllm":
            parts.append(trtllm.disagg_proxy(pre, dec))
        else:
            parts.append(vllm.proxy_note())
    return "\n\n".join(parts)

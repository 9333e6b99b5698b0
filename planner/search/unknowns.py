"""Resolve a scenario or anchor whose deployment is partly or wholly `unknown`, by searching.

What is stated constrains the planner's own candidate space (`planner.search.space.candidates`, scored
by `planner.search.score.score`, the search `planner plan` runs): the serving mode (aggregated pools or
prefill/decode pools), each stated layout field (instances, GPUs per instance, tp, dp_attention,
ep, pp), the precision and MTP as resolved, the GPU count (stated pools, or `deployment.gpus`;
else the shape the engine commonly runs: one node, or the NVL72 domain). Among the deployments
left, it picks what a tuned deployment would run for the quantity asked:
- a throughput metric: the highest throughput per GPU (meeting the `slo` when one is given);
- a latency metric: the lowest latency at the stated traffic (concurrency 1 when none is stated).
Prefill- and decode-phase anchors choose the layout of that role by the same rule on the phase's
own estimate. The chosen layout is written into the scenario, which is then resolved as usual;
`assumed` lists what was searched and chosen. A scenario whose deployment is fully stated is
resolved directly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planner.inputs.question import SLO, Question
from planner.inputs.scenario import LAYOUT_FIELDS, Scenario, ScenarioError
from planner.model.aggregated import cohort_batches
from planner.model.defaults import Resolved, attention_default, resolve
from planner.model.deployment import ROLES, Deployment
from planner.model.estimator import estimate_deployment, max_batch, point
from planner.model.mem_fraction import resolve_fitting
from planner.search.anchor_units import LATENCY_METRICS as LATENCY
from planner.search.score import Point, batch_grid, score, slack
from planner.search.space import Candidate, candidates, deployment, matches, precisions
from planner.search.unknown_phase import (
    LAYOUT_RULE,
    constraints,
    default_gpus,
    model_ref,
    scenario_data,
    search_phase,
    stated_text,
)
from roofline.catalog import get_hardware, get_model
from roofline.errors import PlannerError
from simulator.workload import longest_prompt


def _fits(c: Candidate, cons: dict[str, dict[str, int]]) -> bool:
    main = "aggregated" if c.mode == "aggregated" else "decode"
    if main in cons and not matches(c.decode, cons[main]):
        return False
    return not ("prefill" in cons and c.prefill is not None and not matches(c.prefill, cons["prefill"]))


def _counts_match(p: Point, cons: dict[str, dict[str, int]]) -> bool:
    return all(
        pool.instances == cons[pool.role]["instances"]
        for pool in p.deployment.pools
        if "instances" in cons.get(pool.role, {})
    )


def _question(s: Scenario, facts: dict[str, Any], metric: str, base_dir: Path | None) -> Question:
    dep = s.deployment
    hw = get_hardware(s.hardware)
    if s.phase != "end-to-end":
        modes = ["disaggregated"]
    elif dep.present("aggregated"):
        modes = ["aggregated"]
    elif dep.present("prefill") or dep.present("decode"):
        modes = ["disaggregated"]
    else:
        modes = ["aggregated", "disaggregated"]
    groups = [p for r in ROLES for p in dep.groups(r)]
    counted = [p for p in groups if isinstance(p.instances, int) and isinstance(p.gpus_per_instance, int)]
    # a pool stated `unknown` beside stated ones has GPUs of its own still to find
    unknown_pool = any(getattr(dep, r) == "unknown" for r in ROLES if dep.present(r))
    whole = groups and len(counted) == len(groups) and not unknown_pool
    exact = dep.gpus or (sum(p.gpus for p in counted) if whole else None)
    partial = sum(p.gpus for p in counted)
    w = s.workload
    conc = w.concurrency if isinstance(w.concurrency, int) else None
    if conc is not None and w.concurrency_scope == "per_gpu":
        conc *= exact or default_gpus(hw)
    rate = w.request_rate  # a latency metric with no traffic is read as one request by planner.search.validate
    slo = s.slo
    return Question(
        model=model_ref(s, base_dir),
        hardware=s.hardware,
        engine=facts["engine"],
        gpus=exact,
        max_gpus=None if exact else (partial + default_gpus(hw) if unknown_pool else max(partial, default_gpus(hw))),
        isl=facts["isl"],
        osl=facts["osl"],
        kv_len=facts["kv_len"],
        max_isl=facts["max_isl"],
        rate=rate,
        concurrency=conc,
        slo=SLO(ttft_p90_ms=slo.ttft_ms, tpot_p90_ms=slo.tpot_ms, e2e_p90_ms=slo.e2e_ms) if slo else SLO(),
        modes=modes,  # type: ignore[arg-type]
        mtp=[facts["mtp"]],
        kv_mem_fractions=[facts["mem_fraction"]],  # None unless stated: each layout's own engine default
        verify_top=0,
    )


def _probe(s: Scenario, base_dir: Path | None) -> tuple[Resolved, dict[str, Any]]:
    """Resolve precision, MTP, lengths and engine options on a stand-in layout of one GPU per pool:
    the search keeps them fixed (the stand-in is never priced, so it need not fit in memory)."""
    one = {"instances": 1, "gpus_per_instance": 1, "tp": 1, "dp_attention": 1, "ep": 1, "pp": 1}
    roles = [r for r in ROLES if s.deployment.present(r)] or ["aggregated"]
    if s.phase != "end-to-end" and s.phase not in roles:
        roles = ["prefill", "decode"]
    data = scenario_data(s)
    data.update(model=model_ref(s, base_dir), deployment={r: one for r in roles})
    res = resolve(Scenario.model_validate(data), base_dir)
    pool = res.deployment.pools[-1]
    return res, {
        "engine": res.deployment.engine,
        "isl": res.isl,
        "osl": res.osl,
        "kv_len": res.kv_len,
        "max_isl": longest_prompt(res.simulation, res.isl, res.osl),
        "mtp": pool.instance.mtp is not None,
        # a stated fraction holds for every layout searched; else each layout gets its engine's own default
        # (SGLang's depends on TP size and attention DP), as resolving the chosen layout gives it
        "mem_fraction": s.runtime.mem_fraction if isinstance(s.runtime.mem_fraction, float) else None,
        "precision": pool.instance.precision,
        "cohorts": cohort_batches(res.simulation),
    }


def _objective(metric: str, p: Point) -> float:
    m = p.metrics
    if metric in ("ttft_ms",):
        return -m.ttft_s
    if metric in ("tpot_ms", "output_tok_s_per_user"):
        return -m.tpot_s
    if metric == "e2e_ms":
        return -m.e2e_s
    return m.output_tok_s_per_gpu


MAX_GPUS = 288  # widest budget searched when the GPU count is not stated (four NVL72 racks)


def _some(n: int) -> list[int]:
    """Instance counts 1..n, about 25% apart (an unstated count is searched on this grid)."""
    out, k = [], 1
    while k <= n:
        out.append(k)
        k = max(k + 1, round(k * 1.25))
    return out


def _instance_pairs(q: Question, c: Candidate, cons: dict[str, dict[str, int]]) -> list[tuple[int, int]] | None:
    """(decode or aggregated instances, prefill instances) to price: the stated counts, an unstated one
    searched over what the GPU budget leaves, or every split of a stated GPU count; None: none stated."""
    main = "aggregated" if c.mode == "aggregated" else "decode"
    n_d = cons.get(main, {}).get("instances")
    n_p = cons.get("prefill", {}).get("instances") if c.prefill else 0
    g_d, g_p = c.decode.gpus, c.prefill.gpus if c.prefill else 0
    if n_d is None and not n_p:
        if q.gpus is None:
            return None
        if not c.prefill:
            return [(q.gpus // g_d, 0)] if q.gpus % g_d == 0 else []
        return [(d, (q.gpus - d * g_d) // g_p) for d in range(1, q.gpus // g_d) if (q.gpus - d * g_d) % g_p == 0]
    if n_d is None:
        assert n_p is not None
        return [(d, n_p) for d in _some((q.budget - n_p * g_p) // g_d)]
    if n_p is None:
        return [(n_d, p) for p in _some((q.budget - n_d * g_d) // max(g_p, 1))]
    return [(n_d, n_p)]


def _fixed_points(q: Question, c: Candidate, cons: dict[str, dict[str, int]]) -> list[Point] | None:
    """The candidate at its stated instance counts, or at every split of a stated GPU count (None if
    neither is stated): an unstated count is searched over what the GPU count leaves. A stated GPU
    count is the deployment's, whatever the traffic: a rate beyond what it serves overloads it (MLPerf's
    4x RTX PRO 6000 at its submitted rate), where sizing for the traffic found no deployment of that
    many GPUs. Priced like `score`: the question's traffic, else the decode batch swept in powers of
    two up to the KV capacity and just below it (`batch_grid`), each under Poisson arrivals."""
    pairs = _instance_pairs(q, c, cons)
    if pairs is None:
        return None
    kv_len = q.in_flight_kv()
    out: list[Point] = []
    for d, p in pairs:
        dep = deployment(q, c, d, p)
        if dep.gpus > q.budget or (q.gpus is not None and dep.gpus != q.gpus):
            continue
        try:
            if q.rate is None and q.concurrency is None:
                cap = max_batch(dep, q.isl, q.osl)
                ms = [point(dep, q.isl, q.osl, kv_len, b, poisson=True) for b in batch_grid(cap)]
                ms = [m for m in ms if not m.saturated]
            else:
                ms = [estimate_deployment(dep, q.isl, q.osl, kv_len, q.concurrency, q.rate)]
        except (PlannerError, ValidationError, ZeroDivisionError):
            continue
        for m in ms:
            pt = Point(max(1, round(m.decode_batch)), dep, m, "-", slack=slack(q, m))
            pt.meets = all(v >= 1 for v in pt.slack.values())
            out.append(pt)
    return out


def _saturated(q: Question, p: Point, cohorts: bool) -> Point | None:
    """The point's deployment as a saturated run prices it (`estimate_deployment` with no traffic:
    every pool as full as the KV pool and the running limit allow, the prefill pool at whatever load
    that gives), the estimate a throughput question with no traffic reports for the deployment it
    chooses. Not always exactly that figure: like the sweep, the search prices each layout with the
    engine's default limits, where the chosen layout is then resolved with the scenario's stated runtime
    (e.g. a stated running limit); a trtllm-bench run of a stated size is reported by its simulation.
    The sweep's points size a disaggregated deployment's prefill pool to run at
    `PREFILL_UTILISATION` and price each swept batch, which is the plan's operating point, not a
    saturated run's: ranked by them, a 72-GPU GB300 long-context search chose a layout whose saturated
    figure was 15% below another candidate's.
    A layout the saturated run cannot price (its full prefill batch does not fit beside the weights, say)
    is dropped (None), as the plan prunes a candidate it cannot price: reported, it would fail the same way."""
    try:
        m = estimate_deployment(p.deployment, q.isl, q.osl, q.in_flight_kv(), None, None, cohorts)
    except (PlannerError, ValidationError, ZeroDivisionError):
        return None
    return Point(max(1, round(m.decode_batch)), p.deployment, m, m.limit or "-", meets=True)


def _best_at(
    q: Question, cons: dict[str, dict[str, int]], prec: Any, metric: str, cohorts: bool = True
) -> Point | None:
    """The best deployment at one precision mix among the candidates that match what is stated. A
    throughput metric with no traffic and no slo re-prices every distinct deployment the sweep sized as a
    saturated run (`_saturated`) and picks the best of those figures. The sweep's order is a poor guide to
    them (on a 72-GPU NVL72 search the best saturated layout ranked 29th to 467th of 1,200-2,300 by the
    sweep), so none is skipped: such a search takes 3-15 s on one core where the sweep alone takes 1."""
    m, hw = get_model(q.model), get_hardware(q.hardware)
    cands, _ = candidates(q, m, hw, [prec], cons)
    saturated = q.rate is None and q.concurrency is None and not q.slo.targets() and metric not in LATENCY
    swept: list[Point] = []
    for c in sorted((c for c in cands if _fits(c, cons)), key=lambda c: (c.mode, c.decode.gpus, str(c.prefill))):
        fixed = _fixed_points(q, c, cons)
        points = fixed if fixed is not None else [p for p in score(q, c).points if _counts_match(p, cons)]
        swept += [p for p in points if p.meets or not q.slo.targets()]
    served = [p for p in swept if not p.metrics.saturated]
    if not served and swept:  # no layout of the stated GPUs serves the stated rate: the one that serves most
        return max(swept, key=lambda p: p.metrics.output_tok_s_per_gpu)
    swept = served  # an overloaded layout never wins a latency objective on its unbounded queue's estimate
    if saturated:
        distinct: dict[str, Point] = {}
        for p in swept:
            distinct.setdefault(p.deployment.describe(), p)  # a deployment several swept batches sized alike
        swept = [sp for p in distinct.values() if (sp := _saturated(q, p, cohorts)) is not None]
    # max keeps the first of equal best, in the candidates' order
    return max(swept, key=lambda p: _objective(metric, p), default=None)


def _best(
    q: Question, cons: dict[str, dict[str, int]], facts: dict[str, Any], metric: str, stated: dict[str, str]
) -> tuple[Point | None, str]:
    """The best deployment at the resolved precision; if none fits, at the best of the other mixes
    the hardware runs (`planner.search.space.precisions`) that keep every stated precision part. A KV
    cache dtype the source leaves unknown is a launch flag (`--kv-cache-dtype fp8`), so it is searched
    like the layout: the FP8 cache where it does better for the metric than the engine's default."""
    cohorts = facts["cohorts"]
    m, hw = get_model(q.model), get_hardware(q.hardware)
    best = _best_at(q, cons, facts["precision"], metric, cohorts)
    if best is not None:
        prec = facts["precision"]
        if "kv_cache" not in stated and prec.kv_cache != "fp8":
            fp8 = prec.model_copy(update={"kv_cache": "fp8"})
            if "attention" not in stated:  # the attention math the engine runs over that cache
                att, _ = attention_default(facts["engine"], m, hw, "fp8")
                fp8 = fp8.model_copy(update={"attention": att})
            p = _best_at(q, cons, fp8, metric, cohorts)
            if p is not None and _objective(metric, p) > _objective(metric, best):
                goal = "lowest latency" if metric in LATENCY else "highest throughput per GPU"
                return p, f"precision: searched (kv_cache unknown; FP8 KV for the {goal}): {_label(fp8)}"
        return best, ""
    note = ""
    for prec in precisions(m, hw, facts["engine"]):
        if prec == facts["precision"] or any(getattr(prec, k) != v for k, v in stated.items()):
            continue
        p = _best_at(q, cons, prec, metric, cohorts)
        if p is not None and (best is None or _objective(metric, p) > _objective(metric, best)):
            best, note = p, f"precision: searched (the default {_label(facts['precision'])} does not fit): "
            note += _label(prec)
    return best, note


def _label(p: Any) -> str:
    return f"attention {p.attention}, kv_cache {p.kv_cache}, dense {p.dense}, moe {p.moe}"


def search_deployment(
    s: Scenario, metric: str, base_dir: Path | None = None
) -> tuple[Deployment, list[str], Point | None]:
    """The deployment a tuned operator would run for `metric` under what `s` states, the notes that
    say so, and its operating point (the estimate at the question's traffic, the saturated estimate for a
    throughput with no traffic, or the best batch for a throughput with an slo;
    None for a prefill or decode phase, which is estimated on its own pool)."""
    if s.phase != "end-to-end":
        return search_phase(s, metric, base_dir)
    probe, facts = _probe(s, base_dir)
    q = _question(s, facts, metric, base_dir)
    cons = constraints(s)
    stated = {k: v for k, v in s.precision.model_dump().items() if v != "unknown"}
    best, prec_note = _best(q, cons, facts, metric, stated)
    while best is None and q.gpus is None and q.max_gpus is not None and q.max_gpus * 2 <= MAX_GPUS:
        q = q.model_copy(update={"max_gpus": q.max_gpus * 2})  # the traffic needs more than one shape
        best, prec_note = _best(q, cons, facts, metric, stated)
    if best is None:
        raise ScenarioError(
            f"deployment: no deployment of {q.budget} GPUs in the search space matches what is stated "
            f"({stated_text(cons)})" + (" and meets the slo" if q.slo.targets() else "") + f"; {LAYOUT_RULE}"
        )
    budget = f"{q.gpus} GPUs" if q.gpus else f"at most {q.max_gpus} GPUs"
    goal = "lowest latency" if metric in LATENCY else "highest throughput per GPU"
    note = f"deployment: searched ({goal}, {budget}{', meeting the slo' if q.slo.targets() else ''}): "
    # the probe's own runtime defaults belong to the probe's layout; the chosen one's come with it
    kept = [n for n in probe.assumed if not n.startswith("runtime.") and not (prec_note and n.startswith("precision."))]
    notes = [note + best.deployment.describe(), *([prec_note] if prec_note else []), *kept]
    return best.deployment, notes, best


def resolve_any(s: Scenario, base_dir: Path | None = None, metric: str = "output_tok_s_per_gpu") -> Resolved:
    """`resolve` for a stated deployment; otherwise search the unknown fields first. An unknown
    memory fraction whose default does not fit is searched (`planner.model.mem_fraction`)."""
    if s.deployment.known:
        return resolve_fitting(s, base_dir)
    dep, notes, _ = search_deployment(s, metric, base_dir)
    pools: dict[str, Any] = {p.role: p.layout() for p in dep.pools}
    if s.phase != "end-to-end":
        pools = {s.phase: pools[s.phase]} if s.phase in pools else pools
    data: dict[str, Any] = {**scenario_data(s), "deployment": pools, "engine": dep.engine}
    if any(n.startswith("precision: searched") for n in notes):
        data["precision"] = dep.pools[0].instance.precision.model_dump(exclude={"lm_head"})
    chosen = Scenario.model_validate(data)
    res = resolve_fitting(chosen, base_dir)
    res.assumed = list(dict.fromkeys([*notes, *res.assumed]))
    return res


__all__ = ["LAYOUT_FIELDS", "default_gpus", "resolve_any", "search_deployment"]

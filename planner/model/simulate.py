"""Run the simulator on a resolved scenario: pools from its `Deployment`, traffic from its
workload and `simulation:` section. The estimator seeds the closed-loop ramp (clients start
spread over one estimated E2E, as independent users would; a saturated offline run starts them
all at once when its outputs are of one length, as the offline benchmarks queue every request at
the start).

One simulation configuration per deployment and traffic (`standard_config`), used by the plan's
verification, `planner simulate`, `planner validate` and the dashboard, so two views of one
deployment show one simulated number: `ROUNDS` measured rounds of the requests in flight between one
round of warm-up and one of cool-down (at least `MIN_REQUESTS` measured under Poisson arrivals, in all
for a closed loop), seed 0. Poisson arrivals start on a warm start: the requests in flight that the
estimate's steady state holds (Little's law) are already there at 0 s, each partway through its output
(`SimConfig.warm_start`): near capacity a batch grown from empty relaxes over many E2Es (Llama-3.1-8B on
72 GB300 at 1,242 req/s: halves 14% apart after 41,000 requests). The warm-up's arrivals
(the batch filling, one E2E) and the cool-down's (which keep the load on while the measured requests
finish, instead of a drain that speeds up the last ones) are left out of the measured window; that holds
for the stated traffic's Poisson or closed-loop arrivals, while a trace or arrival process keeps the
simulator's defaults (the first 10% of arrivals left out, no cool-down).
Fields that the `simulation:` section sets explicitly are kept. A run is checked for convergence: output
throughput (an open loop's as a share of what each half's arrivals ask for) and mean TPOT over the two
halves of the measured window must agree within `CONVERGENCE` (`planner.model.sim_settle`; a batch still growing
shows in TPOT while the throughput already matches the offered load); if they do not, or the SLO's percentile rests
on too few measured requests (`few_above`), and the request count was not fixed (by the
user or a trace), the run is repeated with twice the requests (up to `MAX_REQUESTS`); otherwise the summary
says `converged: false` with a warning. A run over capacity (`overloaded`: it completes clearly fewer output
tokens than its arrivals ask for) is not repeated, and its warning says so. `steady` says whether the
figures are a steady state's (or, for traffic that changes by design, that traffic's): neither an overloaded
run nor one whose halves still disagree can verify an SLO (planner.search.verify).
A deployment of many identical instances is simulated as a slice of them (`planner.model.sim_slice`),
its totals scaled back and `slice` saying what ran; the run's step budget follows what its requests need.
It does not choose traffic: the scenario or question states it; the summary's `traffic` says what ran
(a trace or arrival process replays its own rate, which the steady-state estimate, priced at
`workload.request_rate`, does not: `traffic_note` says so when they differ by more than `RATE_MISMATCH`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from planner.inputs.edge import format_validation_error
from planner.model.aggregated import cohort_batches
from planner.model.defaults import Resolved
from planner.model.estimator import estimate
from planner.model.metrics import Metrics, phase_models
from planner.model.sim_settle import changing as _changing
from planner.model.sim_settle import converged as _converged  # (a module global: tests replace it)
from planner.model.sim_settle import few_above, misses_as_it_settles
from planner.model.sim_settle import short_replay as _short_replay
from planner.model.sim_settle import unsteady as _unsteady
from planner.model.sim_slice import STEP_CEILING, slice_divisor, slice_text, sliced, step_budget, whole
from roofline.errors import PlannerError
from simulator import PoolDef, SimConfig, SimResult, build_workload, simulate, summarize
from simulator.config import MAX_REQUESTS as SIM_MAX_REQUESTS
from simulator.config import window_share

MAX_REQUESTS = 64_000
# up to 32x the first run (within MAX_REQUESTS): a 3x TP8 row at 5 req/s still differed 7.9% between its
# halves at 8x (1,006 -> 8,048 requests) and settled at 30,000 (new-user trial, nineteenth session)
MAX_DOUBLINGS = 5
ROUNDS = 3  # measured rounds: each client (or each request slot) completes about this many requests
MIN_REQUESTS = 600  # first run's request count at least, before any doubling
# one round of arrivals before the measured ones (open-loop traffic fills the batch over one E2E) and
# one after them (the load stays on until the last measured request has finished)
WARMUP_FRACTION = COOLDOWN_FRACTION = 1 / (ROUNDS + 2)


def pool_defs(res: Resolved) -> list[PoolDef]:
    """Every pool of the deployment; a prefill step holds up to the token budget per DP rank, and
    a sequence runs to the workload's prompt + output."""
    return [
        PoolDef(
            p.role,
            p.instances,
            p.instance,
            p.instance.runtime.prefill_tokens_per_rank * p.parallel.dp_attention,
            res.isl + res.osl,
        )
        for p in res.deployment.pools
    ]


def _once(res: Resolved, cfg: SimConfig, base: Path | None, progress: Any, d: int = 1) -> SimResult:
    same_domain = res.deployment.same_domain  # the whole deployment's fabric, not the slice's
    res = sliced(res, d)
    try:
        wl = build_workload(cfg, res.isl, res.osl, res.concurrency, res.request_rate, base)
    except ValidationError as exc:  # e.g. a closed loop larger than the simulator takes
        raise PlannerError(format_validation_error(exc, "simulation")) from exc
    except ValueError as exc:  # its message names the simulation field where it can
        raise PlannerError(str(exc) if str(exc).startswith("simulation") else f"simulation: {exc}") from exc
    return simulate(pool_defs(res), wl, cfg, same_domain, progress)


def _saturated(res: Resolved) -> Resolved:
    """No traffic stated: an offline, saturated run (README, shared/validation/README.md), simulated
    as a closed loop holding as many requests as the estimator's saturated point keeps in flight
    (the decode pool full: the KV pool or the engine's running limit). With outputs of one length every
    client starts at once, as the offline benchmarks queue every request at the start, and the cohorts
    that forms last the run (`planner.model.aggregated.cohort_batches`, which the estimate prices); spread
    outputs dissolve them into a stream within a few rounds, so those clients start spread like any
    closed loop's and the measured window is that stream. The offline benchmarks (trtllm-bench, `vllm
    bench throughput`, SGLang's offline engine) run in process: no serving path."""
    res = res.in_process()
    n = max(1, round(estimate(res).concurrency))
    note = f"traffic: saturated, simulated as a closed loop of {n} requests in flight (the decode pool full)"
    return replace(res, concurrency=float(n), assumed=[*res.assumed, note])


def _in_flight(res: Resolved) -> tuple[float, float]:
    """(requests in flight: the stated concurrency, else rate x estimated E2E (Little's law); those a warm
    start places decoding: the same, but where the rate is over capacity (no steady state) what the decode
    pools hold at capacity. A warm start of rate x E2E there put 6,168 requests with their prompts
    computed on one H200 running gpt-oss-120b at 200 req/s: its window decoded them with little prefill
    and read 12,201 output tok/s where the deployment sustains about 8,100 (trial, eighteenth session))."""
    if res.concurrency:
        return res.concurrency, res.concurrency
    try:
        m = estimate(res)
    except PlannerError:  # no steady state at this rate: the smallest run, extended until it converges
        return 0.0, 0.0
    held = (res.request_rate or 1.0) * m.e2e_s if np.isfinite(m.e2e_s) else 0.0
    if not m.saturated:
        return held, held
    pool = res.deployment.first("decode") or res.deployment.first("aggregated")
    return held, min(held, m.decode_batch * (pool.instances if pool is not None else 1))


def _standard(res: Resolved, given: SimConfig | None) -> tuple[Resolved, SimConfig, bool, int]:
    """(the resolved scenario to run, its configuration, whether the request count is fixed, the
    slice divisor)."""
    cfg = given or res.simulation or SimConfig()
    offline = res.concurrency is None and res.request_rate is None and cfg.arrival is None and cfg.trace is None
    if offline:
        res = _saturated(res)
    stated = cfg.model_fields_set
    fixed = "requests" in stated or cfg.trace is not None
    d = slice_divisor(res, cfg, fixed)
    update: dict[str, Any] = {}
    if not fixed:
        # Poisson arrivals: MIN_REQUESTS measured, the warm-up and cool-down rounds on top (the window's
        # throughput carries their sampling noise); a closed loop's arrivals follow its completions
        least = MIN_REQUESTS * (ROUNDS + 2) / ROUNDS if res.request_rate is not None else MIN_REQUESTS
        held, decoding = (v / d for v in _in_flight(res))
        n = int(min(max((ROUNDS + 2) * held, least), SIM_MAX_REQUESTS))
        update["requests"] = n
        if "max_steps" not in stated:
            # each request decodes in the batch the pools hold: over capacity far fewer than rate x E2E (a
            # prefill-bound run of 58,247 requests stopped at 1,500,000 steps, its budget priced at 11,648 in
            # flight where the decode pool holds 7; review)
            update["max_steps"] = step_budget(sliced(res, d), n, decoding)
        if res.request_rate is not None and cfg.arrival is None and "warm_start" not in stated:
            # Poisson arrivals start from the estimate's steady batch, not from empty (`warm_start`); a stated
            # request count runs from idle, as a benchmark does, unless it states warm_start (`planner simulate
            # --requests` keeps the default run's: `cli.simulate`)
            update["warm_start"] = int(min(round(decoding), n))
    own_traffic = cfg.trace is None and cfg.arrival is None  # a section's trace or arrival process keeps its own
    if "warmup_fraction" not in stated and cfg.warmup_by == "arrival" and own_traffic:
        # a stated cool-down leaves room for some warm-up, as a stated warm-up does for the cool-down below
        update["warmup_fraction"] = window_share(WARMUP_FRACTION, cfg.cooldown_fraction)
    if "cooldown_fraction" not in stated and cfg.warmup_by == "arrival" and own_traffic:
        warmup = update.get("warmup_fraction", cfg.warmup_fraction)
        update["cooldown_fraction"] = window_share(COOLDOWN_FRACTION, warmup)
    if cfg.closed_loop_ramp_s is None and offline and cohort_batches(cfg):
        update["closed_loop_ramp_s"] = 0.0  # an offline benchmark queues every request at once
    elif cfg.closed_loop_ramp_s is None and res.request_rate is None:
        try:
            ramp = estimate(res).e2e_s
        except PlannerError:
            ramp = 0.0
        update["closed_loop_ramp_s"] = ramp if np.isfinite(ramp) else 0.0
    return res, cfg.model_copy(update=update), fixed, d


def default_warm_start(res: Resolved, given: SimConfig | None = None) -> int:
    """The requests the default run starts with, for the whole deployment (the default run may simulate a slice of
    it, 1/d of its instances and traffic, while a stated request count runs it whole: review, twenty-first session)."""
    _, cfg, _, d = _standard(res, given)
    return cfg.warm_start * d


def standard_config(res: Resolved, given: SimConfig | None = None) -> SimConfig:
    """The one simulation configuration of this deployment and traffic (before any doubling):
    what `run_simulation` starts from, e.g. for a progress bar's length."""
    return _standard(res, given)[1]


def run_simulation(
    res: Resolved,
    cfg: SimConfig | None = None,
    base: Path | None = None,
    progress: Any = None,
    extend: bool | None = None,
) -> tuple[SimResult, dict[str, Any]]:
    """Simulate with the standard configuration (`standard_config`, fields `cfg` sets explicitly
    kept); `extend` allows doubling the requests until the window converges (default: when the
    request count was not set explicitly and no trace fixes it)."""
    own_steps = "max_steps" not in (cfg or res.simulation or SimConfig()).model_fields_set  # step_budget's
    res, cfg, fixed, d = _standard(res, cfg)
    pinned = not extend if extend is not None else fixed
    slo = res.slo.model_dump(exclude={"statistic"}) if res.slo else None  # goodput: each request within every target
    result = _once(res, cfg, base, progress, d)
    ok, gap = _converged(result)
    stats = whole(summarize(result, slo), d)
    doublings = 0
    # an overloaded run does not settle with more requests: its queue only grows longer; a run whose SLO percentile
    # rests on a handful of requests doubles too (review: a p99 over 600 measured requests rested on 6)
    while (
        (not ok or few_above(res, stats) or _short_replay(result, stats))
        and not pinned
        and doublings < MAX_DOUBLINGS
        and cfg.requests * 2 <= MAX_REQUESTS
    ):
        if stats["overloaded"]:
            break
        # twice the requests take twice the steps: the budget sized for the first run doubles with them (a
        # 100,000-token-prompt plan's third run stopped at the first run's 1,500,000 steps: trial)
        more = {"max_steps": min(2 * cfg.max_steps, STEP_CEILING)} if own_steps else {}
        cfg = cfg.model_copy(update={"requests": cfg.requests * 2, **more})
        result = _once(res, cfg, base, progress, d)
        ok, gap = _converged(result)
        stats = whole(summarize(result, slo), d)
        doublings += 1
    summary = {"method": "simulate", **stats}  # as estimate_dict's "method": "estimate"
    for name in ("ttft", "tpot", "e2e"):  # what the phase has no latency for, as the estimate says: none
        if not phase_models(res.deployment.mode, name):
            summary[f"{name}_ms"] = dict.fromkeys(summary[f"{name}_ms"])
    summary["requests"] = cfg.requests if cfg.trace is None else len(result.table)  # a trace: the rows replayed
    summary["converged"] = ok
    summary["halves_gap"] = round(gap, 4)
    summary["traffic"], note = traffic_summary(res, result, cfg, d)
    summary["slice_divisor"] = d  # the run's totals are the deployment's / d (`slice`)
    if d > 1:
        summary["slice"] = slice_text(res, d)
    if note:
        summary["traffic_note"] = note
    summary["assumed"] = list(res.assumed)  # what the scenario left unknown and what filled it (searched, defaults)
    too_short = "" if summary["overloaded"] else _short_replay(result, summary)
    # a run that fills and drains throughout is no steady state, a trace's included (trial, twenty-first session: a
    # trace run whose decode never ran in its window read steady, 5 of 1,342 offered tok/s/GPU)
    summary["steady"] = not summary["overloaded"] and not too_short and (ok or _changing(cfg))
    if not summary["steady"] and not summary["overloaded"]:
        summary["misses_as_it_settles"] = misses_as_it_settles(result, res)
    if summary["overloaded"]:
        done, asked = summary["output_tok_s"], summary["offered_output_tok_s"]
        short = (
            f"the deployment completes {done:,.0f} of the {asked:,.0f} output tok/s the traffic asks for; its queue "
            if done < 0.98 * asked  # else the queue's growth flagged it (simulator.metrics._queue_grows)
            else f"the wait before prefill grows across the measured window (its {done:,.0f} of {asked:,.0f} output "
            "tok/s asked are done only by queueing more); the queue "
        )
        summary["warning"] = (
            f"over capacity: {short}grows for as long as the run lasts, so these latencies are this run's length's, "
            "not a steady state's"
        )
    elif too_short:
        summary["warning"] = too_short
    elif not ok:
        summary["warning"] = _unsteady(cfg, gap)
    return result, summary


RATE_MISMATCH = 0.10


def traffic_summary(res: Resolved, result: SimResult, cfg: SimConfig, d: int = 1) -> tuple[str, str | None]:
    """(what traffic the run simulated, a note when it is not the rate the estimate prices); `d`: the
    slice divisor, the whole deployment's traffic is described."""
    t = result.table
    warm = int(result.extra.get("warm_start", 0))  # in flight at 0 s with the rest of their prompt computed
    arrived = np.sort(t.arrival[warm:][~np.isnan(t.arrival[warm:])])
    lengths = f"mean isl {float(np.mean(t.isl[warm:])):,.0f} / osl {float(np.mean(t.osl[warm:])):,.0f}"
    if (cfg.input_len or cfg.output_len) and cfg.trace is None:  # drawn lengths: the plan's and the estimate's
        lengths += " (this run's draws)"  # means are the distribution's (65,536 draws), which differ by chance
    if warm:  # their lengths are the warm start's (part of a request each), not the workload's
        lengths += f", plus {warm:,} requests in flight at 0 s (warm start, never measured)"
    if cfg.trace is None and cfg.arrival is None:
        if res.request_rate is not None:
            return f"Poisson arrivals at {res.request_rate:,.4g} req/s, {lengths}", None
        held = min(res.concurrency or 0, d * len(t))  # a run of fewer requests than clients holds them all at once
        return f"closed loop of {held:,.0f} requests in flight, {lengths}", None
    if cfg.arrival is not None and cfg.arrival.kind == "closed" and cfg.arrival.concurrency:
        held = min(cfg.arrival.concurrency, d * len(t))
        desc = f"closed loop of {held:,} requests in flight (simulation.arrival), {lengths}"
        differs = res.concurrency and cfg.arrival.concurrency != res.concurrency
        return desc, (
            f"the steady-state estimate (planner estimate / explain) prices workload.concurrency "
            f"{res.concurrency:,.4g}; this run holds simulation.arrival's {cfg.arrival.concurrency:,}"
            if differs
            else None
        )
    span = float(arrived[-1] - arrived[0]) if len(arrived) > 1 else 0.0
    rate = (len(arrived) - 1) / span if span > 0 else float("nan")
    if cfg.trace is not None:
        kind = f"trace replay (time_scale {cfg.trace.time_scale:g})"
    else:
        kind = f"{cfg.arrival.kind} arrivals" if cfg.arrival is not None else "arrivals"
    pace = f"at a mean {rate:,.4g} req/s" if np.isfinite(rate) else "all at one instant"
    desc = f"{kind}: {len(arrived):,} requests {pace}, {lengths}"
    stated, note = res.request_rate, None
    prices = "the steady-state estimate (planner estimate / explain) prices"
    if res.concurrency:  # a closed loop stated, open arrivals run (sixteenth trial: TPOT 10.35 vs 24.8 ms, unsaid)
        note = f"{prices} workload.concurrency {res.concurrency:,.4g} (a closed loop); this run's arrivals are {kind}"
    elif stated and np.isfinite(rate) and abs(rate - stated) > RATE_MISMATCH * stated:
        note = f"{prices} workload.request_rate {stated:,.4g} req/s; this run's arrivals average {rate:,.4g} req/s"
    return desc, note


def simulated_metrics(res: Resolved, summary: dict[str, Any]) -> Metrics:
    """A simulation's summary as the planner's one metrics type (means; its percentiles stay in `summary`)."""

    def s(name: str, stat: str) -> float | None:
        v = summary[f"{name}_ms"][stat]
        return None if v is None else v / 1e3

    m = Metrics("simulate", res.deployment.mode, summary["gpus"], res.concurrency or 0.0)
    m.ttft_s, m.tpot_s, m.e2e_s = (s(k, "mean") or 0.0 for k in ("ttft", "tpot", "e2e"))
    m.input_tok_s, m.output_tok_s = summary["input_tok_s"], summary["output_tok_s"]
    m.assumed, m.summary = list(res.assumed), summary
    return m

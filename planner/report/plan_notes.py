"""The plan's notes beside its table: what the rows' figures stand for where they might read otherwise
(idle GPUs of a fixed budget, weights no checkpoint holds, simulated runs of other traffic or too short,
estimates at the edge of their KV slots) and each row's load note (what its launch does not enforce).
Text only: every figure comes from the answer's records (`planner.report.plan_report.records`)."""

from __future__ import annotations

from typing import Any

from planner.inputs.question import Question
from planner.launch import UNAVAILABLE
from planner.model.deployment import Deployment
from planner.model.estimator import FLAT, max_batch, unpinned
from planner.model.queueing import SLOT_SD, near_slots
from planner.model.steps import decode_capacity
from planner.report import track_record
from planner.search.plan import Answer, Recommendation
from planner.search.verify import as_resolved


def _near_slots(a: Answer, shown: int = 8) -> list[str]:
    """Estimate rows (of the first `shown`) whose batch under Poisson arrivals sits within SLOT_SD standard
    deviations of their decode slots (the KV pool at full length): there the wait for a slot is steep, so a few
    per cent more TPOT than estimated puts seconds on TTFT (sixteenth trial: Llama-3.1-8B on 3 H100, batch 287
    of 323 slots, TTFT 126 ms by estimate, p90 1,333 ms simulated)."""
    q = a.question
    if q.concurrency is not None:  # a closed loop's clients wait for no slot while their requests fit
        return []
    near = []
    for rank, r in enumerate(a.recommendations[:shown], 1):
        if r.simulated is not None:
            continue
        slots, b = max_batch(r.deployment, q.isl, q.osl), r.point.batch
        if near_slots(b, slots):
            near.append(f"#{rank} (batch {b:,} of {slots:,})")
    flat = []  # rows whose throughput is flat at the rate: their batch, and TPOT with it, is not pinned (`slot_caveat`)
    for rank, r in enumerate(a.recommendations[:shown], 1):
        if r.simulated is None and q.rate is not None:
            span = unpinned(r.deployment, q.isl, q.osl, q.in_flight_kv(), q.rate)
            if span is not None:
                flat.append(f"#{rank} (batch {span[0]:,.0f}, or any up to {span[1]:,.0f})")
    out = []
    if near:
        out.append(
            f"{', '.join(near)}: estimates within {SLOT_SD:g} standard deviations of their KV slots, where the wait "
            "for a slot is steep: a few per cent more TPOT than estimated adds seconds of TTFT, so their TTFT is the "
            "least certain figure (`planner simulate` their exported scenarios to see it)"
        )
    if flat:
        out.append(
            f"{', '.join(flat)}: estimates at their capacity, where a larger batch carries the rate about as well "
            f"(within {FLAT:.0%}): the batch the queue settles at, and TPOT with it, is not pinned by the rate "
            "(`planner simulate` their exported scenarios to see it)"
        )
    return out


def _track(a: Answer, shown: int = 8) -> list[str]:
    """The track record (`planner.report.track_record`) of each deployment mode among the first `shown` rows."""
    firsts: dict[str, Deployment] = {}
    for r in a.recommendations[:shown]:
        firsts.setdefault(r.deployment.mode, r.deployment)
    return [n for n in map(track_record.note, firsts.values()) if n]


def _optimistic(recs: list[dict[str, Any]]) -> list[str]:
    """Where most simulated rows missed an SLO their estimates met and rows the verification left unsimulated read
    'meets' on their estimates alone, that those are likely to miss too (trial, twenty-first session: 128,000-token
    prompts, rows 2-4 'meets (estimate)' beside three simulated rows that all missed)."""
    sim = [d for d in recs if d["simulated"] is not None and d["estimate"] is not None]
    missed = [d for d in sim if d["slo_verdict"] == "misses"]
    unchecked = [d for d in recs if d["simulated"] is None and d["slo_verdict"] == "meets"]
    if not unchecked or not missed or 2 * len(missed) < len(sim):
        return []
    ranks = ", ".join(f"#{d['rank']}" for d in unchecked[:6]) + (" ..." if len(unchecked) > 6 else "")
    return [
        f"estimates proved optimistic here: {len(missed)} of the {len(sim)} simulated rows missed the SLO; the rows "
        f"that meet on estimates alone ({ranks}) were not simulated and may miss too (planner simulate each one's "
        "scenario, --scenarios DIR)"
    ]


def notes(a: Answer, recs: list[dict[str, Any]]) -> list[str]:
    """The plan's notes; where the first row leaves GPUs of a fixed budget idle, how many (and its tok/s
    per GPU given; under `--optimize gpus`, that it is the fewest that serve the load); where it needs
    weights no catalog checkpoint holds, the first row that loads one (its rank and tok/s/GPU against
    the first's); where a simulated row's arrivals (a workload's gamma or trace) average a rate other than the
    one the estimate rows price, that it was so. `recs`: the answer's records (`plan_report.records`)."""
    out = list(a.notes)
    drawn = [(r.simulated.summary or {}) for r in a.recommendations if r.simulated is not None]
    off = next((s for s in drawn if s.get("traffic_note")), None)
    short = next((s["warning"] for s in drawn if str(s.get("warning", "")).startswith("a short run")), None)
    if short is not None:  # sixteenth trial: a 50-row trace's rows ranked on tok/s its fill-and-drain run read low
        out.append(f"simulated rows: {short}")
    if off is not None and a.question.rate:  # sixteenth trial: a gamma run at 3.56 req/s ranked beside estimates at 4
        out.append(
            f"simulated rows replay the workload's own arrivals ({off['traffic']}), not the "
            f"{a.question.rate:,.4g} req/s the estimate rows price: their figures are that run's"
        )
    out += _near_slots(a)
    out += _optimistic(recs)
    out += _track(a)
    given, used = a.question.gpus, recs[0]["gpus"] if recs else 0
    if given and 0 < used < given and a.question.optimize == "gpus":  # the fewest GPUs is what was asked
        out.append(f"#1 uses {used} of the {given} GPUs given: the fewest that serve the load ({given - used} spare)")
    elif given and 0 < used < given:  # a fixed budget the first row does not fill: spare GPUs idle
        per_given = recs[0]["output_tok_s_per_gpu"] * used / given
        out.append(
            f"#1 uses {used} of the {given} GPUs given ({given - used} idle); its tok/s/GPU counts the {used} it "
            f"uses: {per_given:,.1f} per GPU given"
        )
        # the row that does the most with the GPUs given, where it is not #1 (trial: a 128-GPU row gave 48% more
        # tokens from 144 GPUs than #1 on 80, unsaid)
        ok = [d for d in recs if d["slo_verdict"] in ("meets", "-")] or recs
        best = max(ok, key=lambda d: d["output_tok_s_per_gpu"] * d["gpus"])
        more_tokens = best["output_tok_s_per_gpu"] * best["gpus"] > 1.005 * recs[0]["output_tok_s_per_gpu"] * used
        if more_tokens and a.question.rate is None:  # a stated rate fixes every row's tokens (review: '+1%' noise)
            more = best["output_tok_s_per_gpu"] * best["gpus"] / (recs[0]["output_tok_s_per_gpu"] * used) - 1
            out.append(
                f"#{best['rank']} serves the most from the {given} GPUs given: {best['gpus']} GPUs, "
                f"{best['output_tok_s_per_gpu'] * best['gpus'] / given:,.1f} tok/s per GPU given ({more:+.0%} tokens "
                f"against #1; it {_verdict_words(best)})"
            )
    if not recs or not any(UNAVAILABLE in n for n in recs[0]["needs"]):
        return out
    first = recs[0]["output_tok_s_per_gpu"]
    k = first_loadable(recs)
    ready = None if k is None else recs[k]
    head = f"#1 needs weights no catalog checkpoint holds ({'; '.join(recs[0]['needs'])})"
    if ready is None:
        return [  # the search appends the best loadable candidate that meets by estimate (plan._distinct): none did
            *out,
            f"{head}; no deployment of weights that exist (a catalog checkpoint, --checkpoint, or a config.json's own) "
            "meets the SLO by estimate here",
        ]
    change = ready["output_tok_s_per_gpu"] / first - 1 if first else 0.0
    q = a.question
    if q.rate is not None and ready["gpus"] == recs[0]["gpus"]:  # the rate fixes both rows' throughput: a
        # simulated row's reads below the offered tokens by sampling noise ('+2.7% against #1's'; trial, twentieth)
        than = f"the same {q.rate:,.4g} req/s on as many GPUs as #1"
    else:
        than = f"{ready['output_tok_s_per_gpu']:,.1f} tok/s/GPU, {change:+.1%} against #1's"
    return [
        *out,
        f"{head}; #{ready['rank']} is the first that loads one: {than}; it {_verdict_words(ready)}",
    ]


def first_loadable(recs: list[dict[str, Any]]) -> int | None:
    """The index of the first record whose weights exist (no need of weights no checkpoint holds): the row the
    notes name, the table shows and the launch commands are printed for."""
    return next((k for k, d in enumerate(recs) if not any(UNAVAILABLE in n for n in d["needs"])), None)


def _verdict_words(d: dict[str, Any]) -> str:
    """A record's SLO verdict in words, and by which method: 'meets the SLO (estimate)'."""
    said = {"meets": "meets the SLO", "misses": "misses the SLO", "unverified": "is unverified"}
    return f"{said.get(d['slo_verdict'], 'has no SLO to meet')} ({d['slo_verdict_by']})"


LIGHT = 0.25  # a row's batch, at stated traffic, under this share of what its instance holds: a light load


def load_note(q: Question, r: Recommendation, rank: int = 1) -> str:
    """What the launch commands do not enforce: the traffic the row was verified at."""
    res = as_resolved(q, r.point)  # the traffic the row was simulated at, as its scenario states it
    load = (
        f"{max(1, round(res.concurrency)):,} requests in flight"
        if res.concurrency is not None
        else f"{res.request_rate or 0:,.4g} requests/s (batch {r.point.batch:,.0f} per instance)"
    )
    pool = r.deployment.first("decode") or r.deployment.first("aggregated")
    room = decode_capacity(pool, q.in_flight_kv()) if pool is not None else 0
    stated = q.rate is not None or q.concurrency is not None  # else the row runs at the most its SLO allows
    if stated and r.point.batch < LIGHT * room:  # a cap at a light row's batch would queue requests it has room for
        return (
            f"#{rank}'s figures are for {load}, well within what it holds (up to {room:,} sequences per instance): "
            "a heavier load mostly adds TPOT; ask the plan at that load to see how much (the launches keep each "
            "engine's running-request limit)."
        )
    return (
        f"#{rank}'s figures are for {load}. The launches keep each engine's running-request limit, "
        "so a heavier load is admitted and TPOT grows past the row's: limit the offered load at the router or "
        "client, or cap running requests at the row's batch (SGLang --max-running-requests, vLLM --max-num-seqs, "
        "TensorRT-LLM max_batch_size; per attention-DP rank where the engine counts per rank) to queue the excess "
        "(TTFT grows instead)."
    )

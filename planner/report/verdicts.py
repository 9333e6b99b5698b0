"""Verdicts and caveats that more than one view prints for the same figures: a simulation summary against a
scenario's SLO (`planner simulate`'s text and JSON, read as a plan row reads it), and the caveat on an estimate whose
decode batch sits at the edge of its KV slots (`planner estimate`, as the plan's notes put it on such rows). It
computes no figure; the model layer does."""

from __future__ import annotations

from typing import Any

from planner.model.defaults import Resolved
from planner.model.estimator import max_batch, point, unpinned
from planner.model.metrics import Metrics
from planner.model.queueing import SLOT_SD, near_slots
from planner.model.sim_settle import FEW_ABOVE, tail_count


def verdict_word(meets: bool | None, summary: dict[str, Any] | None) -> str:
    """meets / misses / '-' (no SLO), or 'unverified' for a simulation (its `summary`) that is not steady without
    being over capacity (`planner.search.plan.unsettled`): it neither verifies nor refutes the SLO. A plan row's
    word and `planner simulate`'s."""
    s = summary or {}
    if s.get("steady") is False and not s.get("overloaded") and not meets and not s.get("misses_as_it_settles"):
        return "unverified"
    return {True: "meets", False: "misses", None: "-"}[meets]


def slo_verdict(m: dict[str, Any], slo: Any) -> dict[str, Any] | None:
    """A simulation summary against a scenario's `slo`, as a plan row reads it (planner.search.verify.meets_slo,
    plan_report._verdict): each target at the slo's `statistic` (p90 unless stated); 'meets' where every one is
    within, 'misses' where one is over or the run is over capacity (its queue grows: it meets no SLO), and
    'unverified' where the run is not steady (its halves disagree, or it fills and drains throughout: it neither
    verifies nor refutes the SLO) unless both halves miss a target, the later no better (`misses_as_it_settles`).
    None without targets the summary has figures for."""
    stat = (slo.statistic if slo is not None else None) or "p90"
    given = slo.model_dump(exclude={"statistic"}) if slo is not None else {}
    targets = {k: float(t) for k, t in given.items() if t is not None}
    got = {k: float(m[k][stat]) for k in targets if m.get(k) and m[k].get(stat) is not None}
    targets = {k: t for k, t in targets.items() if k in got}  # a target the run has no figure for is not checked
    if not got:
        return None
    steady = m.get("steady") is not False and not m.get("overloaded")  # verify.meets_slo's rule: else none is met
    verdict = verdict_word(steady and all(got[k] <= targets[k] for k in got), m)
    why, n, tail = "", m.get("requests_measured"), tail_count(m, stat)
    if m.get("overloaded"):
        why = "over capacity: its queue grows"
    elif settling := m.get("misses_as_it_settles"):
        why = f"not steady, and both halves of the run miss {', '.join(settling)}, the later no better"
    elif m.get("steady") is False:
        why = (
            "a short run: its batch fills and drains throughout"
            if str(m.get("warning", "")).startswith("a short run")
            else "not steady: the run's halves disagree"
        )
    elif tail is not None and tail < FEW_ABOVE:  # trial: a p99 over 16 requests read 'meets' with no word
        why = f"the {stat} of {n:,} measured requests rests on the top {tail:.1f} of them: more requests steady it"
    return {"statistic": stat, "targets": targets, "achieved": got, "verdict": verdict, "why": why}


def slot_caveat(res: Resolved, e: Metrics) -> str | None:
    """The caveat the plan puts on such rows (planner.report.plan_notes._near_slots), for one estimate: under a
    request rate, a decode batch within SLOT_SD standard deviations of the instance's KV slots makes TTFT the
    least certain figure (the wait for a slot is steep there)."""
    if res.request_rate is None or e.mode not in ("aggregated", "disaggregated") or e.saturated:
        return None
    slots = max_batch(res.deployment, res.isl, res.osl)
    span = unpinned(res.deployment, res.isl, res.osl, res.kv_len, res.request_rate)
    if span is not None:
        dep = res.deployment
        slow = point(dep, res.isl, res.osl, res.kv_len, span[1]).latency_ms("tpot", "mean")
        return (
            f"at {res.request_rate:,.4g} req/s every decode batch from {span[0]:,.0f} to {span[1]:,.0f} per instance "
            f"carries the load (TPOT {e.latency_ms('tpot', 'mean'):,.1f} to {slow:,.1f} ms): the instance runs at its "
            "capacity, so the batch its queue settles at is not pinned by the rate and TPOT is the least certain "
            "figure (`planner simulate` shows where it settles)"
        )
    if not near_slots(e.decode_batch, slots):
        return None
    return (
        f"decode batch {e.decode_batch:,.0f} of {slots:,} KV slots per instance, within {SLOT_SD:g} standard "
        "deviations of Poisson arrivals: the wait for a slot is steep here, so a few per cent more TPOT than "
        "estimated adds seconds of TTFT; TTFT is the least certain figure (`planner simulate` shows it)"
    )

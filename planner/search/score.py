"""Stage 1 of the search: score every candidate with the one steady-state model, fast.

For each candidate the decode batch per instance is swept over powers of two up to the KV
capacity and just below it (`batch_grid`). At each batch, one decode (or aggregated) instance
with one prefill instance gives the rates that size the deployment in whole instances: within the
budget (filling it), or the fewest that serve the question's rate or concurrency. Disaggregated
deployments get enough prefill instances to run at `PREFILL_UTILISATION`. The sized deployment is then evaluated by
`planner.model.estimator`: at the swept batch (`point`) when the question states no traffic, else
under the question's rate or concurrency (`estimate_deployment`, once per sized deployment, at the
decode batch that traffic keeps in flight), so a plan row and `planner estimate` of the same
deployment and traffic report the same figures.
A candidate the model cannot price (a prefill step whose memory does not fit, say) is
returned with its reason and counted as pruned; it never ends the plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pydantic import ValidationError

from planner.inputs.question import Question, target_parts
from planner.model.deployment import Deployment, pairs_in_nodes
from planner.model.estimator import estimate_deployment, max_batch, point
from planner.model.metrics import Metrics
from planner.model.steps import prefill_step
from planner.search.space import Candidate, deployment
from roofline.errors import PlannerError
from roofline.step import CATEGORIES

PREFILL_UTILISATION = 0.8  # target load of the prefill pool (keeps the M/D/1 wait about 2x service)


@dataclass(slots=True)
class Point:
    """One operating point of a candidate: the sized deployment and its estimated figures."""

    # decode sequences per decode (or aggregated) instance: as swept with no traffic stated, else the
    # mean the question's traffic keeps in flight
    batch: int
    deployment: Deployment
    metrics: Metrics
    bottleneck: str
    meets: bool = False
    slack: dict[str, float] = field(default_factory=dict)  # target / predicted per SLO (>= 1 meets)

    @property
    def gpus(self) -> int:
        return self.deployment.gpus

    @property
    def out_tok_s_per_gpu(self) -> float:
        return self.metrics.output_tok_s_per_gpu

    @property
    def out_tok_s_per_user(self) -> float:
        return self.metrics.output_tok_s_per_user

    @property
    def offloaded(self) -> tuple[str, ...]:
        """The roles whose weights stream from host memory at this point (their memory plans)."""
        return tuple(role for role, plan in self.metrics.memory.items() if plan.offloaded_bytes > 0)

    @property
    def label(self) -> str:
        """The deployment's one label at this point's batch, host weight offload marked."""
        return self.deployment.label(self.batch, self.offloaded)

    def instances(self, role: str) -> int:
        pool = self.deployment.first(role)
        return pool.instances if pool else 0


@dataclass(slots=True)
class Scored:
    cand: Candidate
    points: list[Point]
    best: Point | None = None
    error: str = ""  # why the candidate could not be priced (then it counts as pruned)


def slack(q: Question, m: Metrics) -> dict[str, float]:
    """Target / estimated mean per SLO target (the screen compares means with the targets at any percentile;
    the verifying simulation checks the percentile). No TPOT target in one-token answers."""
    got = {"ttft": m.ttft_s * 1e3, "tpot": m.tpot_s * 1e3, "e2e": m.e2e_s * 1e3}
    targets = {k: v for k, v in q.slo.targets().items() if not (k.startswith("tpot") and q.osl <= 1)}
    return {k: v / g if (g := got[target_parts(k)[0]]) > 0 else math.inf for k, v in targets.items()}


def _counts(
    q: Question, c: Candidate, unit: Deployment, b: int, tpot_s: float, full: bool = False
) -> tuple[int, int] | None:
    """(decode or aggregated instances, prefill instances) for the question, or None if over budget. At a
    stated concurrency that even `full` instances (the largest batch) cannot all hold within the budget, the
    budget's instances: the excess clients wait for a slot, as a closed loop queues (`estimate_deployment`
    prices the wait; ninth trial: 48 clients of Qwen3-235B on 2 H200, 42 slots, answered 'none serves')."""
    dec = unit.first("decode") or unit.first("aggregated")
    assert dec is not None
    decode_s = max(q.osl - 1, 1) * tpot_s
    x_dec = b / decode_s  # requests/s one decode instance completes
    per_decode, gpus_pre = 0.0, 0
    if c.prefill is not None:
        pre = unit.first("prefill")
        assert pre is not None
        step, done = prefill_step(pre, q.isl)
        per_decode = x_dec / (done / step.time_s * PREFILL_UTILISATION)
        gpus_pre = pre.gpus_per_instance

    def n_pre(n_d: int) -> int:
        return max(1, math.ceil(n_d * per_decode - 1e-9)) if c.prefill is not None else 0

    def gpus(n_d: int) -> int:
        return n_d * dec.gpus_per_instance + n_pre(n_d) * gpus_pre

    if q.rate is not None:
        n_d = max(1, math.ceil(q.rate / x_dec - 1e-9))
    elif q.concurrency is not None:
        n_d = max(1, math.ceil(q.concurrency / b - 1e-9))
    else:
        n_d = max(1, int(q.budget / (dec.gpus_per_instance + gpus_pre * per_decode)))
    while (full or q.concurrency is None) and q.rate is None and n_d > 1 and gpus(n_d) > q.budget:
        n_d -= 1  # fill the budget: no traffic stated, or more clients than its largest batches hold
    if gpus(n_d) > q.budget:
        return None
    if c.prefill is not None and not pairs_in_nodes(unit.hardware, n_pre(n_d), gpus_pre, n_d, dec.gpus_per_instance):
        return None  # no network between nodes and no packing that keeps each KV hand-off inside one
    return n_d, n_pre(n_d)


def _bottleneck(m: Metrics) -> str:
    if m.limit.startswith("prefill"):
        return "prefill"
    step = m.decode_step
    if step is None:
        return "-"
    cats = step.by_category()
    return max(CATEGORIES, key=lambda k: cats[k])


def score(q: Question, c: Candidate) -> Scored:
    """Every operating point of one candidate; `best` is the highest tok/s/GPU meeting the SLO."""
    try:
        return _score(q, c)
    except (PlannerError, ValidationError, ZeroDivisionError, OverflowError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return Scored(c, [], error=f"{type(exc).__name__}: {msg}")


def _score(q: Question, c: Candidate) -> Scored:
    unit = deployment(q, c)
    kv_len = q.in_flight_kv()
    cap = max_batch(unit, q.isl, q.osl)
    batches = batch_grid(cap)
    points: list[Point] = []
    evaluated: dict[tuple[int, int], Metrics] = {}
    for b in batches:
        if q.rate is None and q.concurrency is None:
            if (p := _point_at(q, c, unit, b)) is not None:
                points.append(p)
            continue
        # the same deployment under the same traffic gives the same figures: one point, at the decode
        # batch that traffic keeps in flight (the sweep's batch only sized the instances)
        counts = _counts(q, c, unit, b, point(unit, q.isl, q.osl, kv_len, b).tpot_s, b == batches[-1])
        if counts is None or counts in evaluated:
            continue
        dep = _resized(unit, counts)
        m = evaluated[counts] = estimate_deployment(dep, q.isl, q.osl, kv_len, q.concurrency, q.rate)
        if not m.saturated:
            points.append(_point(q, max(1, round(m.decode_batch)), dep, m))
    s = Scored(c, points)
    ok = [p for p in points if p.meets]
    if ok:
        s.best = max(ok, key=lambda p: (p.out_tok_s_per_gpu, -p.batch))
    return s


def batch_grid(cap: int) -> list[int]:
    """The decode batches per instance a candidate is priced at with no traffic stated: powers of two
    up to the KV capacity `cap`, and cap - 2 sqrt(cap), where Poisson arrivals find every slot busy
    about 3% of the time (Erlang C, `planner.model.queueing`): at the capacity itself they have no
    steady state, and one point just below it keeps the throughput a plan would otherwise lose."""
    grid = {min(2**k, cap) for k in range(15) if 2 ** (k - 1) < cap}
    if cap - 2 * math.sqrt(cap) >= 1:
        grid.add(round(cap - 2 * math.sqrt(cap)))
    return sorted(grid)


def _resized(unit: Deployment, counts: tuple[int, int]) -> Deployment:
    return unit.resized({"decode": counts[0], "aggregated": counts[0], "prefill": counts[1]})


def _point(q: Question, batch: int, dep: Deployment, m: Metrics) -> Point:
    p = Point(batch, dep, m, _bottleneck(m))
    p.slack = slack(q, m)
    p.meets = all(v >= 1 for v in p.slack.values())
    return p


def point_at(q: Question, c: Candidate, b: int) -> Point | None:
    """The operating point of a candidate at decode batch `b` under a question with no traffic stated:
    what the sweep evaluates at its powers of two, at any batch (None: over budget or saturated)."""
    return _point_at(q, c, deployment(q, c), b)


def _point_at(q: Question, c: Candidate, unit: Deployment, b: int) -> Point | None:
    kv_len = q.in_flight_kv()
    counts = _counts(q, c, unit, b, point(unit, q.isl, q.osl, kv_len, b).tpot_s)
    if counts is None:
        return None
    dep = _resized(unit, counts)
    m = point(dep, q.isl, q.osl, kv_len, b, poisson=True)  # verified under Poisson arrivals at its rate
    return None if m.saturated else _point(q, b, dep, m)


def score_many(q: Question, cands: list[Candidate]) -> list[Scored]:
    return [score(q, c) for c in cands]

"""`planner plan`: search deployments for a question and recommend the best.

Two stages. (1) Every candidate of `planner.search.space` is scored by `planner.search.score` (the step-cost
model, means) on a local process pool, or on a Ray cluster with `ray_address`. (2) The top
candidates by the objective are simulated under the question's traffic and their percentiles checked
against the SLO (`planner.search.verify`: the first `verify_top` side by side in forked processes on a
local run, one after another under Ray); verified candidates rank first. When nothing meets the SLO the answer names the
closest candidate and the constraint that binds, as an outcome, not an exception.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import Any

from planner.inputs.edge import one_line
from planner.inputs.question import MAX_PLAN_GPUS, Question
from planner.launch import UNAVAILABLE, requirements
from planner.model.context import context_problem
from planner.model.deployment import Deployment
from planner.model.metrics import Metrics
from planner.search.ray_pool import score_on_ray
from planner.search.score import Point, Scored, score_many
from planner.search.space import PRUNE_REASONS, Candidate, candidates
from planner.search.verify import STOPPED, meets_slo, missed_most, verify, verify_ranked
from roofline.catalog import get_hardware, get_model
from roofline.catalog.schema import HardwareSpec, ModelSpec
from roofline.errors import PlannerError


@dataclass(slots=True)
class Recommendation:
    """One recommended deployment: its stage-1 estimate and, where it was simulated, the
    simulated figures and SLO verdict. Every view (table, JSON, CSV, dashboard) renders this."""

    cand: Candidate
    point: Point  # the sized deployment and its estimate
    simulated: Metrics | None = None
    meets: bool | None = None  # the simulated percentiles meet the SLO (None: not simulated)
    slack: dict[str, float] = field(default_factory=dict)  # target / achieved, by the figures shown
    binding: str = ""  # for the closest infeasible one: the constraint that binds
    fallbacks: list[Point] = field(default_factory=list)  # lower operating points that also met stage 1

    @property
    def deployment(self) -> Deployment:
        return self.point.deployment

    @property
    def metrics(self) -> Metrics:
        """The figures shown: simulated where simulated, else the estimate."""
        return self.simulated or self.point.metrics

    @property
    def method(self) -> str:
        return self.metrics.method


@dataclass(slots=True)
class Answer:
    question: Question
    scored: int
    pruned: Counter[str]
    simulated: int
    recommendations: list[Recommendation]
    feasible: bool
    fronts: dict[str, list[tuple[float, float, str]]] = field(default_factory=dict)  # mode -> (user, gpu, label)
    notes: list[str] = field(default_factory=list)
    front_points: dict[str, Point] = field(default_factory=dict)  # each front label's operating point
    scored_modes: Counter[str] = field(default_factory=Counter)  # candidates scored per mode (an empty front's why)


# why scoring (pricing the traffic on a candidate that passed the memory check) failed
SCORE_REASONS = {"InsufficientMemoryError": "no memory left for this traffic's KV and activations"}


def objective(q: Question, p: Point, m: Metrics | None = None, tput: float | None = None) -> float:
    """Larger is better; from `tput` (tokens/s per GPU) where given, else `m` (simulated figures) where
    given, else the point's estimate. Throughput is compared to a millionth of a token/s, so rows equal
    but for float noise keep the search's order."""
    tput = round(tput if tput is not None else (m or p.metrics).output_tok_s_per_gpu, 6)
    if q.optimize == "gpus":
        return -p.gpus + tput * 1e-9
    return tput  # cost per token is price / throughput per GPU: same order


def _chunks(cands: list[Candidate], n: int) -> list[list[Candidate]]:
    groups: dict[tuple[Any, ...], list[Candidate]] = {}
    for c in cands:  # keep candidates that share a decode pool together, so they share its cache
        groups.setdefault((c.decode, c.precision, c.mtp), []).append(c)
    out: list[list[Candidate]] = [[] for _ in range(n)]
    for i, g in enumerate(sorted(groups.values(), key=len, reverse=True)):
        min(out, key=len).extend(g) if i >= n else out[i].extend(g)
    return [c for c in out if c]


def _score_parallel(q: Question, cands: list[Candidate], workers: int, ray_address: str | None) -> list[Scored]:
    if ray_address:
        return score_on_ray(q, _chunks(cands, max(workers, 1) * 4), ray_address)
    if workers <= 1 or len(cands) < 200:
        return score_many(q, cands)
    with ProcessPoolExecutor(workers, mp_context=get_context("fork")) as pool:
        parts = pool.map(score_many, [q] * workers, _chunks(cands, workers))
        return [s for part in parts for s in part]


def pareto(points: list[tuple[float, float, str]]) -> list[tuple[float, float, str]]:
    """Non-dominated (tok/s/user, tok/s/GPU) points, by increasing tok/s per user."""
    front: list[tuple[float, float, str]] = []
    for user, gpu, label in sorted(points, key=lambda t: (-t[0], -t[1])):
        if not front or gpu > front[-1][1]:
            front.append((user, gpu, label))
    return sorted(front)


def _closest(q: Question, scored: list[Scored]) -> Recommendation | None:
    best: tuple[float, Scored, Point] | None = None
    for s in scored:
        for p in s.points:
            worst = min(p.slack.values()) if p.slack else 1.0
            if best is None or worst > best[0] or (worst == best[0] and objective(q, p) > objective(q, best[2])):
                best = (worst, s, p)
    if best is None:
        return None
    _, s, p = best
    binding = missed_most(p.slack) if p.slack else "gpu budget"
    return Recommendation(s.cand, p, slack=dict(p.slack), binding=binding)


def _rank(q: Question, r: Recommendation) -> tuple[int, float, float]:
    """Verified, then unverified (estimates, and simulations that never settled), then misses; within a
    group the objective, then the lower TPOT. At a stated rate every row that keeps up delivers the offered
    tokens, so the objective is the offered tokens per GPU rather than the simulation's output, which
    differs by sampling noise: rows on as many GPUs tie and the lower TPOT goes first (gpt-oss-120b on 3
    H100 at 5 req/s ranked 1,246.8 tok/s/GPU at TPOT p90 41.6 ms above 1,246.3 at 36.7: trial)."""
    group = 0 if r.meets else (1 if r.simulated is None or unsettled(r.simulated) else 2)
    # at a stated rate, the offered tokens per GPU exactly (the estimate's solve differs in the 7th digit)
    offered = q.rate * q.osl / max(r.point.gpus, 1) if q.rate is not None else None
    return group, -objective(q, r.point, r.simulated, offered), (r.simulated or r.point.metrics).tpot_s


def unsettled(m: Metrics) -> bool:
    """A simulation that did not reach a steady state without being over capacity (its halves still
    disagree after the longest run, or it fills and drains throughout): it neither verifies nor refutes the
    SLO, unless both of its halves miss a target, the later no better (a miss: `misses_as_it_settles`)."""
    summary = m.summary or {}
    settling = summary.get("misses_as_it_settles")  # both halves miss, the later no better: a miss
    return summary.get("steady") is False and not summary.get("overloaded") and not settling


def plan(
    q: Question,
    workers: int | None = None,
    ray_address: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Answer:
    say = progress or (lambda _msg: None)
    m, hw = get_model(q.model), get_hardware(q.hardware)
    problem = context_problem(m, q.isl, q.osl)
    if problem:
        raise PlannerError(problem)
    cands, pruned = candidates(q, m, hw)
    say(f"scoring {len(cands)} candidates")
    jobs = workers or os.cpu_count() or 1
    all_scored = _score_parallel(q, cands, jobs, ray_address)
    for s in all_scored:
        if s.error:
            kind = s.error.split(":")[0]  # scoring failed: the traffic, not only the weights, is priced
            pruned[SCORE_REASONS.get(kind, PRUNE_REASONS.get(kind, kind))] += 1
    scored = [s for s in all_scored if not s.error]
    fronts = _fronts(q, scored)
    ranked = sorted((s for s in scored if s.best), key=lambda s: -objective(q, s.best))  # type: ignore[arg-type]
    if not ranked:
        answer = _nothing_ranked(q, m, hw, scored, pruned, fronts, say)
        answer.front_points = _front_points(fronts, scored)
        answer.scored_modes = Counter(s.cand.mode for s in scored)
        return answer
    recs = [
        Recommendation(s.cand, best, slack=dict(best.slack), fallbacks=_lower(q, s))
        for s in _distinct(ranked, lambda s: s.best is not None and _loadable(q, s.best))
        if (best := s.best) is not None
    ]
    failed: list[str] = []
    workers = 1 if ray_address else jobs
    best_first = lambda p: objective(q, p)  # noqa: E731
    simulated = verify_ranked(q, recs, say, failed, workers, best_first) if q.verify_top else 0
    recs.sort(key=lambda r: _rank(q, r))
    notes: list[str] = failed + _context(q)
    feasible = bool(recs) and (recs[0].meets is True or q.verify_top == 0)
    if q.verify_top == 0:
        notes.append("not simulated (verify_top: 0): figures are estimates")
    elif not feasible and not any(r.simulated is not None for r in recs):
        notes.append("no verifying simulation completed (the reasons above): every row is an estimate, none verified")
    elif not feasible:
        sims = [r for r in recs if r.simulated is not None]
        closest = max(sims, key=lambda r: min(r.slack.values()) if r.slack else 0.0)
        closest.binding = missed_most(closest.slack)
        recs = [closest] + [r for r in recs if r is not closest]
        limited = any(n.startswith(STOPPED) for n in failed)
        verified = "was verified to meet" if any(unsettled(r.simulated) for r in sims if r.simulated) else "meets"
        notes.append(
            (
                f"none of the {len(sims)} deployments simulated before the verification limit {verified} the SLO "
                "(others, and lower batches, were left unsimulated; a run that never settles verifies nothing): "
                "the closest simulated one and its binding constraint are shown first"
            )
            if limited
            else f"no deployment {verified} the SLO in simulation: the closest simulated one and its binding "
            "constraint are shown first"
        )
    points, modes = _front_points(fronts, scored), Counter(s.cand.mode for s in scored)
    return Answer(q, len(scored), pruned, simulated, recs, feasible, fronts, notes, points, modes)


def _nothing_ranked(
    q: Question,
    m: ModelSpec,
    hw: HardwareSpec,
    scored: list[Scored],
    pruned: Counter[str],
    fronts: dict[str, list[tuple[float, float, str]]],
    say: Callable[[str], None],
) -> Answer:
    """The answer where no candidate meets the SLO by estimate: the closest one, simulated (whether it
    carries the load at all, or meets after all), or why there is none to show."""
    closest = _closest(q, scored)
    note = "no candidate meets the SLO (estimate); the closest one and its binding constraint are shown"
    if closest is None:  # nothing to show: say why rather than promise a row
        why = ", ".join(f"{n} {reason}" for reason, n in pruned.most_common()) or "none"
        served = "none has an operating point that serves this traffic; " if scored else ""
        more = (  # the traffic, not the weights, is what the budget cannot hold
            f"; a larger budget may serve it (planner plan {'--gpus' if q.gpus is not None else '--max-gpus'} N, "
            f"up to {MAX_PLAN_GPUS:,})"
            if scored and q.budget < MAX_PLAN_GPUS
            else ""
        )
        note = (
            f"no deployment of {q.model} on {q.hardware} within {q.budget} GPUs to show: "
            f"{len(scored)} scored, {served}pruned: {why}"
        ) + (more if scored else _fewest_gpus(q, m, hw, pruned))
    said, simulated = [note, *_context(q)], 0
    if closest is not None and q.verify_top:  # its simulated figures, e.g. whether it carries the load at all
        say(f"simulating the closest, {closest.point.deployment.describe()} at batch {closest.point.batch}")
        try:
            sim = verify(q, closest.point)
        except PlannerError as exc:
            said.insert(1, f"not simulated, {closest.point.label}: {one_line(str(exc), 300)}")
        else:
            ok, slack = meets_slo(q, sim)
            closest.simulated, closest.meets, closest.slack, simulated = sim, ok, slack, 1
            closest.binding = missed_most(slack) if slack else ("" if ok else closest.binding)
            if ok:  # the estimate was pessimistic: the simulation verifies it
                said[0] = "no candidate meets the SLO by estimate; the closest one meets it in simulation"
    feasible = closest is not None and closest.meets is True
    return Answer(q, len(scored), pruned, simulated, [closest] if closest else [], feasible, fronts, said)


def _fewest_gpus(q: Question, m: ModelSpec, hw: HardwareSpec, pruned: Counter[str]) -> str:
    """Where nothing was scored because no deployment within the budget fits (its weights, or the KV of
    one sequence beside them), the smallest power-of-two budget whose search space holds one that fits
    (the same candidates and memory check, a larger budget)."""
    if not pruned.get(PRUNE_REASONS["InsufficientMemoryError"]) or any(
        r != PRUNE_REASONS["InsufficientMemoryError"] and r != "over the GPU budget" for r in pruned
    ):
        return ""
    n = 1
    while n <= MAX_PLAN_GPUS:
        if n > q.budget and candidates(q.model_copy(update={"gpus": None, "max_gpus": n}), m, hw)[0]:
            flag = "--gpus" if q.gpus is not None else "--max-gpus"  # as the question was asked: the two do not mix
            return f"; the weights first fit within {n} GPUs (planner plan {flag} {n})"
        n *= 2
    return f"; the weights fit no deployment within {n // 2} GPUs"


def _context(q: Question) -> list[str]:
    """What the estimates assumed for the context in flight, where it is not isl + osl/2."""
    if q.kv_len is None or q.kv_len == q.isl + q.osl / 2:
        return []
    return [
        f"estimates price a mean context in flight of {q.kv_len:,.0f} tokens per sequence (kv_len: stated, "
        f"or sum L(I + L/2) / sum L over the simulation's lengths); fixed lengths would give {q.isl + q.osl / 2:,.0f}"
    ]


def _fronts(q: Question, scored: list[Scored]) -> dict[str, list[tuple[float, float, str]]]:
    fronts: dict[str, list[tuple[float, float, str]]] = {}
    for mode in q.modes:
        pts = [
            (p.out_tok_s_per_user, p.out_tok_s_per_gpu, p.label)
            for s in scored
            if s.cand.mode == mode
            for p in s.points
            if all(v >= 1 for k, v in p.slack.items() if k.startswith("ttft"))
        ]
        fronts[mode] = pareto(pts)
    return fronts


def _front_points(fronts: dict[str, list[tuple[float, float, str]]], scored: list[Scored]) -> dict[str, Point]:
    """The operating point behind each front label (what `planner compare --json` exports as a scenario)."""
    labels = {lab for front in fronts.values() for _, _, lab in front}
    return {p.label: p for s in scored for p in s.points if p.label in labels}


def _lower(q: Question, s: Scored) -> list[Point]:
    best = s.best
    assert best is not None
    lower = [p for p in s.points if p.meets and p.batch < best.batch]
    return sorted(lower, key=lambda p: -objective(q, p))


def _distinct(ranked: list[Scored], loadable: Callable[[Scored], bool], limit: int = 20) -> list[Scored]:
    """Best candidates, skipping ones that differ from a better one only in the prefill layout; where
    none of the first `limit` loads a checkpoint that exists (`loadable`), the best that does comes
    after them (new-user trial: Kimi K2.5's INT4 config.json listed 20 NVFP4 and FP8 rows, none of
    which its own weights load)."""
    seen: set[tuple[Any, ...]] = set()
    out: list[Scored] = []
    for s in ranked:
        key = (s.cand.mode, s.cand.decode, s.cand.precision, s.cand.mtp)
        if key in seen:
            continue
        seen.add(key)
        if len(out) < limit:
            out.append(s)
            if len(out) == limit and any(map(loadable, out)):
                return out
        elif loadable(s):
            return [*out, s]
    return out


def _loadable(q: Question, p: Point) -> bool:
    """The deployment's weights exist: a catalog checkpoint, `--checkpoint`, or a config.json's own."""
    return not any(UNAVAILABLE in n for n in requirements(q, p.deployment))


def cost_per_mtok(q: Question, r: Recommendation) -> float:
    """USD per million output tokens at the throughput shown (simulated where simulated)."""
    tput = r.metrics.output_tok_s_per_gpu
    return q.price_per_gpu_hour / 3600 / tput * 1e6 if tput > 0 else math.inf

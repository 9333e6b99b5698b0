"""`planner plan`: search deployments for a question and recommend the best.

Two stages. (1) Every candidate of `planner.space` is scored by `planner.score` (the step-cost
model, means) on a local process pool, or on a Ray cluster with `ray_address`. (2) The top
candidates by the objective are simulated under the question's traffic and their p90s checked
against the SLO; verified candidates rank first. When nothing meets the SLO the answer names the
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

from planner.question import Question
from planner.ray_pool import score_on_ray
from planner.score import Point, Scored, score_many
from planner.space import Candidate, candidates
from planner.verify import Verified, verify
from roofline.catalog import get_hardware, get_model


@dataclass(slots=True)
class Recommendation:
    cand: Candidate
    point: Point
    verified: Verified | None = None
    binding: str = ""  # for the closest infeasible one: the constraint that binds
    fallbacks: list[Point] = field(default_factory=list)  # lower operating points that also met stage 1


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


def objective(q: Question, p: Point) -> float:
    """Larger is better."""
    if q.optimize == "gpus":
        return -p.gpus + p.out_tok_s_per_gpu * 1e-9
    return p.out_tok_s_per_gpu  # cost per token is price / throughput per GPU: same order


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
    binding = min(p.slack, key=p.slack.__getitem__) if p.slack else "gpu budget"
    return Recommendation(s.cand, p, binding=binding)


def plan(
    q: Question,
    workers: int | None = None,
    ray_address: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Answer:
    say = progress or (lambda _msg: None)
    m, hw = get_model(q.model), get_hardware(q.hardware)
    cands, pruned = candidates(q, m, hw)
    say(f"scoring {len(cands)} candidates")
    scored = _score_parallel(q, cands, workers or os.cpu_count() or 1, ray_address)
    fronts: dict[str, list[tuple[float, float, str]]] = {}
    for mode in q.modes:
        pts = [
            (p.out_tok_s_per_user, p.out_tok_s_per_gpu, describe(s.cand, p))
            for s in scored
            if s.cand.mode == mode
            for p in s.points
            if p.slack.get("ttft_p90_ms", 1) >= 1
        ]
        fronts[mode] = pareto(pts)
    ranked = sorted((s for s in scored if s.best), key=lambda s: -objective(q, s.best))  # type: ignore[arg-type]
    if not ranked:
        closest = _closest(q, scored)
        recs = [closest] if closest else []
        return Answer(
            q,
            len(cands),
            pruned,
            0,
            recs,
            False,
            fronts,
            ["no candidate meets the SLO; the closest one and its binding constraint are shown"],
        )
    recs = [Recommendation(s.cand, s.best, fallbacks=_lower(q, s)) for s in _distinct(ranked)]  # type: ignore[arg-type]
    simulated = 0
    if q.verify_top:
        for r in recs[: q.verify_top]:
            for point in [r.point, *r.fallbacks[:RETRIES]]:  # step down the batch until the p90s meet
                say(f"simulating {describe(r.cand, point)} at batch {point.batch}")
                r.point, r.verified = point, verify(q, r.cand, point)
                simulated += 1
                if r.verified.meets:
                    break
        # simulator-confirmed first, then not simulated, then those whose simulated p90s miss
        recs.sort(
            key=lambda r: (0 if r.verified and r.verified.meets else 2 if r.verified else 1, -objective(q, r.point))
        )
    feasible = any(r.verified is None or r.verified.meets for r in recs[: max(q.verify_top, 1)])
    notes = [] if feasible else ["the simulator's p90s miss the SLO for every verified candidate"]
    return Answer(q, len(cands), pruned, simulated, recs, feasible, fronts, notes)


RETRIES = 2  # lower operating points tried when the simulator's p90s miss the SLO


def _lower(q: Question, s: Scored) -> list[Point]:
    best = s.best
    assert best is not None
    lower = [p for p in s.points if p.meets and p.batch < best.batch]
    return sorted(lower, key=lambda p: -objective(q, p))


def _distinct(ranked: list[Scored], limit: int = 20) -> list[Scored]:
    """Best candidates, skipping ones that differ from a better one only in the prefill layout."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for s in ranked:
        key = (s.cand.mode, s.cand.decode, s.cand.precision, s.cand.mtp)
        if key in seen:
            continue
        seen.add(key)
        out.append(s)
        if len(out) == limit:
            break
    return out


def describe(c: Candidate, p: Point) -> str:
    if c.mode == "aggregated":
        return f"{p.decode_instances}x agg {c.decode.label}"
    assert c.prefill is not None
    return f"{p.prefill_instances}x prefill {c.prefill.label} + {p.decode_instances}x decode {c.decode.label}"


def cost_per_mtok(q: Question, p: Point) -> float:
    return q.price_per_gpu_hour / 3600 / max(p.out_tok_s_per_gpu, 1e-9) * 1e6 if p.out_tok_s_per_gpu else math.inf

"""Stage 2 of the search: simulate a scored deployment under the question's traffic and check
the SLO's p90s. Traffic: the question's concurrency (closed loop) or rate (Poisson); with
neither, Poisson arrivals at the operating point's request rate, i.e. independent users, as in
production (a closed loop of identical requests synchronises into cohorts and overstates
prefill queueing). The question's `simulation:` section (a trace, bursty arrivals) replaces
the arrival process when given. The deployment simulated is the very object that was scored,
with the one simulation configuration of a deployment and its traffic
(`planner.model.simulate.standard_config`: the same run `planner simulate` makes of the exported
scenario).

`verify_ranked` spends the plan's simulation budget, best estimate first: recommendations' best
points and, for those that missed, their lower swept operating points, until enough meet; then, where
a lower batch met and a higher one missed, a bisection between them (`BISECTIONS` batches), so a plan
is not left at half the batch the SLO allows because the sweep steps in powers of two. The best points of the first
`verify_top` recommendations, which every plan simulates, run side by side in forked processes when
`workers` allows (one after another if the pool breaks); the figures are the same as one after another
(each simulation is seeded), and their CPU time counts against the budget as if they had run here.
Points simulated later (another recommendation, a lower batch, a bisection) run here, in order.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from heapq import heappop, heappush
from itertools import count
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING

from planner.inputs.edge import one_line
from planner.inputs.question import Question, target_parts
from planner.inputs.scenario import SLOSpec
from planner.model.defaults import Resolved
from planner.model.metrics import Metrics
from planner.model.simulate import run_simulation, simulated_metrics
from planner.search.score import Point, point_at
from roofline.errors import PlannerError

if TYPE_CHECKING:
    from planner.search.plan import Recommendation

MAX_SIMULATED = 24  # simulations one plan spends looking for verified recommendations ...
SIMULATION_BUDGET_S = 5.0  # ... and CPU seconds (at least `verify_top` simulations always run) ...
# ... and, with or without a verified answer, the CPU seconds after which no further simulation starts:
# a small model on a rack (gpt-oss-120b on 72 GB200 GPUs) keeps ~40,000 requests in flight, so each of
# its simulations runs ~130,000-200,000 requests (~10 s); 22 of them took a plan 3.5 minutes
VERIFY_LIMIT_S = 40.0
STOPPED = "verification stopped"  # how the note the limit leaves begins (planner.search.plan reads it)
RETRIES = 2  # lower swept operating points tried when the simulated percentiles miss the SLO
BISECTIONS = 2  # batches simulated between a swept batch that met and the next one up that missed


def as_resolved(q: Question, p: Point) -> Resolved:
    """A scored point with the question's traffic: what `planner simulate` and `estimate` take."""
    rate = None
    if q.concurrency is None:
        rate = q.rate if q.rate is not None else p.metrics.output_tok_s / q.osl
    t = q.slo.target
    slo = SLOSpec(ttft_ms=t("ttft"), tpot_ms=t("tpot"), e2e_ms=t("e2e"), statistic=q.slo.statistic)
    name = f"{q.model} on {p.gpus}x {q.hardware}"
    conc = float(q.concurrency) if q.concurrency is not None else None
    # a config.json model is named by its absolute path, so an exported scenario reruns from any folder
    ref = str(Path(q.model).resolve()) if q.model.endswith(".json") else q.model
    return Resolved(
        p.deployment, q.isl, q.osl, q.in_flight_kv(), conc, rate, [], "end-to-end", slo, q.simulation, name, ref
    )


def meets_slo(q: Question, m: Metrics) -> tuple[bool, dict[str, float]]:
    """Whether the figures meet every target (each at its percentile when simulated, means when
    estimated), and target / achieved per target. A simulation that is not a steady state (its summary's
    `steady`: over capacity, or its halves still disagree after the longest run, as near capacity a queue
    wanders without bound) meets none, whatever its finite run's percentiles are."""
    slack = {}
    for key, target in q.slo.targets().items():
        name, stat = target_parts(key)
        if name == "tpot" and q.osl <= 1:  # a one-token answer has no time per output token
            continue
        got = m.latency_ms(name, stat if m.method == "simulate" else "mean")
        slack[key] = target / got if got else (0.0 if got is None else float("inf"))
    unsteady = m.method == "simulate" and (m.summary or {}).get("steady") is False
    return not unsteady and all(v >= 1 for v in slack.values()), slack


def missed_most(slack: dict[str, float]) -> str:
    """The target a row misses most: the least target / achieved, where it is below 1; '' where every target
    is met (a row that fails only for not settling, or for its queue growing, binds no target)."""
    if not slack:
        return ""
    key = min(slack, key=slack.__getitem__)
    return key if slack[key] < 1 else ""


def verify(q: Question, p: Point) -> Metrics:
    """The simulated figures of a scored point under the question's traffic (the record carries
    `converged`)."""
    res = as_resolved(q, p)
    _, summary = run_simulation(res)
    return simulated_metrics(res, summary)


def _timed(q: Question, p: Point) -> tuple[Metrics | None, str | None, float]:
    """`verify` in a worker process: the figures or the reason they could not be had, and the CPU time."""
    start = time.process_time()
    try:
        return verify(q, p), None, time.process_time() - start
    except PlannerError as exc:
        return None, str(exc), time.process_time() - start


def _first_wave(
    q: Question, points: list[Point], workers: int
) -> list[tuple[Metrics | None, str | None, float]] | None:
    """The points' simulations in forked worker processes, or None where the pool broke (a worker killed):
    the caller then simulates them one after another."""
    try:
        with ProcessPoolExecutor(min(workers, len(points)), mp_context=get_context("fork")) as pool:
            return list(pool.map(_timed, [q] * len(points), points))
    except (BrokenProcessPool, OSError):
        return None


def _ahead(
    q: Question, recs: list[Recommendation], say: Callable[[str], None], workers: int
) -> dict[int, tuple[Point, tuple[Metrics | None, str | None, float]]]:
    """id(rec) -> (the point simulated, its result) for the best points of the first `verify_top`
    recommendations, simulated side by side (empty with one worker or one point). The recommendations
    outlive the plan's verification, so their ids are stable keys."""
    first = recs[: q.verify_top]
    if workers <= 1 or len(first) <= 1:
        return {}
    say(f"simulating {len(first)} deployments side by side")
    results = _first_wave(q, [r.point for r in first], workers)
    return {id(r): (r.point, res) for r, res in zip(first, results or [], strict=False)}


def _plan_words(why: str) -> str:
    """A simulation's error as a plan says it: the step limit's advice names the scenario fields a plan
    takes only from a --workload file (it told a plan's user to 'use fewer requests or a larger max_steps')."""
    advice = "; use fewer requests or a larger max_steps"
    if why.startswith("simulation.max_steps: stopped"):
        return why.replace(advice, "; a --workload file's simulation.max_steps raises it")
    return why


@dataclass(slots=True)
class _Budget:
    """What one plan's verification has spent: simulations, and CPU seconds here and in workers."""

    start: float  # process_time when the verification began
    simulated: int = 0
    elsewhere: float = 0.0  # CPU seconds of simulations run in worker processes
    stopped: list[str] = field(default_factory=list)  # the note, once VERIFY_LIMIT_S stops the verification

    def cpu(self) -> float:
        return time.process_time() - self.start + self.elsewhere

    def spent(self) -> bool:
        return self.simulated >= MAX_SIMULATED or self.cpu() > SIMULATION_BUDGET_S

    def limit(self) -> bool:
        """Past VERIFY_LIMIT_S no simulation starts (the first time, the note says so)."""
        if self.cpu() <= VERIFY_LIMIT_S:
            return False
        if not self.stopped:
            self.stopped.append(
                f"{STOPPED} after {self.simulated} simulations and {self.cpu():,.0f} CPU seconds "
                f"(the plan's limit, {VERIFY_LIMIT_S:g} s; a simulation that has begun runs to its end): rows not "
                "simulated show estimates"
            )
        return True


def verify_ranked(
    q: Question,
    recs: list[Recommendation],
    say: Callable[[str], None],
    failed: list[str] | None = None,
    workers: int = 1,
    value: Callable[[Point], float] | None = None,
) -> int:
    """Simulate until `verify_top` recommendations meet the SLO or the simulation budget is spent (the
    CPU-time part only once one meets), best estimate first: the points waiting are each
    recommendation's best point and, once a point's p90s miss, its next lower operating point (a
    smaller batch of the same deployment, up to RETRIES), and the one simulated next is the waiting
    point of the highest `value` (the plan's objective by estimate; without one, rank order, every best
    point before any lower one). So a deployment that misses at batch 32 is tried at batch 16 before a
    deployment whose best point promises a sixth of its throughput (new-user trial: DeepSeek-V3 on 8 RTX
    PRO 6000 answered 9.9 tok/s/GPU with a row at 52.3 verified one batch down). Then, for one that met
    only lower down, batches between (no traffic stated only: under a stated rate or concurrency the
    batch is what the traffic keeps in flight). A point the simulator cannot build (e.g. its KV pool
    cannot hold two prefill budgets) stays an estimate, and `failed` says why. With `workers` > 1 the
    first `verify_top` recommendations' best points are simulated side by side first. No simulation
    starts once the verification has spent VERIFY_LIMIT_S CPU seconds; `failed` then says so. Returns
    the number of simulations run."""
    budget = _Budget(time.process_time())
    missed: dict[int, int] = {}  # id(rec) -> the lowest batch whose simulation missed
    wave = _ahead(q, recs, say, workers)

    def run(r: Recommendation, p: Point) -> bool:
        ahead = wave.pop(id(r), None)
        if ahead is not None and ahead[0] is p:
            m, why, cpu = ahead[1]
            budget.elsewhere += cpu
        else:
            say(f"simulating {p.deployment.describe()} at batch {p.batch}")
            try:
                m, why = verify(q, p), None
            except PlannerError as exc:
                m, why = None, str(exc)
        if m is None:
            if failed is not None:
                failed.append(f"not simulated, {p.label}: {one_line(_plan_words(str(why)), 300)}")
            return False
        budget.simulated += 1
        ok, slack = meets_slo(q, m)
        if not ok:
            missed[id(r)] = min(missed.get(id(r), p.batch), p.batch)
        if r.simulated is None or ok or not r.meets:
            r.point, r.simulated, r.meets, r.slack = p, m, ok, slack
        return ok

    def enough() -> bool:
        met = sum(bool(r.meets) for r in recs)
        # the CPU budget stops a plan that has a verified answer; one with none keeps trying (up to
        # MAX_SIMULATED, and within VERIFY_LIMIT_S) the deployments and lower operating points that meet
        # by estimate
        out = budget.simulated >= MAX_SIMULATED or (met > 0 and budget.simulated >= q.verify_top and budget.spent())
        # the first wave's simulations have run already: their results are taken whatever the limit
        return met >= q.verify_top or out or (not wave and budget.limit())

    def finish() -> int:
        if failed is not None:
            failed.extend(budget.stopped)
        return budget.simulated

    score = value or (lambda _p: 0.0)
    order = count()  # ties (and every point, without `value`) in the order they were queued
    waiting: list[tuple[int, float, int, Recommendation, Point, int]] = []
    for r in recs:  # the first wave's results are in hand: they are taken first
        heappush(waiting, (0 if id(r) in wave else 1, -score(r.point), next(order), r, r.point, 0))
    while waiting:
        if enough():
            return finish()
        *_, r, p, lowered = heappop(waiting)
        if r.meets:
            continue
        simulated_before = budget.simulated
        if not run(r, p) and budget.simulated > simulated_before and lowered < min(RETRIES, len(r.fallbacks)):
            nxt = r.fallbacks[lowered]
            heappush(waiting, (1, -score(nxt), next(order), r, nxt, lowered + 1))
    if q.rate is None and q.concurrency is None:
        _bisect(q, recs, missed, budget, run)
    return finish()


def _bisect(
    q: Question,
    recs: list[Recommendation],
    missed: dict[int, int],
    budget: _Budget,
    run: Callable[[Recommendation, Point], bool],
) -> None:
    """For each recommendation that met only below a batch that missed, `BISECTIONS` batches between."""
    for r in recs:
        if not r.meets or id(r) not in missed:
            continue
        lo, hi = r.point.batch, missed[id(r)]
        for _ in range(BISECTIONS):
            mid = (lo + hi) // 2
            if mid <= lo or budget.spent() or budget.limit():
                break
            between = point_at(q, r.cand, mid)
            if between is not None and between.meets and run(r, between):
                lo = mid
            else:
                hi = mid

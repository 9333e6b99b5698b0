"""Stage 2 of the search: simulate a scored deployment under the question's traffic and check
the SLO's p90s. Traffic: the question's concurrency (closed loop) or rate (Poisson); with
neither, Poisson arrivals at the operating point's request rate, i.e. independent users, as in
production (a closed loop of identical requests synchronises into cohorts and overstates
prefill queueing). The question's `simulation:` section (a trace, bursty arrivals) replaces
the arrival process when given. The deployment simulated is the very object that was scored,
with the one simulation configuration of a deployment and its traffic
(`planner.model.simulate.standard_config`: the same run `planner simulate` makes of the exported
scenario).
"""

from __future__ import annotations

from planner.inputs.question import Question
from planner.inputs.scenario import SLOSpec
from planner.model.defaults import Resolved
from planner.model.metrics import Metrics
from planner.model.simulate import run_simulation, simulated_metrics
from planner.search.score import Point


def as_resolved(q: Question, p: Point) -> Resolved:
    """A scored point with the question's traffic: what `planner simulate` and `estimate` take."""
    rate = None
    if q.concurrency is None:
        rate = q.rate if q.rate is not None else p.metrics.output_tok_s / q.osl
    slo = SLOSpec(ttft_ms=q.slo.ttft_p90_ms, tpot_ms=q.slo.tpot_p90_ms, e2e_ms=q.slo.e2e_p90_ms)
    name = f"{q.model} on {p.gpus}x {q.hardware}"
    conc = float(q.concurrency) if q.concurrency is not None else None
    return Resolved(p.deployment, q.isl, q.osl, q.in_flight_kv(), conc, rate, [], "end-to-end", slo, q.simulation, name)


def meets_slo(q: Question, m: Metrics) -> tuple[bool, dict[str, float]]:
    """Whether the figures meet every target (p90s when simulated, means when estimated), and
    target / achieved per target."""
    stat = "p90" if m.method == "simulate" else "mean"
    slack = {}
    for key, target in q.slo.targets().items():
        if key.startswith("tpot") and q.osl <= 1:  # a one-token answer has no time per output token
            continue
        got = m.latency_ms(key.split("_")[0], stat)
        slack[key] = target / got if got else (0.0 if got is None else float("inf"))
    return all(v >= 1 for v in slack.values()), slack


def verify(q: Question, p: Point) -> Metrics:
    """The simulated figures of a scored point under the question's traffic (the record carries
    `converged`)."""
    res = as_resolved(q, p)
    _, summary = run_simulation(res)
    return simulated_metrics(res, summary)

"""When a simulation's figures can be read: whether its measured window has settled (output throughput and mean
TPOT agree over the window's halves within `CONVERGENCE`), whether its SLO percentile rests on enough measured
requests (`few_above`), and what a run that has not settled, or that is too short, means in words.
`planner.model.simulate` runs the simulations and decides from these when to double a run; this module runs none.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from planner.model.defaults import Resolved
from planner.model.metrics import phase_models
from simulator import SimConfig, SimResult
from simulator.metrics import latencies, measured_mask

CONVERGENCE = 0.05  # relative difference of throughput (and mean TPOT) between the window's halves
FEW_ABOVE = 10  # measured requests above an SLO's percentile under which its reading rests on a handful


def window_halves(result: SimResult) -> tuple[float, float]:
    """Output tokens/s over the first and second half of the measured window; for an open loop, as a
    share of the output tokens the half's arrivals ask for, so that the Poisson noise of the arrivals
    (a 300-arrival half is ~6% light or heavy by chance) does not read as a run still settling."""
    out = result.extra["out_tokens"]
    t0, t1 = result.window
    mid = 0.5 * (t0 + t1)
    if t1 <= t0 or not len(out):
        return 0.0, 0.0
    first = out[(out[:, 0] >= t0) & (out[:, 0] < mid), 1].sum() / (mid - t0)
    second = out[(out[:, 0] >= mid) & (out[:, 0] <= t1), 1].sum() / (t1 - mid)
    if result.extra.get("open_loop") and result.extra.get("warmup_by") != "completion":
        t = result.table
        asked = [float(t.osl[(t.arrival >= a) & (t.arrival < b) & ~t.dropped].sum()) for a, b in ((t0, mid), (mid, t1))]
        if all(asked):
            return float(first * (mid - t0) / asked[0]), float(second * (t1 - mid) / asked[1])
    return float(first), float(second)


def _arrival_halves(result: SimResult) -> tuple[np.ndarray, np.ndarray]:
    """The measured requests that arrived in the first and in the second half of the window (masks)."""
    t, m = result.table, measured_mask(result)
    t0, t1 = result.window
    early = m & (t.arrival < 0.5 * (t0 + t1))
    return early, m & ~early


def tpot_halves(result: SimResult) -> tuple[float, float]:
    """Mean TPOT (s) of the measured requests that arrived in the first and second half of the
    window: a batch still growing shows as a drift here while the throughput already matches the
    offered load."""
    tpot = latencies(result)["tpot"]
    early, late = _arrival_halves(result)
    early, late = early & np.isfinite(tpot), late & np.isfinite(tpot)
    if not early.any() or not late.any():
        return 0.0, 0.0
    return float(tpot[early].mean()), float(tpot[late].mean())


def _gap(a: float, b: float) -> float:
    return abs(a - b) / max(a, b) if max(a, b) > 0 else 0.0


def converged(result: SimResult) -> tuple[bool, float]:
    """Output throughput and mean TPOT agree within `CONVERGENCE` over the window's halves. A window
    with no output token in it, where requests decode at all, shows nothing settling (10 requests whose
    arrivals span 10 ms read 0 tok/s and 'converged'; trial, nineteenth session): gap 1. One-token answers
    count no decode tokens; their halves compare as before."""
    first, second = window_halves(result)
    empty = max(first, second) <= 0 and len(result.table.osl) > 0 and int(result.table.osl.max()) > 1
    gap = max(1.0 if empty else _gap(first, second), _gap(*tpot_halves(result)))
    return gap <= CONVERGENCE, gap


def misses_as_it_settles(result: SimResult, res: Resolved) -> list[str]:
    """The SLO targets an unsettled run misses whichever way it settles: the measured requests that arrived in
    the window's first half miss the target at the SLO's percentile, and those of its second half are no better
    (a run drifting away from the target, or not toward it). Such a run is a miss, not 'unverified': Llama-3.1-8B
    on 20 H100 at 1,000 req/s read TPOT p90 82 ms against a 50 ms target, its batch still growing, and was ranked
    #3 as unverified above rows that met the SLO (trial, twenty-first session)."""
    slo = res.slo
    if slo is None:
        return []
    early, late = _arrival_halves(result)
    lat = latencies(result)
    q = float((slo.statistic or "p90")[1:])  # the percentile, as `tail_count` reads it
    out = []
    for key, name in (("ttft_ms", "ttft"), ("tpot_ms", "tpot"), ("e2e_ms", "e2e")):
        target = getattr(slo, key)
        if target is None or not phase_models(res.deployment.mode, name):  # a figure the phase has none of (review)
            continue
        a, b = lat[name][early], lat[name][late]
        a, b = a[np.isfinite(a)], b[np.isfinite(b)]
        if min(len(a), len(b)) * (1 - q / 100) < FEW_ABOVE:  # each half's percentile on FEW_ABOVE above it (review)
            continue
        first, second = np.percentile(a, q) * 1e3, np.percentile(b, q) * 1e3
        if first > target and second >= first:
            out.append(key)
    return out


def tail_count(stats: dict[str, Any], statistic: str) -> float | None:
    """The measured requests above a percentile ('p99': 1% of those measured), where the summary counts them."""
    n = stats.get("requests_measured")
    return n * (1 - int(statistic[1:]) / 100) if isinstance(n, int) else None


def few_above(res: Resolved, stats: dict[str, Any]) -> bool:
    """Whether the scenario's SLO targets (p90 unless it states p99) would be read off fewer than FEW_ABOVE
    measured requests above their percentile: a p99 needs about 1,000 measured, a p90 about 100."""
    slo = res.slo
    if slo is None or not any(v is not None for v in (slo.ttft_ms, slo.tpot_ms, slo.e2e_ms)):
        return False
    tail = tail_count(stats, slo.statistic or "p90")
    return tail is not None and tail < FEW_ABOVE


SHORT_REPLAY_E2ES = 3.0  # a run whose arrivals span fewer mean E2Es than this fills and drains throughout


def short_replay(result: SimResult, summary: dict[str, Any]) -> str:
    """Why a run whose arrivals end within a few mean E2Es of their start reads low tok/s (sixteenth trial: a
    50-row trace at 20 req/s read 544 output tok/s/GPU of 7,144 offered, not overloaded): its batch fills and
    drains throughout, never at the traffic's steady level; '' for a longer run."""
    t = result.table
    warm = int(result.extra.get("warm_start", 0))
    if warm:  # it starts from the steady batch (`SimConfig.warm_start`): nothing fills
        return ""
    arrived = t.arrival[~np.isnan(t.arrival)]
    e2e = (summary.get("e2e_ms") or {}).get("mean")
    if len(arrived) < 2 or not e2e:
        return ""
    span = float(arrived.max() - arrived.min())
    if span >= SHORT_REPLAY_E2ES * e2e / 1e3:
        return ""
    return (
        f"a short run: its {len(arrived):,} arrivals span {span:,.2f} s, {_e2es(span / (e2e / 1e3))} "
        f"({e2e / 1e3:,.2f} s each), so its batch fills and drains throughout and its tok/s reads below what this "
        "traffic would sustain in a steady state; for steady figures, run more requests (planner simulate --requests, "
        "the scenario's simulation.requests) or a longer trace"
    )


def _e2es(share: float) -> str:
    """A span in mean E2Es as the short-run warning says it ('0.0 mean E2Es' read as none; trial)."""
    return f"{share:.1f} mean E2Es" if share >= 0.1 else "under a tenth of one mean E2E"


def changing(cfg: SimConfig) -> bool:
    """Traffic that changes over the run by design (a trace, a rate schedule): no steady state to reach."""
    return cfg.trace is not None or (cfg.arrival is not None and cfg.arrival.kind in ("piecewise", "trace"))


def unsteady(cfg: SimConfig, gap: float) -> str:
    """What a run whose measured halves disagree means: traffic that changes by design (a trace, a
    piecewise rate schedule) has no steady state to reach, so its figures describe that traffic;
    otherwise the run is too short."""
    halves = f"throughput or mean TPOT differs by {gap:.0%} between the halves of the measured window"
    if changing(cfg):
        return f"{halves}: the traffic changes over the run (trace or rate schedule); the figures describe all of it"
    return f"{halves}: the run has not reached a steady state; use more requests (--requests) for steady-state figures"

"""Summaries of a simulation: latency percentiles, throughput over the measured window, KV use,
goodput under an SLO, Little's-law check; per-request records and per-step time series as CSV.

The measured window runs from the arrival of the first request after warm-up to the last
arrival (open loop) or the last request issued (closed loop) before the cool-down
(`SimConfig.cooldown_fraction`: the last arrivals, which keep the load on while the measured requests
finish), so ramp-up and the drain after the arrivals stop are left out.
A window of no length has no rate: `summarize` raises `SimulationError` rather than divide by it.

`overloaded`: a queue that grows for as long as the run lasts, whose latencies are the run's length's
rather than a steady state's. Either the deployment completes less than (1 - OVERLOAD_SHORTFALL - service /
window) of the output tokens the window's arrivals ask for (the requests arriving in it, dropped ones left
out, their output tokens over its length; service / window: the share of them still being served at its
end, their mean E2E less their wait before prefill over the window's length), or, near its capacity (where
it still completes about what arrives), the wait before prefill grows over the window: the last quarter of
its arrivals wait more than QUEUE_GROWTH times as long as the first quarter, and longer by more than
QUEUE_GROWTH_FLOOR of their service time (a growth that noise in short waits does not reach).
A closed loop never is (its arrivals follow its completions).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np

from simulator.engine import SimResult, SimulationError

# Completed output tokens short of the window's offered tokens by more than this: over capacity. In a
# steady state the two differ by the requests in flight at the window's ends only (a few percent at the
# planner's run lengths: about three rounds of the requests in flight).
OVERLOAD_SHORTFALL = 0.10
QUEUE_GROWTH = 2.0  # last-quarter over first-quarter mean wait before prefill: a queue still growing ...
QUEUE_GROWTH_FLOOR = 0.25  # ... by more than this share of a request's service time


def _stats_ms(x: np.ndarray) -> dict[str, float | None]:
    x = x[~np.isnan(x)]
    if not len(x):
        return {"mean": None, "p50": None, "p90": None, "p99": None}
    ms = x * 1e3
    p50, p90, p99 = np.percentile(ms, [50, 90, 99])
    return {
        "mean": round(float(ms.mean()), 4),
        "p50": round(float(p50), 4),
        "p90": round(float(p90), 4),
        "p99": round(float(p99), 4),
    }


def latencies(res: SimResult) -> dict[str, np.ndarray]:
    t = res.table
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(t.osl > 1, (t.finish - t.first_token) / (t.osl - 1), np.nan)
    return {
        "ttft": t.first_token - t.arrival,
        "tpot": tpot,
        "e2e": t.finish - t.arrival,
        "queue": t.prefill_start - t.arrival,
    }


def measured_mask(res: SimResult) -> np.ndarray:
    t = res.table
    done = ~np.isnan(t.finish) & ~t.dropped
    done[: res.extra.get("warm_start", 0)] = False  # a warm start is never measured
    if res.extra.get("warmup_by") == "completion":
        order = np.argsort(np.where(done, t.finish, np.inf), kind="stable")
        keep = np.zeros(len(t), dtype=bool)
        n_done = int(done.sum())
        keep[order[int(n_done * res.extra.get("warmup_fraction", 0.0)) : n_done]] = True
        return keep
    t0, t1 = res.window
    return done & (t.arrival >= t0) & (t.arrival <= t1)


def little(res: SimResult) -> tuple[float, float]:
    """(time-average requests in system over the window, arrival rate x mean time in system)."""
    t = res.table
    t0, t1 = res.window
    span = t1 - t0
    finish = np.where(np.isnan(t.finish), t1, t.finish)
    overlap = np.clip(np.minimum(finish, t1) - np.maximum(t.arrival, t0), 0, None)
    in_window = (t.arrival >= t0) & (t.arrival < t1)
    lam = in_window.sum() / span
    w = float(np.nanmean((finish - t.arrival)[in_window]))
    return float(np.nansum(overlap) / span), lam * w


def summarize(res: SimResult, slo: dict[str, float | None] | None = None) -> dict[str, Any]:
    t = res.table
    t0, t1 = res.window
    span = max(t1 - t0, 1e-12)
    lat = latencies(res)
    m = measured_mask(res)
    if t1 <= t0:
        raise SimulationError(
            f"the measured window [{t0:g}, {t1:g}] s is empty: every measured request arrived and finished "
            "at the same instant (with a decode pool only and osl 1 there is nothing to decode)"
        )
    if res.extra.get("warmup_by") == "completion" and m.any():  # the kept requests' tokens over their span
        kept_span = float(np.nanmax(t.finish[m]) - np.nanmin(t.arrival[m]))
        if kept_span <= 0:
            raise SimulationError("the measured requests span no time: nothing to measure a rate over")
        out_tok_s = float(t.osl[m].sum() / kept_span)
    else:  # tokens generated inside the window (first tokens included) over its length
        out = res.extra["out_tokens"]
        in_win = (out[:, 0] >= t0) & (out[:, 0] <= t1)
        first = ((t.first_token >= t0) & (t.first_token <= t1)).sum()
        out_tok_s = (out[in_win, 1].sum() + first) / span
    steps = res.steps
    step_in = (steps[:, 0] >= t0) & (steps[:, 0] <= t1) if len(steps) else np.zeros(0, dtype=bool)
    in_tok_s = steps[step_in, 4].sum() / span if len(steps) else 0.0
    decodes = np.array([kind != "prefill" for kind, _ in res.instances], dtype=bool)  # by instance uid
    kv_rows = decodes[steps[:, 1].astype(int)] if len(steps) else np.zeros(0, dtype=bool)
    kv = steps[kv_rows, 5] if len(steps) else np.zeros(0)
    tpots = lat["tpot"][m]
    tpot_mean = float(np.nanmean(tpots)) if np.isfinite(tpots).any() else float("nan")
    arriving = (t.arrival >= t0) & (t.arrival < t1) & ~t.dropped
    open_loop = res.extra.get("open_loop", False) and res.extra.get("warmup_by") != "completion"
    offered = float(t.osl[arriving].sum()) / span if open_loop else out_tok_s
    service = float(np.nanmean(lat["e2e"][m] - lat["queue"][m])) if m.any() else 0.0
    in_flight = min(service / span, 1.0)  # the window's offered tokens still being generated at its end
    good = None
    if slo and any(v is not None for v in slo.values()):
        ok = m.copy()
        for key, name in (("ttft_ms", "ttft"), ("tpot_ms", "tpot"), ("e2e_ms", "e2e")):
            if slo.get(key) is not None:
                ok &= np.nan_to_num(lat[name], nan=0.0) * 1e3 <= float(slo[key])  # type: ignore[arg-type]
        good = round(float(ok.sum() / max(m.sum(), 1)), 4)
    return {
        "ttft_ms": _stats_ms(lat["ttft"][m]),
        "tpot_ms": _stats_ms(lat["tpot"][m]),
        "e2e_ms": _stats_ms(lat["e2e"][m]),
        "queue_ms": _stats_ms(lat["queue"][m]),
        "input_tok_s": round(float(in_tok_s), 3),
        "output_tok_s": round(float(out_tok_s), 3),
        "input_tok_s_per_gpu": round(float(in_tok_s) / res.gpus, 3),
        "output_tok_s_per_gpu": round(float(out_tok_s) / res.gpus, 3),
        "total_tok_s_per_gpu": round(float(in_tok_s + out_tok_s) / res.gpus, 3),
        "output_tok_s_per_user": round(1.0 / tpot_mean, 3) if tpot_mean > 0 else None,
        "offered_output_tok_s": round(offered, 3),
        "overloaded": bool(out_tok_s < (1.0 - OVERLOAD_SHORTFALL - in_flight) * offered)
        or (open_loop and _queue_grows(res, m, lat)),
        "gpus": res.gpus,
        "requests_completed": int((~np.isnan(t.finish) & ~t.dropped).sum()),
        "requests_measured": int(m.sum()),  # those the latency statistics above are over (the measured window)
        # in flight at 0 s (a warm start): completed among the rest, never measured (sixteenth trial: 2,047
        # completed of 2,000 'requests', unsaid)
        "requests_warm_start": int(res.extra.get("warm_start", 0)),
        "requests_dropped": int(t.dropped.sum()),
        "requests_dropped_by_reason": _count(t.drop_reason.values()),
        "requests_preempted": int((t.preemptions > 0).sum()),
        "preemptions": int(t.preemptions.sum()),
        "kv_utilization": {
            "mean": round(float(kv.mean()), 4) if len(kv) else 0.0,
            "max": round(float(kv.max()), 4) if len(kv) else 0.0,
        },
        "goodput": good,
        "sim_time_s": round(float(np.nanmax(t.finish)) if len(t) else 0.0, 4),
        "wall_time_s": round(res.wall_time_s, 3),
        "measured_window_s": [round(t0, 4), round(t1, 4)],
        "model_calls": res.model_calls,
        "notes": list(res.extra.get("notes", [])),
    }


def _queue_grows(res: SimResult, measured: np.ndarray, lat: dict[str, np.ndarray]) -> bool:
    """The measured requests' wait before prefill grows across the window: the last quarter of them by
    arrival waits QUEUE_GROWTH x the first quarter's mean wait, and longer by QUEUE_GROWTH_FLOOR of its
    service time (E2E less that wait)."""
    t = res.table
    idx = np.flatnonzero(measured)
    if len(idx) < 8:
        return False
    idx = idx[np.argsort(t.arrival[idx], kind="stable")]
    wait, e2e = lat["queue"], lat["e2e"]
    q = len(idx) // 4
    first, last = idx[:q], idx[-q:]
    w0, w1 = float(np.nanmean(wait[first])), float(np.nanmean(wait[last]))
    service = float(np.nanmean(e2e[last] - wait[last]))
    return w1 > QUEUE_GROWTH * w0 and w1 - w0 > QUEUE_GROWTH_FLOOR * service


def _count(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def write_records(res: SimResult, path: str | Path) -> None:
    t = res.table
    lat = latencies(res)
    with Path(path).open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(
            [
                "id",
                "arrival_s",
                "isl",
                "osl",
                "cached_tokens",
                "prefill_start_s",
                "first_token_s",
                "finish_s",
                "ttft_ms",
                "tpot_ms",
                "e2e_ms",
                "preemptions",
                "dropped",
                "drop_reason",
                "decode_instance",
                "warm_start",  # in flight at 0 s (SimConfig.warm_start): part of the load, never measured
            ]
        )
        warm = res.extra.get("warm_start", 0)
        for i in range(len(t)):
            w.writerow(
                [
                    i,
                    t.arrival[i],
                    t.isl[i],
                    t.osl[i],
                    t.cached[i],
                    t.prefill_start[i],
                    t.first_token[i],
                    t.finish[i],
                    lat["ttft"][i] * 1e3,
                    lat["tpot"][i] * 1e3,
                    lat["e2e"][i] * 1e3,
                    t.preemptions[i],
                    bool(t.dropped[i]),
                    t.drop_reason.get(i, ""),
                    t.decode_instance[i],
                    i < warm,
                ]
            )


def write_timeseries(res: SimResult, path: str | Path) -> None:
    with Path(path).open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["time_s", "pool", "instance", "batch", "output_tokens", "input_tokens", "kv_fraction", "queue"])
        for row in res.steps:
            role, pool = res.instances[int(row[1])]
            w.writerow([row[0], f"{role}{pool}", int(row[1]), int(row[2]), row[3], int(row[4]), row[5], int(row[6])])

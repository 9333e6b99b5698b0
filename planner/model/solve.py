"""Where a throughput (or a concurrency) of a deployment reaches a target as its decode batch grows: the first
crossing the plan's sweep would see (`first_crossing`), found by bisection; and the self-consistent value of a
quantity that feeds back on itself (`fixed_point`). Numeric only: the curves are the callers'
(`planner.model.estimator`, `planner.model.aggregated`)."""

from __future__ import annotations

from collections.abc import Callable

from scipy.optimize import brentq


def first_crossing(f: Callable[[float], float], target: float, hi: float) -> float | None:
    """A b in (0, hi] with f(b) >= target, the first such crossing the batches 1, 2, 4, ... show; None where
    neither they nor hi reach the target. A bisection over (0, hi] first; then, since f need not rise
    everywhere (a decode step's time can jump with the batch: a kernel's tile, a collective's algorithm),
    the powers of two below its answer (the plan's sweep) are tried: the first that reaches the target
    bounds a crossing, which a bisection from the power of two before it finds. A load grows the batch from
    below and settles at the first crossing; the bisection alone could land on a later one (DeepSeek-V3 on 16
    GB200 decode DP16 at 167.3 req/s: batch 10,970 and TPOT 65.6 ms where 8,192 carries the rate at 49.0 ms:
    the plan's row; new-user trial, nineteenth session). Not seen: a crossing between two powers of two
    that both fall short of the target (review: throughput peaking at batch 100)."""
    reached = f(hi) >= target  # where hi falls short, an earlier batch may still reach the target
    b = bisect(f, target, 1e-6, hi) if reached else hi
    lo, g = 1e-6, 1.0
    while g < b:
        if f(g) >= target:
            return bisect(f, target, lo, g)
        lo, g = g, 2 * g
    return b if reached else None


def bisect(
    f: Callable[[float], float], target: float, lo: float, hi: float, rel: float = 1e-7, steps: int = 48
) -> float:
    """A b in (lo, hi] with f(b) >= target and f(b') < target just below it, for f(lo) < target <= f(hi),
    to `rel` of b (at most `steps` halvings)."""
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        if f(mid) >= target:
            hi = mid
        else:
            lo = mid
        if hi - lo <= rel * hi:
            break
    return hi


def fixed_point(g: Callable[[float], float], lo: float, hi: float) -> float:
    """The v in [lo, hi] with v = g(v), for g non-increasing with lo <= g(v) <= hi there (a step time that
    lengthens as fewer prompts arrive per second, a rate that falls as its own load stretches TPOT): v - g(v)
    rises through zero once, so Brent's method (scipy's `brentq`: secant and inverse quadratic steps, falling
    back to bisection where g jumps, as it does where a prefill batch's prompt count rounds) finds it to 1e-9
    of v in about a fifth of a plain bisection's evaluations (the default plan's scoring: 10.4 of 21.6 s
    were these solves). A damped iteration (v <- (v + g(v)) / 2) oscillates wherever g falls faster than -3
    per unit: a vLLM closed loop of eight clients of 32,000-token prompts read TPOT 87, 182 and 91 ms at
    decode batches 6.8, 7.09 and 7.2, the sixtieth iterate of a swing between 33 and 280 ms (twenty-second
    session)."""
    if hi <= lo:
        return lo
    a, b = lo - g(lo), hi - g(hi)
    if a >= 0 or b <= 0:  # g reaches an end of the range: that end is the fixed point
        return lo if a >= 0 else hi
    return float(brentq(lambda v: v - g(v), lo, hi, xtol=1e-12 * hi, rtol=1e-9, maxiter=200))

"""Queueing waits of the steady-state model (`planner.model.estimator` and its pool models): the
M/D/1 wait of a prefill queue, the wait of a Poisson stream for a decode slot (M/M/c, Erlang C), and
how often any of c parallel servers is busy (the attention-DP ranks prefilling long prompts).

What it does not do: closed loops (a client that waits for its answer before sending again never
queues for a slot while its requests fit), percentiles (the simulator gives those), or service times
that vary by request.
"""

from __future__ import annotations

import math

from scipy.special import gammaincc


def md1_wait(rho: float, service_s: float) -> float:
    """Mean M/D/1 queueing delay."""
    return math.inf if rho >= 1 else rho * service_s / (2 * (1 - rho))


def mdc_wait(servers: int, rho: float, service_s: float) -> float:
    """Mean queueing delay of a Poisson stream shared by `servers` equal servers of fixed service time, each
    busy `rho` of the time, where a new arrival joins the least loaded (the simulator's `least_loaded`
    router): M/D/c by the Allen-Cunneen approximation, the M/M/c wait (Erlang C x service / (c (1 - rho)))
    times (1 + C_s^2) / 2 = 1/2 for fixed service. One server: exactly `md1_wait`. Fourteen instances of
    64,000-token prompts at 82% read 5.2 s as separate M/D/1 queues where the simulation's router reads
    0.28 s (ninth new-user trial)."""
    if servers <= 1:
        return md1_wait(rho, service_s)
    if rho >= 1:
        return math.inf
    return erlang_c(servers, servers * rho) * service_s / (servers * (1 - rho)) / 2


def erlang_c(servers: int, offered: float) -> float:
    """Probability that a Poisson arrival finds all `servers` busy at `offered` = arrival rate x
    service time (Erlang C), from Erlang B = pmf(c; a) / cdf(c; a) of a Poisson(a) count, which stays
    exact for thousands of servers: C = c B / (c - a (1 - B)). 1 at or above saturation."""
    if offered <= 0:
        return 0.0
    if offered >= servers:
        return 1.0
    # pmf in log space; the cdf P(N <= c) of a Poisson(a) count is Q(c + 1, a), the regularized upper
    # incomplete gamma (scipy.special.gammaincc), a ufunc: the plan prices this on every swept point
    pmf = math.exp(servers * math.log(offered) - offered - math.lgamma(servers + 1))
    b = pmf / float(gammaincc(servers + 1, offered))
    return servers * b / (servers - offered * (1.0 - b))


def any_busy(servers: int, offered: float) -> float:
    """Fraction of time at least one of `servers` is busy under a Poisson stream at `offered` =
    arrival rate x service time: 1 - P0 of M/M/c, P0 = e^-a / (cdf - pmf + pmf c / (c - a)) with the
    Poisson(a) cdf P(N <= c) and pmf P(N = c) (Erlang's sums over e^a). Exact at both ends for any
    service time: `offered` (the utilisation) for one server, 1 - e^-a (M/G/inf) for many; 1 at or
    above saturation."""
    if offered <= 0:
        return 0.0
    if offered >= servers:
        return 1.0
    pmf = math.exp(servers * math.log(offered) - offered - math.lgamma(servers + 1))
    cdf = float(gammaincc(servers + 1, offered))
    return 1.0 - math.exp(-offered) / (cdf - pmf + pmf * servers / (servers - offered))


def slot_wait(slots: int, busy: float, hold_s: float) -> float:
    """Mean wait of a Poisson arrival for one of `slots` decode slots (the running-sequence limit of an
    instance, its KV pool or its engine's cap) while `busy` of them are held on average, each for
    `hold_s`: Erlang C x hold / (slots - busy) (M/M/c; inf at `busy` >= `slots`). With thousands of
    slots it stays negligible until the load is within a few sqrt(slots) of the limit, then grows
    without bound: a deployment run at its KV capacity has no steady state."""
    if busy <= 0 or hold_s <= 0:
        return 0.0
    if busy >= slots:
        return math.inf
    return erlang_c(slots, busy) * hold_s / (slots - busy)


SLOT_SD = 3.0  # Poisson standard deviations of requests in flight that a batch keeps below its decode slots


def near_slots(batch: float, slots: int) -> bool:
    """Whether a mean decode `batch` under Poisson arrivals sits within SLOT_SD standard deviations (sqrt of the
    batch) of the instance's `slots`: there the wait for a slot is steep, so a few per cent more TPOT than
    estimated puts seconds on TTFT (sixteenth trial: Llama-3.1-8B on 3 H100, batch 287 of 323 slots, TTFT 126 ms
    by estimate, p90 1,333 ms simulated; twentieth: DeepSeek-V3 on 56 GB200, batch 7,544 of 7,720, 504 ms by
    estimate, 1,526 ms simulated mean)."""
    return 0 < batch < slots and slots - batch < SLOT_SD * math.sqrt(batch)

"""The mean step a decoding request rides on a mixed instance (vLLM, TRT-LLM: prefill chunks share the
decode steps) under Poisson arrivals, where a request's decode is short beside the prefill's busy spells.

Steps with a prompt chunk (`tau_m`) and plain decode steps (`tau_p`) alternate in spells: prompts hold the
token budget `rho` of the time. A request that decodes long enough meets them in proportion, the
time-average step 1 / (rho / tau_m + (1 - rho) / tau_p). But a request starts decoding as its own prompt
leaves the budget, and an M/D/1 departure leaves others queued with probability rho, so it starts inside a
busy spell that often outlasts its whole answer: 32,000-token prompts with 50-token answers on one H100
(vLLM, 75% prefill) read TPOT 27.7 ms by the time average where the simulation reads 123 (ninth new-user
trial). Over several instances the least-loaded router queues a prompt only where all are busy (Erlang C
of M/D/c instead of rho). The request's step counter is a two-state Markov chain in its own steps: it leaves a
busy spell at tau_m / (the spell left after a departure: E[N | N >= 1] = 1 + W / hold prompts, hold / (1 -
that chance) each) and leaves an idle one when the next prompt arrives (x tau_p). Its share of busy steps starts there
and relaxes to the token-weighted share at the chain's rate, so over `life` steps the mean step is the
standard two-state occupancy. Long answers (life >> the relaxation) recover the time average. A prompt that
finds no decode slot (its KV not admitted) waits and stalls nobody (`admitted`). It prices one request's steps
only; the batch and the rate are `planner.model.aggregated`'s. Not covered: closed loops and attention-DP
lanes (`closed_loop_step` here prices a closed loop's mean step by time; the lanes are
`planner.model.aggregated`'s), and SGLang's prefill-first, whose decodes stop outright
during a prefill: the same starting spell added to its long-run stretch read 4 of 6 simulated cases closer
(gpt-oss-120b 64,000/100 on 14 H200: 31 -> 50 ms, simulated 69) and 2 farther (Llama-3.1-8B 100,000/300 on
one H100, KV-bound: 63 -> 89 ms, simulated 64), so it is left out (twenty-third session)."""

from __future__ import annotations

import math

from planner.model.queueing import erlang_c, mdc_wait
from planner.model.solve import fixed_point

RHO_CAP = 0.999  # an M/D/1 queue has no steady state at rho = 1


def admitted(batch: float, slots: int) -> float:
    """The chance a queued prompt finds a decode slot free (its KV admitted) with `batch` of an instance's
    `slots` held on average (a request starting to decode holds its own beside the others': 1 + b, as
    `planner.model.steps.ridden` counts it): 1 - Erlang C. A prompt that cannot be admitted waits and stalls nobody (the
    simulator's prefill takes only prompts whose KV fits): 100,000-token prompts on one H100 hold its 4
    slots, and their decodes run unstalled (TPOT 63.7 ms simulated)."""
    return 1.0 - erlang_c(max(int(slots), 1), min(max(batch, 0.0), float(slots)))


def spell(rho: float, hold: float, instances: int = 1) -> tuple[float, float]:
    """(the chance a departing prompt leaves another queued at its instance, the busy spell it then leaves in
    seconds) at prefill share `rho`, prompts holding the instance `hold` seconds each, over `instances` fed by
    the least-loaded router: Erlang C of M/D/c (one instance: rho), and E[N | N >= 1] = 1 + W / hold
    prompts, each starting a spell of hold / (1 - that chance) (M/D/1's busy period)."""
    rho = min(max(rho, 0.0), RHO_CAP)
    if rho <= 0.0 or hold <= 0.0:
        return 0.0, 0.0
    queued = min(erlang_c(instances, instances * rho), RHO_CAP)
    return queued, (1 + mdc_wait(instances, rho, hold) / hold) * hold / (1 - queued)


def ridden_step(
    rho: float,
    x: float,
    tau_m: float,
    tau_p: float,
    hold: float,
    life: float,
    instances: int = 1,
    room: float = 1.0,
) -> float:
    """The mean step over `life` decode steps of a request that starts as its prompt leaves the budget, at
    prefill share `rho`, x prompts/s each holding the budget `hold` seconds, on one of `instances` fed by the
    least-loaded router (its prompts queue where all are busy: Erlang C; one instance: rho), `room` the chance
    a queued prompt is admitted (`admitted`)."""
    rho = min(max(rho, 0.0), RHO_CAP)
    if rho <= 0.0 or tau_m <= tau_p:
        return tau_p if rho <= 0.0 else 1.0 / (rho / tau_m + (1 - rho) / tau_p)
    busy_rate, idle_rate = rho / tau_m, (1 - rho) / tau_p
    token_share = busy_rate / (busy_rate + idle_rate)  # busy steps among all steps, in the long run
    queued, left = spell(rho, hold, instances)
    queued *= room
    k = tau_m / left + x * tau_p  # per step: the chain's relaxation rate
    kl = k * max(life, 0.0)
    seen = -math.expm1(-kl) / kl if kl > 1e-9 else 1.0
    share = token_share + (queued - token_share) * seen
    return tau_p + (tau_m - tau_p) * share


def poisson_ride(
    b: float, life: float, tau_m: float, tau_p: float, hold: float, instances: int = 1, slots: int = 0
) -> tuple[float, float]:
    """(x requests/s, mean step) of a mixed instance at mean decode batch b under Poisson arrivals: the
    rate whose requests, each riding `ridden_step` for `life` steps, keep b decoding (Little: b = x life
    step), at prefill share x hold."""
    if life <= 0 or b <= 0:
        return 0.0, tau_p
    room = admitted(1 + b, slots) if slots else 1.0

    def step(x: float) -> float:
        return ridden_step(x * hold, x, tau_m, tau_p, hold, life, instances, room)

    top = b / (life * tau_p)
    x = fixed_point(lambda v: b / (life * step(v)), 0.0, top)
    return x, step(x)


def others(busy: float, seen: float) -> float:
    """The share of a request's decode time that another request's prompt occupies, where prompts keep the
    instance `busy` of the time (all clients counted) and a request meets `seen` of the others' load (the
    arrival theorem's (N - 1) / N in a closed loop of N, 1 under independent arrivals). Its own prompt is
    never in its decode time, so the others' share is measured against the time its prompt leaves:
    busy (N - 1) / N / (1 - busy / N). (The (N - 1) / N share alone, against the whole cycle, read TPOT
    14.3 ms for two clients of 32,000-token prompts where the simulation reads 21.8; review.)"""
    if seen >= 1.0:
        return busy
    own = min(busy, 0.999) * (1.0 - seen)
    return min(busy * seen / (1.0 - own), 1.0)


def closed_loop_step(step_s: float, t_d: float, hold: float, per_step: float, seen: float) -> float:
    """The mean step a decoding request of a closed loop rides on a mixed instance: the others' prompts take
    `others` of its decode time (`hold` of steps with a prompt each: isl / g of a step of g prompt tokens, at
    x = per_step / t requests/s, `per_step` finishing per step), steps of `step_s` with a prompt,
    `t_d` without; counted by time, not by the share of steps, which undercounts long prompts (two clients of
    32,000-token prompts read TPOT 15.7 ms by steps where the simulation reads 21.8; review)."""

    def mean_step(t: float) -> float:
        f = others(min(per_step / t * hold, 0.999), seen)
        return 1.0 / (f / step_s + (1 - f) / t_d)

    return fixed_point(mean_step, t_d, max(step_s, t_d))

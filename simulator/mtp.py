"""MTP draft acceptance, stochastic per step and seeded.

Each verify step accepts a chain of drafts: draft j is kept only if drafts 1..j-1 were, with a
constant conditional acceptance p chosen so that the mean accepted count equals the
configuration's `accepted_tokens`. A request needing r more tokens then takes N steps, where N
is the first step count whose summed (1 + accepted) reaches r; by the renewal theorem N is
approximately normal with mean r/m and variance r v / m^3 (m, v: mean and variance of the
tokens per step), which is what we draw, once per request.
"""

from __future__ import annotations

import math

import numpy as np

from roofline.deployment import MTPConfig


def chain_probability(drafts: int, accepted: float) -> float:
    """Conditional acceptance p with sum_{j=1..drafts} p^j = accepted (bisection)."""
    if accepted <= 0:
        return 0.0
    if accepted >= drafts:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if sum(mid**j for j in range(1, drafts + 1)) < accepted:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


class DraftSampler:
    def __init__(self, mtp: MTPConfig, rng: np.random.Generator) -> None:
        p = chain_probability(mtp.draft_tokens, mtp.accepted_tokens)
        # P(accepted = a): p^a (1 - p) for a < d, p^d for a = d
        probs = [p**a * (1 - p) for a in range(mtp.draft_tokens)] + [p**mtp.draft_tokens]
        values = np.arange(1, mtp.draft_tokens + 2, dtype=float)  # tokens per step = 1 + accepted
        self.mean = float(np.dot(probs, values))
        self.var = float(np.dot(probs, (values - self.mean) ** 2))
        self.rng = rng
        self.max_per_step = mtp.draft_tokens + 1

    def steps(self, remaining: int) -> tuple[int, float]:
        """(steps, tokens per step) for a request that still needs `remaining` tokens."""
        if remaining <= 0:
            return 1, 0.0
        mu = remaining / self.mean
        sd = math.sqrt(remaining * self.var / self.mean**3)
        n = round(self.rng.normal(mu, sd)) if sd > 0 else round(mu)
        n = min(max(n, math.ceil(remaining / self.max_per_step), 1), remaining)
        return n, remaining / n

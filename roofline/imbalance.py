"""Expert-parallel load imbalance: how much more routed work the busiest EP rank gets than the mean.

An MoE layer under expert parallelism waits for its busiest rank (the next all-to-all syncs the
ranks), so the step pays max-over-ranks / mean of the routed token-expert pairs. Two parts:

- **Expert popularity.** Routers do not spread tokens evenly: a few hot experts take many times the
  mean expert load, and the rank holding the hottest one carries its excess. Measured on
  DeepSeek-R1 without expert-parallel load balancing (EPLB): at EP32 (8 experts per rank, 1,024
  routed tokens per rank) the hottest rank receives (max - mean) / mean = 1.564 more than the mean
  (TensorRT-LLM tech blog 4, "Scaling Expert Parallelism in TensorRT-LLM (Part 1)", Table 1, no
  EPLB, averaged over layers and iterations; the same table's per-slot ratio, 10.95, says one
  expert can carry ~12x the mean). Less the routing noise of 1,024 pairs (below, 0.065) that is
  1.50 at 8 experts per rank, i.e. a hot-expert excess of HOT_EXPERT_EXCESS = 12.0 mean expert
  loads, which a rank of k experts sees as 12.0 / k: EP8 on 256 experts 1.375x, EP72 4.4x. With
  EPLB (hot experts replicated and placed from load statistics) the same table gives 0.109 at
  9 slots per rank, 0.044 after the noise: EPLB_RESIDUAL, kept for every EP size. No engine
  turns EPLB on by default (vLLM ParallelConfig.enable_eplb False; SGLang ServerArgs enable_eplb
  False; TensorRT-LLM MoeConfig.load_balancer None); SGLang's large-scale EP recipe does, with
  redundant experts (planner/engines/sglang.yaml), and a scenario can state `runtime.eplb`.
  Only DeepSeek-R1's skew is measured in text (one dataset); other routers are given the same
  excess, capped where a model cannot carry it: one expert takes at most every token of a step,
  num_experts / top_k mean expert loads.
- **Routing noise.** A step routes a finite number of pairs, so rank loads scatter around their
  means by about 1 / sqrt(pairs per rank); the busiest of `ep` ranks sits at the expected maximum
  of `ep` standard normals above it (`max_normal_mean`, exact rather than the sqrt(2 ln ep) limit).

The simulator draws a step's noise from the same distribution (`max_normal_quantiles`), so its
mean is the estimator's. A stated `runtime.ep_imbalance` replaces both parts. Not modelled: the
excess varying by layer and dataset (the blog's layers range 0.46-2.46), and the extra all-to-all
traffic to the busiest rank (priced with the mean in `roofline.step`).
"""

from __future__ import annotations

import functools
import math
from statistics import NormalDist

HOT_EXPERT_EXCESS = 12.0  # (1.564 - 0.065) x 8 experts per rank; TensorRT-LLM tech blog 4, Table 1
EPLB_RESIDUAL = 0.044  # 0.109 - 0.065 with EPLB at 9 slots per rank; same table
QUANTILES = 256  # grid of the busiest rank's noise draws in the simulator


@functools.lru_cache(maxsize=512)
def max_normal_quantiles(n: int) -> tuple[float, ...]:
    """`QUANTILES` equally likely values of the maximum of `n` independent standard normals: the
    quantiles at u = (i + 1/2) / QUANTILES of its CDF Phi(x)^n, i.e. Phi^-1(u^(1/n))."""
    inv = NormalDist().inv_cdf
    return tuple(inv(((i + 0.5) / QUANTILES) ** (1.0 / n)) for i in range(QUANTILES))


@functools.lru_cache(maxsize=512)
def max_normal_mean(n: int) -> float:
    """Expected maximum of `n` standard normals, never below the mean (E[max(M, 0)]: 0 for n = 1;
    1.42 for 8, 2.07 for 32), as the mean of the clipped `max_normal_quantiles`, so that the
    simulator's draws (clipped alike in `imbalance`) average to it."""
    if n <= 1:
        return 0.0
    q = max_normal_quantiles(n)
    return sum(max(v, 0.0) for v in q) / len(q)


def popularity_excess(ep: int, slots: float, balanced: bool, experts: int = 0, top_k: int = 0) -> float:
    """The busiest rank's excess load from expert popularity: HOT_EXPERT_EXCESS / (slots per rank)
    without EPLB (the excess capped at experts / top_k - 1 when the router is given), EPLB_RESIDUAL
    with it; 0 without expert parallelism."""
    if ep <= 1:
        return 0.0
    if balanced:
        return EPLB_RESIDUAL
    hot = HOT_EXPERT_EXCESS if not (experts and top_k) else min(HOT_EXPERT_EXCESS, experts / top_k - 1)
    return hot * ep / max(slots, 1.0)


def imbalance(popularity: float, pairs_per_rank: float, z: float) -> float:
    """Max-rank / mean load for a popularity excess and a noise draw `z` (standard normals above the
    mean): 1 + popularity + z / sqrt(pairs per rank)."""
    return 1.0 + popularity + max(z, 0.0) / math.sqrt(max(pairs_per_rank, 1.0))

"""Routing policies: which prefill (or aggregated) instance takes a new request, and which decode
instance takes a prefilled one.

- `round_robin`: in turn.
- `least_loaded`: fewest queued prompt tokens (prefill) or fewest running + taken in or waiting (decode).
- `kv_aware`: prefill goes where the longest cached prefix is (Mooncake hash blocks), ties to
  the least loaded; decode goes where the most KV is free.

Pools of more than `SAMPLE_ABOVE` instances choose among `SAMPLE` instances drawn with the run's
seeded generator (the power-of-d-choices rule, Mitzenmacher 2001: the least loaded of d random
choices balances almost as well as of all), so routing one request costs O(1), not O(instances).

A deployment may lack either side: with a decode pool only there is no front (the engine hands
arrivals straight to decode), with a prefill pool only there is no back (requests end at their
first token). The router never picks from an empty pool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from simulator.request import RequestTable

if TYPE_CHECKING:
    from simulator.instances import Instance


SAMPLE_ABOVE = 64
SAMPLE = 8


class Router:
    def __init__(self, policy: str, by_role: dict[str, list[Instance]], rng: np.random.Generator | None = None) -> None:
        self.policy = policy
        self.front = by_role["prefill"] or by_role["aggregated"]
        self.back = by_role["decode"]
        self._rr = [0, 0]
        self.rng = rng or np.random.default_rng(0)

    def _choices(self, pool: list[Instance]) -> list[Instance]:
        if len(pool) <= SAMPLE_ABOVE:
            return pool
        return [pool[int(k)] for k in self.rng.integers(0, len(pool), size=SAMPLE)]

    def _turn(self, pool: list[Instance], slot: int) -> Instance:
        inst = pool[self._rr[slot] % len(pool)]
        self._rr[slot] += 1
        return inst

    def to_prefill(self, i: int, table: RequestTable) -> Instance:
        pool = self.front
        if len(pool) == 1:
            return pool[0]
        if self.policy == "round_robin":
            return self._turn(pool, 0)
        pool = self._choices(pool)
        load = [p.queued_tokens + p.state.n for p in pool]
        if self.policy == "kv_aware" and pool[0].ctx.hash_ids is not None:
            blocks = pool[0].ctx.hash_ids[i]

            def hits(p: Instance) -> int:
                n = 0
                for h in blocks:
                    if h not in p.seen_blocks:
                        break
                    n += 1
                return n

            return max(pool, key=lambda p: (hits(p), -load[pool.index(p)]))
        return pool[min(range(len(pool)), key=load.__getitem__)]

    def to_decode(self, i: int, table: RequestTable) -> Instance:
        pool = self.back
        if len(pool) == 1:
            return pool[0]
        if self.policy == "round_robin":
            return self._turn(pool, 1)
        pool = self._choices(pool)
        if self.policy == "kv_aware":
            return max(pool, key=lambda p: p.state.capacity - p.state.kv_tokens())
        return min(pool, key=lambda p: p.state.n + getattr(p, "backlog", 0))

"""A CPU stand-in for runtime.engine.ep.EPEngine (same page pool and request fields) so the
expert-parallel workers run their real lockstep loop over gloo. Every step all-gathers what this
rank is about to run (prefill or decode, and the capacity or bucket) and fails the run unless all
ranks agree and the agreed size holds this rank's tokens: a loop that lets ranks drift apart, or
sizes a dispatch too small, fails here."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import torch
import torch.distributed as dist

from runtime.engine.serve import Req

PAGES = 64
PREFILL, DECODE = 1, 2


class FakeEPEngine:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.budget = cfg["budget"]
        self.free = deque(range(1, PAGES))
        self.steps = 0

    def capture(self, max_batch: int, max_pages: int) -> None:
        self._agree(DECODE, max_batch)

    def _agree(self, kind: int, size: int) -> None:
        mine = torch.tensor([kind, size])
        every = [torch.zeros(2, dtype=torch.long) for _ in range(dist.get_world_size())]
        dist.all_gather(every, mine)
        if any(not torch.equal(e, mine) for e in every):
            raise RuntimeError(f"ranks out of step: {[e.tolist() for e in every]}")
        self.steps += 1

    def prefill_ep(self, chunks: list[tuple[Req, int]], cap: int) -> None:
        if sum(n for _, n in chunks) > cap:
            raise RuntimeError(f"capacity {cap} below this rank's {sum(n for _, n in chunks)} tokens")
        self._agree(PREFILL, cap)
        for r, n in chunks:
            r.done_prefill += n
        time.sleep(1e-3)

    def decode(self, running: list[Req], max_pages: int, bucket: int) -> None:
        if len(running) > bucket:
            raise RuntimeError(f"bucket {bucket} below this rank's {len(running)} running requests")
        self._agree(DECODE, bucket)
        for r in running:
            r.generated += 1
        time.sleep(1e-3)

"""A CPU stand-in for runtime.engine.serve.Engine with the same page pool and request fields, so
the disaggregated workers (runtime.engine.pd) run their real scheduling and KV transfers over gloo.
Prefill writes each request's id into its prompt's KV slots; decode checks them on the first step,
so a transfer that lands in the wrong pages (or not at all) fails the run."""

from __future__ import annotations

import time
from collections import deque
from types import SimpleNamespace
from typing import Any

import torch

from runtime.engine.model import KV_LORA, ROPE
from runtime.engine.serve import PAGE, Req

LAYERS, PAGES = 2, 48


def _mark(rid: int) -> float:
    return float(rid % 97 + 1)


class FakeEngine:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.budget = cfg["budget"]
        self.ckv = torch.zeros(LAYERS, PAGES, PAGE, KV_LORA, dtype=torch.bfloat16)
        self.kpe = torch.zeros(LAYERS, PAGES, PAGE, ROPE, dtype=torch.bfloat16)
        self.free = deque(range(1, PAGES))
        self.m = SimpleNamespace(layers=[None] * LAYERS)

    def _graph(self, b: int, max_pages: int) -> None:
        pass

    def prefill_step(self, chunks: list[tuple[Req, int]]) -> None:
        for r, n in chunks:
            for pos in range(r.done_prefill, r.done_prefill + n):
                self.ckv[:, r.pages[pos // PAGE], pos % PAGE] = _mark(r.rid)
                self.kpe[:, r.pages[pos // PAGE], pos % PAGE] = -_mark(r.rid)
            r.done_prefill += n
            r.token = r.rid
        time.sleep(1e-3 * len(chunks))

    def decode(self, running: list[Req], max_pages: int) -> None:
        for r in running:
            if r.generated == 1:
                last = r.isl - 1
                got = (float(self.ckv[-1, r.pages[0], 0, 0]), float(self.kpe[0, r.pages[last // PAGE], last % PAGE, 3]))
                if got != (_mark(r.rid), -_mark(r.rid)) or r.token != r.rid:
                    raise RuntimeError(f"request {r.rid}: KV pages hold {got}, first token {r.token}")
            r.generated += 1
        time.sleep(1e-3)

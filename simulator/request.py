"""Per-request state in flat arrays, one slot per request; entities record their own timestamps
through `on_<event>` methods and metrics are computed afterwards.

Times are seconds of simulated time; NaN means "not yet". `generated` counts output tokens,
the first (from prefill) included.
"""

from __future__ import annotations

import numpy as np


class RequestTable:
    def __init__(self, isl: np.ndarray, osl: np.ndarray) -> None:
        n = len(isl)
        self.isl = isl.astype(np.int64)
        self.osl = osl.astype(np.int64)
        self.arrival = np.full(n, np.nan)
        self.prefill_start = np.full(n, np.nan)
        self.first_token = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.generated = np.zeros(n, dtype=np.int64)
        self.cached = np.zeros(n, dtype=np.int64)  # prompt tokens served from the prefix cache
        self.preemptions = np.zeros(n, dtype=np.int64)
        self.dropped = np.zeros(n, dtype=bool)
        self.drop_reason: dict[int, str] = {}  # why each dropped request was turned away
        self.prefill_instance = np.full(n, -1, dtype=np.int64)
        self.decode_instance = np.full(n, -1, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.isl)

    def on_arrival(self, i: int, t: float) -> None:
        self.arrival[i] = t

    def on_prefill_start(self, i: int, t: float) -> None:
        if np.isnan(self.prefill_start[i]):  # a recompute after preemption keeps the first start
            self.prefill_start[i] = t

    def on_first_token(self, i: int, t: float) -> None:
        if np.isnan(self.first_token[i]):
            self.first_token[i] = t
            self.generated[i] = 1

    def on_preempted(self, i: int, generated: int) -> None:
        self.preemptions[i] += 1
        self.generated[i] = generated

    def on_finish(self, i: int, t: float) -> None:
        self.finish[i] = t
        self.generated[i] = self.osl[i]

    def on_drop(self, i: int, t: float, reason: str) -> None:
        self.dropped[i] = True
        self.finish[i] = t
        self.drop_reason[i] = reason

    def context(self, i: int) -> int:
        """Tokens a recompute must prefill: the prompt plus what was generated so far."""
        return int(self.isl[i] + max(self.generated[i] - 1, 0))

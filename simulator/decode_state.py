"""Continuous-batching decode state of one instance in O(1) work per step.

Each running request advances a fixed number of tokens per step (1, or 1 + its accepted MTP
drafts), so its KV length is linear in the instance's step counter `k`:
    kv_i(k) = c_i + t_i * k   with c_i = kv at admission - t_i * k_admit.
The batch's KV sum is then C + k * T with C = sum c_i and T = sum t_i, kept incrementally, and
finished requests come off a heap keyed by their last step. Admission also reserves
`reserve_ratio` of each request's remaining output (TRT-LLM's guaranteed-no-evict policy is 1.0,
SGLang starts from a new-token ratio of 0.7); the reservation shrinks linearly with k as well.
Preemption (recompute) evicts the most recently admitted requests first, as SGLang does.
"""

from __future__ import annotations

import heapq
import math


class DecodeState:
    def __init__(
        self, capacity_tokens: float, max_running: int, window_tokens: float, reserve_ratio: float = 1.0
    ) -> None:
        self.capacity = capacity_tokens
        self.ratio = reserve_ratio
        self.d_sum = 0.0  # sum of ratio * (remaining_i + t_i * k_admit): reservations, linear in k
        self.max_running = max_running
        self.window = window_tokens  # fixed KV per sequence (sliding windows), in token units
        self.k = 0
        self.c_sum = 0.0
        self.t_sum = 0.0
        self.running: dict[int, tuple[int, float, float, float]] = {}  # id -> (k_admit, t_i, c_i, d_i)
        self._heap: list[tuple[int, int, int]] = []  # (last step, id, admission step)
        self._order: list[int] = []  # admission order, for LIFO preemption (lazy)
        self.n = 0  # running sequences, len(running), kept as a plain field (read ~15 times per request)

    def context_sum(self) -> float:
        """Sum of the running sequences' context lengths (what attention reads)."""
        return self.c_sum + self.k * self.t_sum

    def kv_tokens(self, k: int | None = None) -> float:
        """KV memory in token units: contexts plus the fixed per-sequence window."""
        step = self.k if k is None else k
        return self.c_sum + step * self.t_sum + self.n * self.window

    def committed(self, k: int | None = None) -> float:
        """KV in use plus what is reserved for the running requests' remaining output."""
        step = self.k if k is None else k
        return self.kv_tokens(step) + self.d_sum - self.ratio * step * self.t_sum

    def fits(self, kv0: float, remaining: float = 0.0, extra: float = 0.0) -> bool:
        """Room for a new sequence holding `kv0` tokens that will generate `remaining` more
        (plus `extra` held elsewhere, e.g. prompts being prefilled)?"""
        if self.n >= self.max_running:
            return False
        need = kv0 + self.window + self.ratio * remaining + extra
        return self.committed(self.k + 1) + need <= self.capacity

    def admit(self, i: int, kv0: float, steps: int, tokens_per_step: float, remaining: float = 0.0) -> None:
        c_i = kv0 - tokens_per_step * self.k
        d_i = self.ratio * (remaining + tokens_per_step * self.k)
        if i not in self.running:
            self.n += 1
        self.running[i] = (self.k, tokens_per_step, c_i, d_i)
        self.c_sum += c_i
        self.d_sum += d_i
        self.t_sum += tokens_per_step
        heapq.heappush(self._heap, (self.k + steps - 1, i, self.k))
        self._order.append(i)

    def _remove(self, i: int) -> tuple[int, float, float, float]:
        k0, t_i, c_i, d_i = self.running.pop(i)
        self.n -= 1
        self.c_sum -= c_i
        self.d_sum -= d_i
        self.t_sum -= t_i
        if not self.running:  # keep float drift from accumulating across busy periods
            self.c_sum = self.t_sum = self.d_sum = 0.0
        return k0, t_i, c_i, d_i

    def advance(self) -> list[int]:
        """Count one finished step; return the requests whose last step it was."""
        done = []
        heap = self._heap
        while heap and heap[0][0] <= self.k:
            _, i, k0 = heapq.heappop(heap)
            entry = self.running.get(i)
            if entry is not None and entry[0] == k0:  # skip entries of evicted admissions
                self._remove(i)
                done.append(i)
        self.k += 1
        return done

    def quiet_steps(self) -> int:
        """Steps from now through the one the first running request finishes in, within those whose
        KV fits without a preemption (kv_tokens(k) <= capacity for every step's next counter); 0 when
        nothing runs. Over them the batch does not change (Instance._quiet_steps)."""
        if not self._heap:
            return 0
        steps = self._heap[0][0] - self.k + 1
        if self.t_sum > 0 and self.capacity < math.inf:
            steps = min(steps, math.floor((self.capacity - self.kv_tokens(0)) / self.t_sum - 1e-9) - self.k)
        return steps

    def preempt_to_fit(self) -> list[tuple[int, int]]:
        """Evict newest requests until the next step's KV fits; returns (id, tokens generated)."""
        out: list[tuple[int, int]] = []
        while self.running and self.kv_tokens(self.k + 1) > self.capacity:
            i = self._order.pop()
            if i not in self.running:
                continue
            k0, t_i, _, _ = self._remove(i)
            out.append((i, int(t_i * (self.k - k0))))
        return out

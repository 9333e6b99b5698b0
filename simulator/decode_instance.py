"""The decode instance of a disaggregated deployment: continuous batching, and the KV hand-off from
prefill as its engine does it (`RuntimeOptions.disagg_kv_handoff`, planner/engines/*.yaml).

Everything the decode scheduler does happens between two of its steps (one SimPy event per step):
- `waiting`: requests whose KV it must take in. Under `push` the KV has already landed and the
  request joins the batch; under `decode_pull` (vLLM NixlConnector, TRT-LLM cache transceiver) the
  scheduler allocates the KV and starts reading it (`Context.transfer_s` long), and the request joins
  the batch at the first step boundary after the read has finished (`ready`).
- `prealloc`: under `prealloc_push` (SGLang) a new request waits here until the scheduler has
  pre-allocated its KV; only then may the prefill start (`Context.preallocated`). Its KV, written by
  the prefill after its forward, is polled at a step boundary (`ready`).
A request whose KV is allocated but not yet running holds it (`holding`): later admissions see it.
An idle instance (no running request) wakes when work or a finished read arrives, so it sees both at
once, as vLLM's engine loop (empty steps while requests wait for their KV) and TRT-LLM's generation
server (blocking on the transfer when nothing else is active) do.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator
from typing import Any

from simulator.instances import NEVER_FITS, Instance


class DecodeInstance(Instance):
    kind = "decode"

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.waiting: deque[int] = deque()
        self.prealloc: deque[int] = deque()
        self.ready: deque[int] = deque()
        self.pull = self.timer.inst.runtime.disagg_kv_handoff == "decode_pull"

    @property
    def backlog(self) -> int:
        """Requests bound for this instance and not yet running (the router's load beside the batch)."""
        return len(self.waiting) + len(self.prealloc) + len(self.holding)

    def enqueue_decode(self, i: int) -> None:
        self.waiting.append(i)
        self.notify()

    def enqueue_prealloc(self, i: int) -> None:
        self.prealloc.append(i)
        self.notify()

    def landed(self, i: int) -> None:
        """The KV of a request that holds its allocation here has arrived; it joins at the next boundary."""
        self.ready.append(i)
        self.notify()

    def _hold(self, i: int) -> bool | None:
        """Allocate request i's KV (and its output reservation) if it fits beside the running batch and
        what others hold; None: it can never finish here and was dropped."""
        st, ctx = self.state, self.ctx
        kv0 = ctx.table.context(i) + 1
        remaining = ctx.remaining(i)
        if kv0 + st.window + remaining > st.capacity:  # can never finish here, even alone
            ctx.drop(i, NEVER_FITS)
            return None
        return self.reserve(i, kv0, remaining)

    def admit(self) -> None:
        st, ctx = self.state, self.ctx
        while self.ready and st.n < st.max_running:  # KV allocated and landed: into the batch
            i = self.ready.popleft()
            self.release(i)
            ctx.start_decode(self, i, ctx.table.context(i) + 1)
        while self.prealloc:  # SGLang: pre-allocate, then the prefill may start
            i = self.prealloc[0]
            ok = self._hold(i)
            if ok is False:
                break
            self.prealloc.popleft()
            if ok:
                ctx.preallocated(self, i)
        while self.waiting:
            i = self.waiting[0]
            if self.pull and not ctx.decode_only:  # allocate, start the read; it joins once seen done
                ok = self._hold(i)
                if ok is False:
                    break
                self.waiting.popleft()
                if ok:
                    ctx.pull(self, i)
                continue
            kv0 = ctx.table.context(i) + 1
            remaining = ctx.remaining(i)
            if kv0 + st.window + remaining > st.capacity:  # can never finish here, even alone
                self.waiting.popleft()
                ctx.drop(i, NEVER_FITS)
                continue
            if not self.room(kv0, remaining):
                break
            self.waiting.popleft()
            ctx.start_decode(self, i, kv0)

    def run(self) -> Generator[Any, Any, None]:
        while True:
            self.admit()
            if not self.state.n:
                yield self.sleep()
                continue
            yield from self.decode_step()

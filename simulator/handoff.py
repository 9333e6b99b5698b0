"""How a request moves between pools: into prefill, from prefill to decode (the KV hand-off), into
the decode batch. `Context` (simulator.engine) holds the run's state; this mixin is its hand-off part.

The KV hand-off follows the decode pool's engine (`RuntimeOptions.disagg_kv_handoff`,
planner/engines/*.yaml; simulator.decode_instance does the decode side):
- `push`: the prefill sends the KV when its forward ends (`transfer_s`); the decode scheduler takes
  the request in at its next step boundary.
- `decode_pull` (vLLM, TRT-LLM): when the prefill ends the request goes to a decode instance, whose
  scheduler allocates the KV at its next step boundary and starts the read there; the request joins
  the batch at the first step boundary after the read has ended.
- `prealloc_push` (SGLang): a new request goes to a decode instance first; the prefill may start only
  once that scheduler has pre-allocated its KV at a step boundary; the KV lands `transfer_s` after the
  prefill's forward and is taken in at the next step boundary.
A recompute after preemption prefills again and hands off by push (or pull); a run without a decode
pool ends each request at its first token; a decode-only run takes prompts prefilled, with no hand-off.
A request longer than the model's context window (input + output) is refused at arrival, as the
engines refuse it, and counted as dropped with that reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from simulator.request import RequestTable

if TYPE_CHECKING:
    from simulator.decode_instance import DecodeInstance
    from simulator.instances import Instance
    from simulator.router import Router


class Handoff:
    env: Any
    table: RequestTable
    router: Router
    by_role: dict[str, list[Instance]]
    decode_only: bool
    request_overhead_s: float
    context_window: int | None
    transfer_s: Callable[[int], float]
    handoff: str  # the decode pool's disagg_kv_handoff, "push" without one
    samplers: dict[int, Any]
    prefill_at: dict[int, DecodeInstance]  # requests whose KV a decode instance has pre-allocated

    def finished(self, inst: Instance | None, i: int) -> None:
        raise NotImplementedError

    def remaining(self, i: int) -> int:
        """Output tokens request i still has to generate once (re)admitted to decode."""
        return int(self.table.osl[i] - max(self.table.generated[i], 1))

    def drop(self, i: int, reason: str) -> None:
        raise NotImplementedError

    def arrive(self, i: int) -> None:
        self.table.on_arrival(i, self.env.now)
        window = self.context_window
        if window and self.table.isl[i] + self.table.osl[i] > window:  # the engine refuses it at once
            self.drop(i, f"longer than the model's context window ({window:,} tokens)")
            return
        if self.request_overhead_s:  # the serving path before the engine (RuntimeOptions.request_overhead_s)
            self.env.timeout(self.request_overhead_s).callbacks.append(lambda _ev: self._admit(i))
        else:
            self._admit(i)

    def _admit(self, i: int) -> None:
        if self.decode_only:
            self.table.on_prefill_start(i, self.env.now)
            self._deliver(i, True)
            return
        if self.handoff == "prealloc_push" and self.table.osl[i] > 1:  # SGLang: decode pre-allocates first
            dec = self.router.to_decode(i, self.table)
            self.table.decode_instance[i] = dec.uid
            dec.enqueue_prealloc(i)  # type: ignore[attr-defined]
            return
        self.router.to_prefill(i, self.table).enqueue_prefill(i, int(self.table.isl[i]))

    def preallocated(self, dec: DecodeInstance, i: int) -> None:
        """The decode instance holds request i's KV: its prefill may start."""
        self.prefill_at[i] = dec
        self.router.to_prefill(i, self.table).enqueue_prefill(i, int(self.table.isl[i]))

    def pull(self, dec: DecodeInstance, i: int) -> None:
        """The decode instance has allocated request i's KV and starts reading it."""
        self.env.timeout(self.transfer_s(i)).callbacks.append(lambda _ev: dec.landed(i))

    def prefill_done(self, inst: Instance, i: int) -> None:
        if inst.kind == "aggregated":
            self.table.on_first_token(i, self.env.now)
            if self.table.generated[i] >= self.table.osl[i]:
                self.finished(inst, i)
            else:
                self.start_decode(inst, i, self.table.context(i) + 1)
            return
        first = self.table.preemptions[i] == 0
        dec = self.prefill_at.pop(i, None)
        if dec is not None:  # pre-allocated: the KV lands in its allocation, polled at a step boundary
            self.env.timeout(self.transfer_s(i)).callbacks.append(lambda _ev: dec.landed(i))
        elif self.handoff == "decode_pull" and self.by_role["decode"]:  # the decode side reads it
            self._deliver(i, first)
        else:
            self.env.timeout(self.transfer_s(i)).callbacks.append(lambda _ev: self._deliver(i, first))

    def _deliver(self, i: int, first: bool) -> None:
        # A disaggregated request's first token (computed by prefill, sent with its KV) streams from the
        # decode instance when its scheduler takes the request in (`start_decode`), not when the KV lands:
        # SGLang's decode scheduler emits it from the prebuilt batch it builds out of its waiting queue
        # (srt/disaggregation/decode.py get_new_prebuilt_batch, process_prebuilt), between two decode
        # steps and only once KV is allocated. Prompts that arrive prefilled, or need no decode, end here.
        if first and (self.decode_only or self.table.osl[i] <= 1):
            self.table.on_first_token(i, self.env.now)
        if self.table.generated[i] >= self.table.osl[i]:
            self.finished(None, i)
            return
        dec = self.router.to_decode(i, self.table)
        self.table.decode_instance[i] = dec.uid
        dec.enqueue_decode(i)  # type: ignore[attr-defined]

    def start_decode(self, inst: Instance, i: int, kv0: float) -> None:
        if inst.kind == "decode" and inst.timer.inst.runtime.disagg_first_token_after_step:
            inst.first_pending.append(i)  # vLLM, TRT-LLM: the first token leaves with the first decode step
        else:  # a no-op unless the decode pool streams the first token
            self.table.on_first_token(i, self.env.now)
        remaining = self.remaining(i)  # the first token counts as generated, streamed or not
        sampler = self.samplers.get(inst.uid)
        steps, per_step = sampler.steps(remaining) if sampler else (remaining, 1.0)
        inst.state.admit(i, kv0, steps, per_step, remaining)
        self.table.decode_instance[i] = inst.uid

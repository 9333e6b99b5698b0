"""The aggregated instance: prefill and decode on the same GPUs, scheduled as its engine does
(`runtime.scheduler`, planner/engines/*.yaml). `prefill_first` (SGLang) runs a pending prefill batch
before the next decode step, so prefill stalls the running decodes; `mixed` (vLLM V1, TRT-LLM in-flight
batching) runs every running decode and then prefill chunks in the same step, within one token budget
(decodes first, as vLLM's scheduler takes its running requests before its waiting ones), so prefill
lengthens each step instead of stalling decodes. Decodes beyond the token budget are not split off a
step: the prompts wait until decodes finish and free budget. A prompt is admitted only when its KV
and its output's reservation fit (`_admit`); TRT-LLM's attention-DP balance may hold prompts back
(`simulator.adp_balance`).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from simulator.adp_balance import ADPBalance
from simulator.instances import NEVER_FITS, Instance


class AggregatedInstance(Instance):
    kind = "aggregated"

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        rt, dp = self.timer.inst.runtime, self.timer.inst.parallel.dp_attention
        on = rt.adp_balance_timeout_iters is not None and dp > 1  # TRT-LLM attention-DP balance
        self.adp = ADPBalance(dp, rt.adp_balance_timeout_iters or 0, rt.adp_balance_batching_wait_iters) if on else None

    def _admit(self, entry: list[int]) -> bool | None:
        """Admit a new prompt if its KV and output reservation fit; reserve them at once.
        None: it can never fit this instance and was dropped."""
        st, ctx = self.state, self.ctx
        i = entry[0]
        kv0 = ctx.table.context(i) + 1
        remaining = ctx.remaining(i)
        if kv0 + st.window + remaining > st.capacity:  # can never finish here, even alone
            self.queue.popleft()
            self.queued_tokens -= entry[1]
            ctx.drop(i, NEVER_FITS)
            return None
        return self.reserve(i, kv0, remaining)

    def run(self) -> Generator[Any, Any, None]:
        st = self.state
        with_queue = self._mixed_step if self.timer.inst.runtime.scheduler == "mixed" else self._prefill_first_step
        while True:
            if self.queue and (self.adp is None or self._adp_release()):
                yield from with_queue()
            elif st.n:
                if self.adp is not None and not self.queue:
                    self._adp_release()  # the balance's counts advance on every iteration
                yield from self.decode_step()
            else:
                yield self.sleep()  # an arrival, or KV freed by a finish, wakes it

    def _adp_release(self) -> bool:
        st = self.state
        assert self.adp is not None
        return self.adp.release(len(self.queue), st.n, st.n + len(self.holding), st.max_running)

    def _prefill_first_step(self) -> Generator[Any, Any, None]:
        """SGLang: a pending prefill batch runs before the next decode step."""
        chunks, on, done = self.take_chunks(self._admit)
        if chunks:
            self.ctx.record(self, self.state.n, 0, sum(c[0] for c in chunks))
            yield self.ctx.env.timeout(self.timer.prefill(chunks, on))
            self._prefilled(done)
        elif self.state.n:
            yield from self.decode_step()
        else:
            yield self.sleep()  # a finish frees KV for the waiting prompt

    def _mixed_step(self) -> Generator[Any, Any, None]:
        """vLLM / TRT-LLM: every running decode, then prefill chunks in what is left of the token
        budget, all in one step priced as one batch."""
        st, ctx = self.state, self.ctx
        for i, gen in st.preempt_to_fit():
            ctx.preempted(self, i, gen)
        # each of the pp micro-batches in flight is scheduled with the whole token budget (roofline.pipeline)
        room = self.budget * self.timer.inst.parallel.pp - st.n * (1 + self.drafts)
        chunks, on, done = self.take_chunks(self._admit, room) if room > 0 else ([], [], [])
        if not chunks:
            if st.n:
                yield from self.decode_step()
            else:
                yield self.sleep()  # a finish frees KV for the waiting prompt
            return
        n, tokens = st.n, st.t_sum
        ctx.record(self, n, tokens, sum(c[0] for c in chunks))
        yield ctx.env.timeout(self.timer.mixed(n, st.context_sum(), chunks, self.drafts, on))
        if n:
            self._advance(tokens)
        self._prefilled(done)

    def _prefilled(self, done: list[int]) -> None:
        for i in done:
            self.release(i)
            self.ctx.prefill_done(self, i)

"""SimPy processes of serving instances: the base `Instance` (its queue, prompt chunking and decode
steps) and the prefill instance; the decode instance of a disaggregated deployment is in
`simulator.decode_instance`, the aggregated one in `simulator.aggregated_instance`.

One SimPy event per forward step per instance, or per run of decode steps over which nothing the
scheduler reads changes (`Instance._quiet_steps`). Each loop reads like the engine it models:
admit what fits, run one step (its time from the memoized step-cost model), then hand off the
requests whose step it was. Prefill takes whole or chunked prompts up to a token budget;
decode runs continuous batching with KV-pool admission and preemption by recompute. A request that
could never finish on an instance (its prompt plus output exceed the KV pool) is dropped at admission
with that reason.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

import numpy as np

from simulator.decode_state import DecodeState
from simulator.stepfn import StepTimer

if TYPE_CHECKING:
    from simulator.engine import Context

# Admission refuses a request whose prompt plus output would outgrow the KV pool of an empty
# instance: admitted, it would be preempted and recomputed forever. Engines rule this out up front:
# vLLM refuses to start when max_model_len (prompt + output) exceeds the tokens its KV cache holds
# ("The model's max seq len ... is larger than the maximum number of tokens that can be stored in
# KV cache").
NEVER_FITS = "prompt + output exceed the KV pool of one instance"
RUN_MAX = 512  # decode steps one event may carry (Instance._quiet_steps) ...
RUN_MIN = 64  # ... and the fewest worth carrying: below, the steps go one at a time


class Instance:
    kind = "instance"
    reserved = 0.0  # KV committed to prompts being prefilled, incl. their output reservation
    held = 0.0  # KV those prompts actually occupy

    def __init__(
        self,
        ctx: Context,
        uid: int,
        pool: int,
        timer: StepTimer,
        budget: int,
        capacity: float,
        window: float,
        max_running: int,
        drafts: int,
        reserve: float,
    ) -> None:
        self.ctx, self.uid, self.pool, self.timer = ctx, uid, pool, timer
        self.budget, self.drafts = budget, drafts
        self.state = DecodeState(capacity, max_running, window, reserve)
        self.queue: deque[list[int]] = deque()  # prefill: [id, new tokens left, prefix done, not started]
        self.queued_tokens = 0
        self.wake = ctx.env.event()
        self.pending = False  # work arrived since the loop last looked
        self.seen_blocks: set[int] = set()
        # disaggregated requests admitted since the last step whose first token the engine streams at the
        # end of their first decode step (RuntimeOptions.disagg_first_token_after_step)
        self.first_pending: list[int] = []
        self.quiet = 0  # the next run's length: +1 a step, halved when work arrives (`notify`)
        # KV allocated to requests not yet running (prompts being prefilled, KV being read): id -> (committed, occupied)
        self.holding: dict[int, tuple[float, float]] = {}

    def room(self, kv0: float, remaining: float) -> bool:
        """A sequence of `kv0` tokens that will generate `remaining` more fits beside the running batch and what
        other requests hold (the running-request limit and the KV pool)."""
        st = self.state
        return st.n + len(self.holding) < st.max_running and st.fits(kv0, remaining, self.reserved)

    def reserve(self, i: int, kv0: float, remaining: float) -> bool:
        """Hold request i's KV (`kv0` tokens and the attention window) and the reservation for its `remaining`
        output, where they fit beside the running batch and what other requests hold: the one admission of the
        aggregated and the decode instances."""
        st = self.state
        if not self.room(kv0, remaining):
            return False
        committed = kv0 + st.window + st.ratio * remaining
        self.holding[i] = (committed, kv0 + st.window)
        self.reserved += committed
        self.held += kv0 + st.window
        return True

    def release(self, i: int) -> None:
        """Request i runs (or left): what it held joins the batch's own accounting."""
        committed, occupied = self.holding.pop(i)
        self.reserved -= committed
        self.held -= occupied
        if not self.holding:
            self.reserved = self.held = 0.0

    def notify(self, arrived: bool = True) -> None:
        """Wake the loop: work `arrived` (which halves the quiet stretch the next run expects), or KV
        was freed."""
        self.pending = True
        if arrived:
            self.quiet //= 2
        if not self.wake.triggered:
            self.wake.succeed()

    def sleep(self) -> Any:
        """Wait for work; returns at once if some arrived while the loop was busy."""
        if self.pending:
            self.pending = False
            return self.ctx.env.timeout(0)
        self.wake = self.ctx.env.event()
        return self.wake

    # ---- prefill side
    def enqueue_prefill(self, i: int, context: int) -> None:
        cached = self.ctx.cached_tokens(self, i, context)
        self.queue.append([i, context - cached, cached, 1])
        self.queued_tokens += context - cached
        self.notify()

    def take_chunks(
        self, fits: Any = None, budget: int | None = None
    ) -> tuple[list[tuple[int, int]], list[int], list[int]]:
        """Chunks for one step within `budget` prefill tokens (default: the whole token budget);
        returns (chunks, the attention-DP rank of each, finished ids). Under attention DP the budget
        is split over the ranks, as SGLang splits chunked_prefill_size (server_args
        `_handle_data_parallelism`): each rank takes whole prompts, or a chunk of one, up to its share;
        a prompt sits on one rank, so what a rank cannot take of it waits for the next step while the
        prompts behind it go to the other ranks. Prompts go to the ranks in turn, as the engines spread
        new requests over their DP ranks (TRT-LLM executor_request_queue `_balance_requests_across_ranks`:
        the rank with the fewest active tokens; SGLang's DP controller: round robin; vLLM: the
        least-loaded engine core). A rank also takes at most its running-request limit of prompts (the
        engine's max_batch_size / max_num_seqs per rank; on a prefill server, the prompts one rank
        prefills in a step). Without chunked prefill (`runtime.chunked_prefill`, TRT-LLM's default) a
        prompt goes whole to a rank that has room for all of it, and the step's prefill stops at the
        first prompt no rank has room for (TRT-LLM's MicroBatchScheduler breaks there); a prompt longer
        than a rank's whole budget, which no step could hold, takes a rank of its own."""
        budget = self.budget if budget is None else budget
        dp = self.timer.inst.parallel.dp_attention
        whole = not self.timer.inst.runtime.chunked_prefill
        share = max(1, budget // dp)
        per_rank = max(1, self.state.max_running // dp)
        chunks: list[tuple[int, int]] = []
        on: list[int] = []  # the rank of each chunk
        done: list[int] = []
        cut: list[list[int]] = []  # prompts chunked this step, back to the head of the queue after it
        now, table = self.ctx.env.now, self.ctx.table
        left = [share] * dp  # what each rank may still take this step
        count = [0] * dp  # prompts each rank took this step

        def open_(k: int) -> bool:
            return left[k] > 0 and count[k] < per_rank

        full, r = 0, 0
        while self.queue and budget > 0 and full < dp:
            entry = self.queue[0]
            while not open_(r):
                r = (r + 1) % dp
            if whole:  # a rank with room for the whole prompt (before admission reserves its KV)
                k = self._whole_rank(entry[1], r, left, open_, share, budget)
                if k is None:
                    break
                r = k
            if fits is not None and entry[3]:
                ok = fits(entry)  # None: the prompt was dropped, look at the next one
                if ok is None:
                    continue
                if not ok:
                    break
            take = entry[1] if whole else min(entry[1], left[r], budget)
            entry[3] = 0
            table.on_prefill_start(entry[0], now)
            chunks.append((take, entry[2]))
            on.append(r)
            entry[1] -= take
            entry[2] += take
            left[r] = max(left[r] - take, 0)
            count[r] += 1
            full += not open_(r)
            budget -= take
            self.queued_tokens -= take
            self.queue.popleft()
            if entry[1]:
                cut.append(entry)  # the rest of this prompt goes in the next step
            else:
                done.append(entry[0])
            r = (r + 1) % dp  # the next prompt to the next rank, as the engines' DP balancers spread them
        self.queue.extendleft(reversed(cut))
        return chunks, on, done

    def _whole_rank(
        self, size: int, r: int, left: list[int], open_: Callable[[int], bool], share: int, budget: int
    ) -> int | None:
        """The first rank from `r` on with room for a whole prompt of `size` tokens; None: the step's
        prefill stops here. A prompt longer than a rank's budget with nothing else in the step (which
        no step could hold) takes a rank whose share of this step is untouched."""
        dp = len(left)
        full = max(1, self.budget // dp)
        if budget < size <= full:
            return None
        need = size if size <= full else share
        return next((k for k in ((r + j) % dp for j in range(dp)) if open_(k) and left[k] >= need), None)

    def run(self) -> Generator[Any, Any, None]:
        raise NotImplementedError

    # ---- decode side
    def _quiet_steps(self) -> int:
        """How many decode steps of the running batch can pass as one event: up to the step its first
        request finishes in, while its KV grows without a preemption (`DecodeState` is linear in the
        step counter), at most `RUN_MAX`. Nothing the scheduler looks at changes in between but work
        arriving (`notify`), which ends the run at the step boundary after it; a TRT-LLM attention-DP
        balance (counting iterations) or a KV-aware router (reading the KV in use) takes one at a time.
        A run is at most `quiet` steps long, a count that grows by one a step and halves when work
        arrives: where work arrives every few steps a run would mostly be cut short, and below
        `RUN_MIN` steps the steps go one by one."""
        if getattr(self, "adp", None) is not None or self.ctx.router.policy == "kv_aware":
            return 1
        steps = min(self.state.quiet_steps(), self.quiet, RUN_MAX)
        return steps if steps >= RUN_MIN else 1

    def decode_step(self) -> Generator[Any, Any, None]:
        """One decode step of the running batch, or a run of them (`_quiet_steps`) as one event."""
        st = self.state
        for i, gen in st.preempt_to_fit():
            self.ctx.preempted(self, i, gen)
        if not st.n:
            return
        if self.quiet >= RUN_MIN and (steps := self._quiet_steps()) > 1:
            yield from self._decode_run(steps)
            return
        dt = self.timer.decode(st.n, st.context_sum(), self.drafts)
        tokens = st.t_sum
        self.ctx.record(self, st.n, tokens, 0)
        first = [i for i in self.first_pending if i in st.running]
        self.first_pending = []
        yield self.ctx.env.timeout(dt)
        self.quiet += 1
        for i in first:
            self.ctx.table.on_first_token(i, self.ctx.env.now)
        self._advance(tokens)

    def _decode_run(self, steps: int) -> Generator[Any, Any, None]:
        """`steps` decode steps of an unchanging batch, each priced as one step is (the same step-time
        calls, in order), waited for as one event that work arriving cuts short at the boundary of the
        step in progress; the steps that ran are then written as the steps one at a time would have.
        A cut-short run leaves the step timer's random stream where those steps alone would have, so
        the run's figures are the one-step-at-a-time figures, draw for draw."""
        st, ctx, timer = self.state, self.ctx, self.timer
        env = ctx.env
        n, k0, c_sum, t_sum = st.n, st.k, st.c_sum, st.t_sum
        saved = timer.rng.bit_generator.state if timer.noise else None
        kv_sums = c_sum + (k0 + np.arange(steps)) * t_sum  # DecodeState.context_sum at each step
        now = env.now
        ends = np.cumsum(np.concatenate(([now], timer.decode_run(n, kv_sums, self.drafts))))[1:]
        first = [i for i in self.first_pending if i in st.running]
        self.first_pending = []
        waiting = ctx.waiting(self)
        if self.wake.triggered:
            self.wake = env.event()
        whole = env.timeout(float(ends[-1]) - now)
        yield env.any_of([whole, self.wake])
        if not whole.processed:  # work arrived: the step in progress ends, then the scheduler looks
            j = min(int(np.searchsorted(ends, env.now, side="left")), steps - 1)
            if ends[j] > env.now:
                yield env.timeout(float(ends[j]) - env.now)
            steps = j + 1
            if saved is not None:  # draw again only the steps that ran
                timer.rng.bit_generator.state = saved
                timer.decode_run(n, kv_sums[:steps], self.drafts)
        else:
            self.quiet += steps
        for i in first:
            ctx.table.on_first_token(i, float(ends[0]))
        ctx.record_run(self, now, ends[:steps], n, t_sum, waiting)
        st.k = k0 + steps - 1  # the run's last step is counted (and its finished retired) below
        for i in st.advance():
            ctx.finished(self, i)

    def _advance(self, tokens: float) -> None:
        """The running sequences' tokens of a finished step: count them, advance, retire the done."""
        self.ctx.output_tokens(tokens)
        for i in self.state.advance():
            self.ctx.finished(self, i)


class PrefillInstance(Instance):
    kind = "prefill"

    def run(self) -> Generator[Any, Any, None]:
        env = self.ctx.env
        while True:
            if not self.queue:
                yield self.sleep()
                continue
            chunks, on, done = self.take_chunks()
            self.ctx.record(self, len(chunks), 0, sum(c[0] for c in chunks))
            yield env.timeout(self.timer.prefill(chunks, on))
            for i in done:
                self.ctx.prefill_done(self, i)

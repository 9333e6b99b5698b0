"""TRT-LLM's attention-DP balance (`attention_dp_config: {enable_balance, timeout_iters,
batching_wait_iters}`, TRT-LLM tech blog 10 'ADP Balance Strategy'): with attention data parallelism
every rank runs its own batch, and an iteration lasts as long as its slowest rank, so a context
request on one rank while the others only decode stalls them all. With the balance on, the executor
holds context requests back, from the same all-gathered counts on every rank
(tensorrt_llm/_torch/pyexecutor/py_executor.py `_balance_adp_requests`, each iteration):

- if every rank has a free slot (generation requests < max_batch_size) and a context request:
  the waiting count resets; if every rank also has generation requests, contexts are held for up
  to `batching_wait_iters` iterations (the batching count), then run and the count resets;
  with some rank idle they run at once;
- otherwise the waiting count grows and contexts are held, until it reaches `timeout_iters` (or
  some rank has no generation request): then it resets and whatever contexts there are run.

The counts advance every iteration, with or without contexts waiting, so with fewer new requests
per iteration than ranks a prompt waits for the next timeout, up to `timeout_iters` iterations.
An instance here keeps one queue for all its ranks, and TRT-LLM spreads new requests over the ranks
(tech blog 10: sorted by tokens, dealt round-robin); 'every rank has a context request' is read as
at least one waiting prompt per rank, 'every rank has generation requests' as at least one decoding
sequence per rank, 'a free slot on every rank' as the instance below its running limit.
"""

from __future__ import annotations


class ADPBalance:
    def __init__(self, ranks: int, timeout_iters: int, batching_wait_iters: int) -> None:
        self.ranks = ranks
        self.timeout = timeout_iters
        self.batching = batching_wait_iters
        self.waiting = 0  # adp_ctx_waiting_iters_count
        self.batched = 0  # adp_ctx_batching_wait_iters_count

    def release(self, waiting_prompts: int, decoding: int, running: int, max_running: int) -> bool:
        """Whether this iteration may schedule context requests (one call per iteration)."""
        all_ctx = waiting_prompts >= self.ranks
        all_gen = decoding >= self.ranks
        if running < max_running and all_ctx:
            self.waiting = 0
            if not all_gen:
                return True
            if self.batched < self.batching:
                self.batched += 1
                return False
            self.batched = 0
            return True
        self.waiting += 1
        if self.waiting >= self.timeout or not all_gen:
            self.waiting = 0
            return True
        return False

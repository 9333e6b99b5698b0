"""Pipeline parallelism: one scheduler step of a pp-stage instance, run as pp micro-batches.

Engines keep pp micro-batches in flight, each holding different requests, so every stage is busy
all the time: vLLM V1's engine core runs a batch queue of pp scheduler outputs
(vllm/v1/engine/core.py `step_with_batch_queue`); a request already in flight gets no new tokens
until its result returns (vllm/v1/core/sched/scheduler.py `schedule`: "PP>1 and we have already
scheduled all prompt tokens but they are not finished yet"), and each `schedule()` call starts
from the full token budget, so a cycle of pp micro-batches takes up to pp x max_num_batched_tokens.
TensorRT-LLM's PyTorch executor (`_executor_loop_pp`, one scheduled batch per micro-batch) and
SGLang (`event_loop_pp`) do the same.

`pipelined_cost(inst, batch)` prices the instance's step on `batch` (every running request
advancing once) as pp equal micro-batches of 1/pp of it through the one step-cost model
(`roofline.step.step_cost`): pp x one micro-batch's stage time, plus its share of the head on the
last stage and the stage-to-stage hops. The estimator (planner/model/steps.py) and the simulator
(simulator/stepfn.py) both call it for decode and mixed steps. It does not queue or schedule.
"""

from __future__ import annotations

import math

from roofline.batch import StepBatch
from roofline.deployment import InstanceSpec
from roofline.step import StepCost, step_cost


def micro_batch(batch: StepBatch, pp: int) -> StepBatch:
    """1/pp of `batch`: ceil(decodes / pp) decodes at the same mean KV length, and every prefill
    chunk of n new tokens behind p cached ones cut to n / pp tokens behind p + (n - n / pp) / 2,
    which keeps exactly 1/pp of its linear work and of its causal attention work n (p + n / 2)."""
    if pp == 1:
        return batch
    seqs = math.ceil(batch.decode_seqs / pp - 1e-9)
    chunks = tuple((max(1, round(n / pp)), p + round((n - n / pp) / 2)) for n, p in batch.prefill_chunks)
    return StepBatch(seqs, seqs * batch.decode_kv_mean, chunks, batch.draft_tokens if seqs else 0)


def pipelined(inst: InstanceSpec, cost: StepCost) -> StepCost:
    """The time for the whole batch to advance one step when it runs as pp micro-batches (`cost`
    is one micro-batch's step): each stage busy all the time, the batch advances once every pp x
    stage time, plus its share of the last stage's head and the stage-to-stage hops."""
    pp = inst.parallel.pp
    if pp == 1:
        return cost
    return StepCost(
        cost.stage_time_s * pp + (cost.time_s - cost.stage_time_s * pp) / pp,
        cost.stage_time_s,
        cost.ops,
        cost.tokens * pp,
        cost.hidden_comm_s,
        cost.notes,
    )


def pipelined_cost(inst: InstanceSpec, batch: StepBatch, offload_bytes: float = 0.0) -> StepCost:
    """One step of the whole instance on `batch`, run as pp micro-batches in flight."""
    return pipelined(inst, step_cost(inst, micro_batch(batch, inst.parallel.pp), offload_bytes))

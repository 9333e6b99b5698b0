"""Pipeline-parallel steps of the steady-state model: a batch runs as pp micro-batches."""

from __future__ import annotations

import numpy as np
import pytest

from planner.model.deployment import Pool
from planner.model.steps import decode_step, mixed_step
from roofline.batch import StepBatch
from roofline.deployment import InstanceSpec, Parallelism
from roofline.pipeline import micro_batch, pipelined_cost
from roofline.step import step_cost
from simulator.stepfn import KV_Q, MIXED_KV_Q, StepTimer
from tests.conftest import make_instance


def _pool(pp: int) -> Pool:
    base = make_instance("llama-3.1-70b", "rtx-pro-6000", gpus=1, tp=1, ep=1, dense="nvfp4", kv_cache="fp8")
    inst = InstanceSpec.model_validate(base.model_dump() | {"parallel": Parallelism(gpus=pp, tp=1, pp=pp).model_dump()})
    return Pool("aggregated", 1, inst)


def test_mixed_step_pipelines_like_a_decode_step():
    """A TRT-LLM/vLLM step of decodes plus a prefill chunk, with pp stages, runs as pp micro-batches
    in flight: with no chunk it is exactly the decode step of the same batch."""
    pool = _pool(2)
    assert mixed_step(pool, 300, 1500, 0, 1000).time_s == pytest.approx(decode_step(pool, 300, 1500).time_s)


def test_two_stages_do_not_halve_throughput_per_gpu():
    """PP2 on two GPUs at twice the batch of PP1 on one keeps about the same tokens/s per GPU (each
    stage holds half the layers; the micro-batches keep both busy), as TRT-LLM's RTX PRO 6000 table
    shows (PP2 1,901 vs PP1 1,724 tok/s/GPU at 1000/1000). Before: the whole batch went through each
    stage in turn, 0.54x."""
    one, two = _pool(1), _pool(2)
    per_gpu_1 = 150 / mixed_step(one, 150, 1500, 150, 1000).time_s
    per_gpu_2 = 300 / mixed_step(two, 300, 1500, 300, 1000).time_s / 2
    assert 0.85 <= per_gpu_2 / per_gpu_1 <= 1.15


def test_a_chunk_of_a_long_prompt_carries_its_share_of_the_causal_work():
    """A prompt prefilled over several mixed steps attends to its own earlier tokens: four quarter
    chunks together do the whole prompt's attention work (a fresh quarter-prompt would do 1/4 of it;
    that undercounted long-input TRT-LLM runs by up to 2x)."""
    pool = _pool(1)
    isl = 32768

    def attention_flops(chunk: int) -> float:
        step = mixed_step(pool, 0, 0, chunk, isl)
        return sum(o.flops for o in step.ops if o.name == "attention.prefill")

    assert 4 * attention_flops(isl // 4) == pytest.approx(attention_flops(isl), rel=0.01)


def test_a_micro_batch_holds_one_pp_th_of_the_linear_and_the_causal_work():
    """roofline.pipeline.micro_batch: each prefill chunk keeps 1/pp of its tokens and of its causal
    attention pairs (a cut chunk sits behind the average prefix of its pieces)."""
    batch = StepBatch(10, 10 * 2000.0, ((8000, 0), (3000, 1000)))
    half = micro_batch(batch, 2)
    assert half.decode_seqs == 5
    assert half.decode_kv_mean == batch.decode_kv_mean
    assert half.prefill_tokens == batch.prefill_tokens / 2
    assert half.causal_pairs() == pytest.approx(batch.causal_pairs() / 2, rel=1e-3)


def test_the_simulator_prices_a_pp_step_as_the_estimator_does():
    """Both sides run a PP2 step's batch as two micro-batches in flight (one step-cost path). Before,
    the simulator priced the whole batch through both stages in turn: a 64-decode step of Llama-70B
    on two RTX PRO 6000 read the latency of 64 sequences, the estimator two micro-batches of 32."""
    pool = _pool(2)
    kv = 47.5 * KV_Q  # on the simulator's KV grid
    timer = StepTimer(pool.instance, np.random.default_rng(0), noise=False)
    assert timer.decode(64, 64 * kv, 0) == pytest.approx(decode_step(pool, 64, kv).time_s, rel=1e-9)
    kv_mixed = 11.5 * MIXED_KV_Q  # a mixed step: decodes on its KV grid, 2048 + half a 64-token bucket
    mixed = timer.mixed(64, 64 * kv_mixed, [(2048, 0)], 0)
    assert mixed == pytest.approx(pipelined_cost(pool.instance, StepBatch(64, 64 * kv_mixed, ((2080, 0),))).time_s)
    assert mixed < 0.8 * step_cost(pool.instance, StepBatch(64, 64 * kv_mixed, ((2080, 0),))).time_s


def test_a_batch_solved_a_hair_above_an_integer_prices_that_integer():
    """New-user trial (fourteenth session): `planner explain` of the default plan's row 1 showed 'decode step:
    26.65 ms for 4,097 tokens' at a decode batch of 4,096 (the steady state solved it to 4096.00013)."""
    pool = _pool(1)
    assert decode_step(pool, 4096.00013, 1500).tokens == 4096
    assert decode_step(pool, 4096.01, 1500).tokens == 4097

"""A step of an attention-DP instance is timed as its busiest rank's chunks on every rank, with their
causal attention work kept (simulator.stepfn `_spread`), as the estimator prices a step's prefill."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.batch import StepBatch
from roofline.step import step_cost
from simulator.stepfn import StepTimer
from tests.simulator.helpers import scenario

DEP4 = {
    "model": "qwen3-235b-a22b",
    "hardware": "b200",
    "engine": "trtllm",
    "deployment": {"aggregated": {"gpus_per_instance": 4, "tp": 1, "dp_attention": 4, "ep": 4}},
    "precision": {"dense": "nvfp4", "moe": "nvfp4"},
}


def _timer() -> StepTimer:
    res = scenario(DEP4, {"isl": 8192, "osl": 1024})
    return StepTimer(res.deployment.first("aggregated").instance, np.random.default_rng(0), noise=False)


def test_a_prompts_last_piece_beside_a_fresh_prompt_keeps_its_causal_work():
    timer = _timer()
    rank = [(152, 8040), (7888, 0)]  # the end of one prompt and the start of the next, on one rank
    exact = step_cost(timer.inst, StepBatch.prefill(rank * 4)).time_s
    # the mean chunk (4020 new behind 4020 cached) would attend 1.5x the keys of these two
    assert timer.prefill(rank, [0, 0]) == pytest.approx(exact, rel=0.03)


def test_the_busiest_rank_sets_the_step_not_the_mean_chunk():
    timer = _timer()
    alone = timer.prefill([(8000, 0)], [0])
    assert timer.prefill([(8000, 0), (100, 0)], [0, 1]) == pytest.approx(alone, rel=0.01)
    assert alone == pytest.approx(step_cost(timer.inst, StepBatch.prefill([(8000, 0)] * 4)).time_s, rel=0.02)

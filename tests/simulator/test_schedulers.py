"""Aggregated instances schedule as their engine does (planner/engines/*.yaml `scheduler`).

vLLM V1 and TRT-LLM run the running decodes and prefill chunks in one step within a token budget
(`mixed`); SGLang runs a pending prefill batch before the next decode step (`prefill_first`), so
its running decodes wait through whole prefill steps.
"""

from __future__ import annotations

import numpy as np
import pytest

from planner.model.estimator import estimate
from planner.model.simulate import pool_defs, run_simulation
from roofline.batch import StepBatch
from roofline.step import step_cost
from simulator import PoolDef, SimConfig, build_workload, simulate
from simulator.stepfn import MIXED_KV_Q, TOK_Q, StepTimer, seq_grid
from tests.simulator.helpers import AGG_LLAMA, scenario

WORKLOAD = {"isl": 3000, "osl": 200, "request_rate": 12.0}
CFG = SimConfig(requests=400, seed=5)
# Step log columns (simulator.engine.SimResult.steps)
BATCH, OUT, IN = 2, 3, 4


def _run(engine: str, scheduler: str | None = None) -> tuple[np.ndarray, int]:
    """The step log of a run, and its request count; `scheduler` overrides the engine's policy."""
    res = scenario({**AGG_LLAMA, "engine": engine}, WORKLOAD)
    pools = pool_defs(res)
    if scheduler is not None:
        pools = [
            PoolDef(
                p.role,
                p.instances,
                p.inst.model_copy(update={"runtime": p.inst.runtime.model_copy(update={"scheduler": scheduler})}),
                p.budget_tokens,
            )
            for p in pools
        ]
    wl = build_workload(CFG, res.isl, res.osl, res.concurrency, res.request_rate, None)
    result = simulate(pools, wl, CFG, res.deployment.same_domain)
    return result.steps, len(result.table)


def test_vllm_never_stalls_running_decodes_behind_a_prefill_step():
    """Every vLLM step that has running decodes emits their tokens, prefill chunks or not."""
    steps, _ = _run("vllm")
    running = steps[:, BATCH] > 0
    assert (steps[:, IN] > 0).sum() > 50, "the workload must prefill while decodes run"
    assert (steps[running, OUT] > 0).all()
    assert ((steps[:, IN] > 0) & (steps[:, OUT] > 0)).any(), "some steps carry decodes and prefill together"


def test_sglang_stays_prefill_first():
    """SGLang's default (no --enable-mixed-chunk): prefill steps carry no decode tokens."""
    steps, _ = _run("sglang")
    prefill = steps[:, IN] > 0
    assert (steps[prefill, OUT] == 0).all()
    assert (steps[prefill, BATCH] > 0).any(), "some prefill steps held running decodes back"


def test_mixed_steps_per_request_fall_below_prefill_first():
    """Folding prefill into decode steps removes the separate prefill steps: the same vLLM pool and
    arrivals take fewer forward steps per request mixed than prefill-first."""
    mixed, n = _run("vllm")
    first, _ = _run("vllm", "prefill_first")
    assert len(mixed) / n < 0.97 * len(first) / n


def test_a_mixed_step_is_priced_as_one_batch_of_decodes_and_chunks():
    """The mixed step costs more than its decodes alone and less than its decodes plus a separate
    prefill step of the same chunks (weights are read once for both)."""
    res = scenario({**AGG_LLAMA, "engine": "vllm"}, WORKLOAD)
    inst = pool_defs(res)[0].inst
    timer = StepTimer(inst, np.random.default_rng(0), noise=False)
    both = timer.mixed(64, 64 * 1500.0, [(1024, 0)], 0)
    alone = timer.decode(64, 64 * 1500.0, 0) + timer.prefill([(1024, 0)])
    assert timer.decode(64, 64 * 1500.0, 0) < both < alone
    kv, new = (1500 // MIXED_KV_Q + 0.5) * MIXED_KV_Q, round((1024 // TOK_Q + 0.5) * TOK_Q)  # the memo's grid point
    direct = step_cost(inst, StepBatch(64, 64 * kv, ((new, 0),), 0)).time_s
    assert both == pytest.approx(direct, rel=1e-9)


def test_vllm_estimate_and_simulation_agree_on_kimi_k2_b200_at_3_requests_per_s():
    """Kimi-K2 on 8x B200 with vLLM at 3 req/s: the estimate prices whole prompts folded into a
    share of the decode steps, as the simulator runs them (prefill-first in the simulator gave
    39.8 ms mean TPOT against an estimate of 56.6 ms that spread prefill over every step)."""
    res = scenario(
        {
            "model": "kimi-k2",
            "hardware": "b200",
            "engine": "vllm",
            "deployment": {"aggregated": {"instances": 1, "gpus_per_instance": 8, "tp": 8, "ep": 8}},
        },
        {"isl": 1024, "osl": 1024, "request_rate": 3.0},
    )
    est = estimate(res)
    _, sim = run_simulation(res, SimConfig(requests=1500, seed=0))
    assert sim["tpot_ms"]["mean"] == pytest.approx(est.tpot_s * 1e3, rel=0.05)
    assert sim["ttft_ms"]["mean"] == pytest.approx(est.ttft_s * 1e3, rel=0.25)


def test_mixed_steps_price_the_decode_batch_within_one_sixteenth():
    """The memo grid of a mixed step's decode batch: exact below 16 sequences, within 1/16 above."""
    assert all(seq_grid(s) == s for s in range(1, 16))
    assert all(abs(seq_grid(s) - s) <= s / 16 for s in range(1, 20_000))


def test_the_engines_running_request_limit_caps_the_batch():
    """vLLM's max_num_seqs (per DP rank) holds the running batch even when the KV pool has room."""
    res = scenario({**AGG_LLAMA, "engine": "vllm"}, {"isl": 200, "osl": 50, "concurrency": 32})
    (p,) = pool_defs(res)
    inst = p.inst.model_copy(update={"runtime": p.inst.runtime.model_copy(update={"max_running_per_rank": 4})})
    cfg = SimConfig(requests=200, seed=1)
    wl = build_workload(cfg, res.isl, res.osl, res.concurrency, res.request_rate, None)
    capped = simulate([PoolDef(p.role, 1, inst, p.budget_tokens)], wl, cfg).steps
    free = simulate(pool_defs(res), wl, cfg).steps
    assert capped[:, BATCH].max() <= 4 < free[:, BATCH].max()


def test_each_pipeline_micro_batch_gets_the_whole_token_budget():
    """vLLM V1 with pp stages schedules each of its pp in-flight micro-batches from the whole
    max_num_batched_tokens (roofline.pipeline), so a PP2 instance with a 4096-token budget takes an
    8000-token prompt in one step of two micro-batches; before, it cut it in two steps of 4096 + 3904."""
    base = {
        "model": "llama-3.1-8b",
        "hardware": "h100-sxm",
        "engine": "vllm",
        "deployment": {"aggregated": {"gpus_per_instance": 2, "pp": 2}},
        "runtime": {"max_prefill_tokens": 4096},
    }
    res = scenario(base, {"isl": 8000, "osl": 20, "concurrency": 1})
    cfg = SimConfig(requests=3, seed=1, ep_imbalance_noise=False)
    wl = build_workload(cfg, res.isl, res.osl, res.concurrency, res.request_rate, None)
    steps = simulate(pool_defs(res), wl, cfg).steps
    assert steps[:, IN].max() == 8000
    # the estimator's mixed step holds it whole too (reported where steps with a prompt take most of the
    # time: 2-token answers; at 20 the plain decode steps do)
    busy = scenario(base, {"isl": 8000, "osl": 2, "concurrency": 1})
    assert estimate(busy).decode_step.tokens >= 7_900

"""bench/fit_request_overhead.py: which anchors measure an engine's per-request serving path, and
that each engine profile holds what the fit computes from the train split."""

from __future__ import annotations

import statistics

from bench import fit_request_overhead as fit
from planner import engines

LOW = {
    "metric": "ttft_ms",
    "phase": "end-to-end",
    "workload": {"isl": 233, "osl": 221, "concurrency": 1, "concurrency_scope": "total"},
}


def _with(**workload):
    return {**LOW, "workload": {**LOW["workload"], **workload}}


def test_selection_takes_ttft_at_one_to_four_requests_in_flight_and_short_prompts():
    """At up to MAX_CONCURRENCY (4) requests in flight prefills seldom meet and the simulator replays
    the closed loop, so the residual is the serving path; more requests, per-GPU concurrency, an
    unstated concurrency, a long prompt or another metric measure something else."""
    assert all(fit.selected(_with(concurrency=c)) for c in (1, 2, 3, 4))
    assert not fit.selected(_with(concurrency=5))
    assert not fit.selected(_with(concurrency=4, concurrency_scope="per_gpu"))
    assert not fit.selected(_with(concurrency="unknown"))
    assert not fit.selected(_with(isl=fit.MAX_ISL + 1))
    assert not fit.selected({**LOW, "metric": "tpot_ms"})
    assert not fit.selected({**LOW, "phase": "prefill"})


def test_each_engine_profile_holds_the_median_of_its_train_residuals():
    """The profiles' request_overhead_ms is the fit's output, not a hand-set value: within 15 ms of the
    median residual where an engine has at least MIN_ANCHORS train anchors, else 0; an engine in
    HELD_AT_ZERO stays 0 (each with its reason). If a new train anchor or a change of the step model
    moves a median, rerun `python bench/fit_request_overhead.py` and copy its values."""
    rows = fit.residuals()
    assert len(rows["vllm"]) >= fit.MIN_ANCHORS  # the GPUStack performance-lab runs
    for engine in engines.ENGINES:
        value = engines.profile(engine).request_overhead_ms.value
        got = rows.get(engine, [])
        if engine in fit.HELD_AT_ZERO or len(got) < fit.MIN_ANCHORS:
            assert value == 0.0, engine
        else:
            assert abs(value - max(0.0, statistics.median(v for _, v in got))) <= 15.0, engine

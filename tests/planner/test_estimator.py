"""Steady-state estimates obey Little's law and behave monotonically."""

from __future__ import annotations

import pytest

from planner.inputs.scenario import parse_scenario
from planner.model.defaults import resolve
from planner.model.estimator import estimate, max_users_at_slo
from tests.simulator.helpers import DISAGG_GB200

AGG = {
    "model": "deepseek-v3",
    "hardware": "h200-sxm",
    "deployment": {"aggregated": {"gpus_per_instance": 8, "tp": 8, "ep": 8}},
    "workload": {"isl": 2000, "osl": 500, "concurrency": 8},
}
DISAGG = {**DISAGG_GB200, "workload": {"isl": 2000, "osl": 1000, "concurrency": 256}}


def _res(d, **kw):
    return resolve(parse_scenario({**d, **kw}))


@pytest.mark.parametrize("scenario", [AGG, DISAGG])
def test_closed_loop_obeys_littles_law(scenario):
    e = estimate(_res(scenario))
    rate = e.output_tok_s / _res(scenario).osl
    assert rate * e.e2e_s == pytest.approx(e.concurrency, rel=0.02)


def test_tpot_grows_and_per_user_speed_falls_with_concurrency():
    res = _res(AGG)
    runs = [estimate(res, c) for c in (1, 4, 16, 64)]
    assert [r.tpot_s for r in runs] == sorted(r.tpot_s for r in runs)
    assert runs[-1].output_tok_s > runs[0].output_tok_s


def test_ttft_grows_without_bound_past_the_prefill_capacity_in_open_loop():
    res = _res(DISAGG, workload={"isl": 2000, "osl": 1000, "request_rate": 1.0})
    low = estimate(res)
    res_hi = _res(DISAGG, workload={"isl": 2000, "osl": 1000, "request_rate": 1000.0})
    high = estimate(res_hi)
    assert not low.saturated
    assert high.saturated
    assert "prefill" in high.limit


def test_prefill_throughput_counts_only_the_prefill_pool():
    res = _res(DISAGG, phase="prefill")
    e = estimate(res)
    assert e.gpus == 8
    assert e.input_tok_s_per_gpu > 1000


def test_max_users_at_slo_is_monotone_in_the_target():
    res = _res(AGG)
    tight, _ = max_users_at_slo(res, None, None, 30_000)
    loose, _ = max_users_at_slo(res, None, None, 60_000)
    assert 1 <= tight <= loose


def test_an_impossible_slo_serves_nobody():
    users, _ = max_users_at_slo(_res(AGG), None, 0.01, None)
    assert users == 0


def test_saturated_prompts_come_in_cohorts_only_with_outputs_of_one_length():
    """An offline run's requests finish together only when their outputs are of one length; spread
    outputs (a distribution other than a point, a trace) replace them as a stream."""
    from planner.model.aggregated import cohort_batches
    from simulator import SimConfig

    assert cohort_batches(None)
    assert cohort_batches(SimConfig())
    assert cohort_batches(SimConfig.model_validate({"output_len": {"kind": "fixed", "value": 100}}))
    assert cohort_batches(SimConfig.model_validate({"output_len": {"kind": "uniform", "min": 9, "max": 9}}))
    assert cohort_batches(SimConfig.model_validate({"input_len": {"kind": "lognormal", "mean": 900, "sigma": 0.5}}))
    assert not cohort_batches(SimConfig.model_validate({"output_len": {"kind": "uniform", "min": 90, "max": 110}}))
    assert not cohort_batches(SimConfig.model_validate({"output_len": {"kind": "eos", "mean": 1300, "max": 10240}}))


def test_the_in_flight_batch_of_a_prefill_bound_pool_is_the_fixed_point():
    """b = rate x decode time(b) / instances, solved by secant steps from the batch the pool holds:
    a linear decode time has the closed form (b = 100 / (3 - 2.5) = 200), a convex one its own root."""
    from planner.model.disaggregated import _in_flight

    assert _in_flight(lambda v: 100.0 + 2.5 * v, 1000.0, 3) == pytest.approx(200.0, rel=1e-6)
    b = _in_flight(lambda v: 50.0 + 0.2 * v + 1e-3 * v * v, 4000.0, 3)
    assert b == pytest.approx((50.0 + 0.2 * b + 1e-3 * b * b) / 3, rel=1e-6)

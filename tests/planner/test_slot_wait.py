"""Poisson arrivals wait for a decode slot near the KV capacity (Erlang C), and a point at the capacity
itself has no steady state; a closed loop never waits for a slot."""

from __future__ import annotations

import math

import pytest

from planner.inputs.scenario import parse_scenario
from planner.model.defaults import resolve
from planner.model.estimator import max_batch, point
from planner.model.queueing import erlang_c, slot_wait
from planner.search.score import batch_grid

AGG = {
    "model": "deepseek-v3",
    "hardware": "h200-sxm",
    "deployment": {"aggregated": {"gpus_per_instance": 8, "tp": 8, "ep": 8}},
    "workload": {"isl": 2000, "osl": 500, "concurrency": 8},
}


def test_erlang_c_matches_the_textbook_cases():
    assert erlang_c(1, 0.5) == pytest.approx(0.5)  # M/M/1: P(wait) = rho
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)
    assert slot_wait(1, 0.5, 1.0) == pytest.approx(1.0)  # M/M/1: rho / (1 - rho) x service
    assert slot_wait(8, 8, 1.0) == math.inf
    assert slot_wait(8, 0, 1.0) == 0.0


def test_thousands_of_slots_wait_only_within_a_few_sqrt_of_the_limit():
    c = 7312
    waits = [slot_wait(c, b, 190.0) for b in (6000, c - 3 * c**0.5, c - c**0.5, c - 1)]
    assert waits == sorted(waits)
    assert waits[0] < 1e-6
    assert waits[1] < 0.01
    assert waits[-1] > 100


def test_an_open_loop_point_waits_for_a_slot_and_is_saturated_at_the_capacity():
    dep = resolve(parse_scenario(AGG)).deployment
    cap = max_batch(dep, 2000, 500)
    near = cap - cap**0.5
    closed, opened = point(dep, 2000, 500, 2250, near), point(dep, 2000, 500, 2250, near, poisson=True)
    assert opened.ttft_s > closed.ttft_s  # the slot wait
    assert opened.tpot_s == closed.tpot_s
    assert opened.output_tok_s == closed.output_tok_s
    assert not closed.saturated
    assert point(dep, 2000, 500, 2250, cap, poisson=True).saturated


def test_the_batch_grid_keeps_points_just_below_the_capacity():
    grid = batch_grid(7312)
    assert 7312 in grid
    assert 4096 in grid
    assert [b for b in grid if 4096 < b < 7312] == [round(7312 - 2 * 7312**0.5)]
    assert batch_grid(1) == [1]


def test_an_overloaded_estimate_prints_its_latencies_as_floors():
    from rich.console import Console

    from planner.model.estimator import estimate
    from planner.report.report import print_estimate

    out = {}
    for rate in (0.5, 1000.0):
        con = Console(record=True, width=200)
        e = estimate(resolve(parse_scenario({**AGG, "workload": {"isl": 2000, "osl": 500, "request_rate": rate}})))
        print_estimate(con, "x", e)
        out[rate] = (e.saturated, con.export_text())
    assert not out[0.5][0]
    assert ">= " not in out[0.5][1]
    assert out[1000.0][0]
    assert "TTFT" in out[1000.0][1]
    assert ">= " in out[1000.0][1]
    assert "its queue grows" in out[1000.0][1]

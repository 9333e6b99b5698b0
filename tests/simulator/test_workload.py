"""Arrival processes and length distributions have the statistics they claim, from one seed."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from simulator.config import ArrivalSpec, LengthDist, SimConfig
from simulator.workload import arrival_times, build_workload, eos_stop_chance, sample_lengths


def test_poisson_and_constant_rates():
    rng = np.random.default_rng(0)
    t = arrival_times(ArrivalSpec(kind="poisson", rate=50), 20000, rng)
    assert len(t) / t[-1] == pytest.approx(50, rel=0.03)
    c = arrival_times(ArrivalSpec(kind="constant", rate=4), 5, rng)
    assert np.diff(c).tolist() == pytest.approx([0.25] * 4)


def test_gamma_arrivals_have_the_requested_burstiness():
    t = arrival_times(ArrivalSpec(kind="gamma", rate=10, cv=3.0), 50000, np.random.default_rng(1))
    gaps = np.diff(t)
    assert gaps.std() / gaps.mean() == pytest.approx(3.0, rel=0.08)
    assert 1 / gaps.mean() == pytest.approx(10, rel=0.05)


def test_piecewise_rate_changes_at_the_boundaries():
    spec = ArrivalSpec(kind="piecewise", schedule=[[0.0, 10.0], [100.0, 0.0], [200.0, 50.0]])
    t = arrival_times(spec, 6000, np.random.default_rng(2))
    assert ((t > 100) & (t < 200)).sum() == 0
    assert (t < 100).sum() == pytest.approx(1000, rel=0.1)
    late = t[t > 200]
    assert len(late) / (late[-1] - 200) == pytest.approx(50, rel=0.1)


@pytest.mark.parametrize(
    ("dist", "mean"),
    [
        (LengthDist(kind="fixed", value=7), 7),
        (LengthDist(kind="uniform", min=10, max=30), 20),
        (LengthDist(kind="normal", mean=500, std=50), 500),
        (LengthDist(kind="lognormal", mean=1000, sigma=0.8), 1000),
        (LengthDist(kind="eos", mean=741, max=2048), 741),
        (LengthDist(kind="eos", mean=47, max=128), 47),
    ],
)
def test_length_distributions_have_their_mean(dist, mean):
    x = sample_lengths(dist, 40000, np.random.default_rng(3))
    assert x.min() >= 1
    assert x.mean() == pytest.approx(mean, rel=0.03)


def test_eos_lengths_stop_at_a_constant_rate_and_never_pass_max_tokens():
    x = sample_lengths(LengthDist(kind="eos", mean=741, max=2048), 40000, np.random.default_rng(5))
    assert x.max() == 2048
    assert (x == 2048).mean() == pytest.approx((1 - eos_stop_chance(741, 2048)) ** 2047, rel=0.1)
    # memoryless below the cap: the share past 2 x 300 is the square of the share past 300
    assert (x > 600).mean() == pytest.approx((x > 300).mean() ** 2, rel=0.05)
    assert (sample_lengths(LengthDist(kind="eos", mean=128, max=128), 100, np.random.default_rng(0)) == 128).all()
    with pytest.raises(ValidationError, match="eos lengths need 1 <= mean <= max"):
        LengthDist(kind="eos", mean=300, max=128)


def test_empirical_lengths_resample_a_trace(shared_dir):
    d = LengthDist(kind="empirical", trace=str(shared_dir / "traces" / "splitwise_code.csv"))
    out = sample_lengths(d, 20000, np.random.default_rng(4), which="output")
    assert 20 < out.mean() < 40  # code completions are short (mean 28 tokens)


def test_same_seed_same_workload_and_different_seed_differs():
    cfg = SimConfig(
        requests=200,
        seed=5,
        arrival=ArrivalSpec(kind="poisson", rate=3),
        input_len=LengthDist(kind="lognormal", mean=800, sigma=1.0),
    )
    a, b = build_workload(cfg, 1, 10, None, None), build_workload(cfg, 1, 10, None, None)
    c = build_workload(cfg.model_copy(update={"seed": 6}), 1, 10, None, None)
    assert np.array_equal(a.arrival_s, b.arrival_s)
    assert np.array_equal(a.isl, b.isl)
    assert not np.array_equal(a.isl, c.isl)


def test_specs_name_what_they_miss():
    with pytest.raises(ValidationError, match="gamma arrivals need cv"):
        ArrivalSpec(kind="gamma", rate=1)
    with pytest.raises(ValidationError, match="uniform lengths need min <= max"):
        LengthDist(kind="uniform", min=9, max=3)

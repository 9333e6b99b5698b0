"""Arrival processes and length distributions have the statistics they claim, from one seed."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from simulator.config import ArrivalSpec, LengthDist, SimConfig
from simulator.workload import arrival_times, build_workload, eos_stop_chance, in_flight_kv, sample_lengths


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


def _table(tmp_path, rows):
    p = tmp_path / "lengths.csv"
    p.write_text("input_length,output_length\n" + "".join(f"{i},{o}\n" for i, o in rows))
    return str(p)


def test_input_and_output_resampled_from_one_table_stay_paired_and_output_is_cut_at_max(tmp_path):
    table = _table(tmp_path, [(100, 10), (2000, 30000), (700, 5)])
    row = {"kind": "empirical", "trace": table, "format": "lengths"}
    cfg = SimConfig(requests=3000, input_len=LengthDist(**row), output_len=LengthDist(**row, max=20000))
    w = build_workload(cfg, 1, 1, 8, None)
    pairs = set(zip(w.isl.tolist(), w.osl.tolist(), strict=True))
    assert pairs == {(100, 10), (2000, 20000), (700, 5)}  # never (100, 5): rows are drawn whole
    # an input read from the output column is not a row's pair: the two are drawn apart
    apart = cfg.model_copy(update={"input_len": LengthDist(**row, column="output")})
    w = build_workload(apart, 1, 1, 8, None)
    assert len(set(zip(w.isl.tolist(), w.osl.tolist(), strict=True))) > 3
    cut = sample_lengths(LengthDist(**row, max=20000), 3000, np.random.default_rng(1), which="output")
    assert cut.max() == 20000


def test_in_flight_kv_weights_each_sequence_by_how_long_it_stays():
    assert in_flight_kv(None, 1000, 1000) == 1500.0  # fixed lengths: isl + osl/2
    assert in_flight_kv(SimConfig(), 800, 200) == 900.0
    # outputs 1 or 3999 tokens in equal numbers: the long ones hold the batch for 3999 of every 4000 steps
    spread = SimConfig(output_len=LengthDist(kind="uniform", min=1, max=3999))
    kv = in_flight_kv(spread, 1000, 2000)
    assert kv == pytest.approx(1000 + (2000**2 + 2000**2 / 3) / (2 * 2000), rel=0.01)  # E[L^2] / (2 E[L])
    assert kv > 1000 + 2000 / 2
    # geometric (stop-at-EOS) outputs: E[L^2] / E[L] is about twice the mean
    eos = SimConfig(output_len=LengthDist(kind="eos", mean=500, max=100000))
    assert in_flight_kv(eos, 1000, 500) == pytest.approx(1000 + 500, rel=0.03)
    assert in_flight_kv(eos, 1000, 500) == in_flight_kv(eos, 1000, 500)  # seeded


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

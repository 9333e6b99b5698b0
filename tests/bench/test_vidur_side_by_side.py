"""bench/vidur_side_by_side.py: the committed Vidur requests are what Vidur's generator produces
(16,384 requests, gaps truncated at 3 s, prefill + decode clipped to 4,096 tokens) and read as a
Splitwise trace; medians refuse repetitions that simulated different step counts; bad options
exit 2."""

from __future__ import annotations

import numpy as np
import pytest

from bench import vidur_side_by_side as vs
from simulator.traces import read_trace


def test_dumped_requests_match_vidur_generator() -> None:
    t = read_trace(vs.REQUESTS_CSV, "splitwise")
    assert len(t) == vs.N_REQUESTS
    gaps = np.diff(t.arrival_s)
    assert gaps.min() >= 0
    assert gaps.max() <= 3.0 + 1e-9  # Vidur's Poisson generator caps gaps at 3 / qps
    assert 0.9 < 1 / gaps.mean() < 1.2  # qps 1 with truncated gaps: ~1.05 req/s
    assert (t.isl + t.osl).max() <= 4096


def test_median_refuses_different_step_counts() -> None:
    row = {"requests": 10, "steps": 100, "loop_cpu_s": 1.0, "loop_wall_s": 1.0}
    row |= {"process_cpu_s": 2.0, "process_wall_s": 2.0, "sim_time_s": 5.0}
    med = vs.median_row([row, row | {"loop_cpu_s": 3.0}, row | {"loop_cpu_s": 2.0}])
    assert med["loop_cpu_s"] == 2.0
    assert med["us_per_step"] == pytest.approx(2.0 / 100 * 1e6)
    with pytest.raises(SystemExit):
        vs.median_row([row, row | {"steps": 101}])


def test_bad_reps_exits_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.argv", ["vidur_side_by_side.py", "--reps", "0"])
    with pytest.raises(SystemExit) as exc:
        vs.main()
    assert exc.value.code == 2

"""`planner simulate` says what traffic it ran, and when a trace or arrival process does not run the
rate the steady-state estimate prices (examples/deepseek-v3-h200-trace-replay.yaml: the estimate
priced workload.request_rate 25 req/s while the trace replayed ~119 req/s, and nothing said so)."""

import json
from pathlib import Path

from typer.testing import CliRunner

from planner.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_trace_replay_names_its_rate_and_the_estimates(tmp_path):
    text = (EXAMPLES / "deepseek-v3-h200-trace-replay.yaml").read_text()
    p = tmp_path / "s.yaml"
    text = text.replace("request_rate: 119}", "request_rate: 25}")  # the example's rate before it agreed
    p.write_text(text.replace("../../shared", str((EXAMPLES / "../../shared").resolve())))
    out = CliRunner().invoke(app, ["simulate", str(p), "--requests", "600"])
    assert out.exit_code == 0, out.output
    assert "traffic: trace replay (time_scale 25)" in out.output
    assert "prices workload.request_rate 25 req/s" in out.output


def test_examples_state_one_traffic():
    """The trace-replay and piecewise examples priced 25 and 5 req/s in the estimate while their
    simulations ran 119 and 7.44 req/s: an example's workload.request_rate is the rate it simulates."""
    for name in ("deepseek-v3-h200-trace-replay.yaml", "qwen3-235b-daily-ramp.yaml"):
        out = CliRunner().invoke(app, ["simulate", str(EXAMPLES / name), "--json"])
        assert out.exit_code == 0, out.output
        assert "traffic_note" not in json.loads(out.output), name


def test_poisson_traffic_has_no_mismatch_note(tmp_path):
    text = (EXAMPLES / "qwen3-235b-daily-ramp.yaml").read_text().split("simulation:")[0]
    p = tmp_path / "s.yaml"
    p.write_text(text + "simulation: {requests: 600}\n")
    out = CliRunner().invoke(app, ["simulate", str(p), "--json"])
    assert out.exit_code == 0, out.output
    summary = json.loads(out.output)
    assert summary["traffic"].startswith("Poisson arrivals at 7.44 req/s")
    assert "traffic_note" not in summary


def test_an_unsteady_run_of_traffic_that_changes_by_design_does_not_ask_for_more_requests():
    """A piecewise rate schedule (examples/qwen3-235b-daily-ramp.yaml) has no steady state: its warning
    says the figures describe the whole changing traffic; a stationary process is told to run longer."""
    from planner.model.simulate import _unsteady
    from simulator import SimConfig

    ramp = SimConfig.model_validate({"arrival": {"kind": "piecewise", "schedule": [[0, 2.0], [120, 8.0]]}})
    assert "traffic changes over the run" in _unsteady(ramp, 0.35)
    assert "--requests" not in _unsteady(ramp, 0.35)
    gamma = SimConfig.model_validate({"arrival": {"kind": "gamma", "rate": 12, "cv": 4}})
    assert "use more requests" in _unsteady(gamma, 0.10)

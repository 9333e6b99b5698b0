"""A run of quiet decode steps taken as one event (`Instance._decode_run`) gives the figures of the
same steps taken one at a time, request for request and draw for draw, whatever cuts a run short:
Poisson and bursty arrivals, a closed loop, disaggregated hand-offs (decode pull and SGLang's
pre-allocation), MTP, the expert-parallel noise, a trace."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from planner.inputs.scenario import load_scenario
from planner.model.defaults import resolve
from planner.model.simulate import run_simulation
from simulator import SimConfig, instances

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CASES = [
    ("deepseek-v3-gb200-disagg.yaml", {}),
    ("deepseek-v3-h200-trace-replay.yaml", {}),
    ("deepseek-v32-h200-trtllm.yaml", {}),
    ("dsv4flash-rtxpro-decode-c16.yaml", {}),
    ("llama-8b-bursty.yaml", {}),
    ("qwen3-235b-daily-ramp.yaml", {}),
    ("deepseek-v3-gb200-disagg.yaml", {"router": "round_robin"}),
]


def _run(name: str, extra: dict[str, object]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    res = resolve(load_scenario(EXAMPLES / name), EXAMPLES)
    cfg = SimConfig(requests=240, seed=5, **extra)  # type: ignore[arg-type]
    result, _ = run_simulation(res, cfg, EXAMPLES, extend=False)
    return result.table.first_token.copy(), result.table.finish.copy(), np.asarray(result.steps)


def _in_time_order(steps: np.ndarray) -> np.ndarray:
    return steps[np.lexsort((steps[:, 1], steps[:, 0]))]  # a run's steps are logged when it ends


@pytest.mark.parametrize(("name", "extra"), CASES)
def test_runs_of_decode_steps_give_the_one_step_figures(monkeypatch, name, extra):
    taken: list[int] = []
    run = instances.Instance._decode_run

    def counted(self: instances.Instance, steps: int) -> Generator[Any, Any, None]:
        taken.append(steps)
        return run(self, steps)

    monkeypatch.setattr(instances.Instance, "_decode_run", counted)
    monkeypatch.setattr(instances, "RUN_MIN", 4)  # runs in these short cases too
    runs = _run(name, extra)
    assert taken  # (the case ran decode steps together)
    monkeypatch.setattr(instances, "RUN_MAX", 1)  # every decode step its own event
    one = _run(name, extra)
    # the same times to rounding: a run's end is reached as start + (end - start)
    np.testing.assert_allclose(runs[0], one[0], rtol=1e-12, atol=0)  # first tokens
    np.testing.assert_allclose(runs[1], one[1], rtol=1e-12, atol=0)  # finishes
    assert runs[2].shape == one[2].shape  # the same steps ...
    np.testing.assert_allclose(_in_time_order(runs[2]), _in_time_order(one[2]), rtol=1e-9, atol=1e-12)

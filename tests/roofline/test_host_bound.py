"""Host-bound steps: an engine's per-request host work overlaps the GPU step and shows only past it."""

from __future__ import annotations

import pytest

from roofline.batch import StepBatch
from roofline.step import step_cost
from tests.conftest import make_instance


def _with_host(us: float, **kw):
    inst = make_instance("qwen3-30b-a3b", "b200", gpus=1, tp=1, ep=1, dense="nvfp4", moe="nvfp4", **kw)
    return inst.model_copy(update={"runtime": inst.runtime.model_copy(update={"host_us_per_request": us})})


def test_host_time_below_the_gpu_step_costs_nothing():
    """With the overlap scheduler the host prepares step n+1 while the GPU runs step n: a small batch
    (little host work) keeps its GPU time exactly."""
    batch = StepBatch.decode(4, 2000)
    assert step_cost(_with_host(36.0), batch).time_s == step_cost(_with_host(0.0), batch).time_s


def test_a_host_bound_step_lasts_the_host_time():
    """Past the GPU time the step lasts requests x host time per request: max(GPU, host)."""
    batch = StepBatch.decode(4000, 100)
    gpu = step_cost(_with_host(0.0), batch).time_s
    host = 4000 * 50e-6
    assert host > gpu  # the case this test is about
    assert step_cost(_with_host(50.0), batch).time_s == pytest.approx(host)


def test_host_work_is_per_attention_dp_rank():
    """Each attention-DP rank runs its own executor over its own requests: the host time of a step is
    that of one rank's share of the batch."""
    inst = make_instance("qwen3-235b-a22b", "b200", gpus=4, tp=1, dp=4, ep=4, dense="nvfp4", moe="nvfp4")
    inst = inst.model_copy(update={"runtime": inst.runtime.model_copy(update={"host_us_per_request": 200.0})})
    batch = StepBatch.decode(4 * 1000, 100)
    assert step_cost(inst, batch).time_s == pytest.approx(1000 * 200e-6)


def test_a_scenario_can_state_the_host_time_per_request():
    """A stated host time per request wins over the engine profile's value for the backend."""
    from planner.inputs.scenario import Scenario
    from planner.model.defaults import resolve

    base = {
        "model": "qwen3-30b-a3b",
        "hardware": "b200",
        "engine": "trtllm",
        "deployment": {"aggregated": {"instances": 1, "gpus_per_instance": 1, "tp": 1, "ep": 1}},
        "precision": {"dense": "nvfp4", "moe": "nvfp4"},
        "mtp": None,
        "workload": {"isl": 1000, "osl": 1000, "concurrency": 1},
    }
    stated = resolve(Scenario.model_validate(base | {"runtime": {"host_us_per_request": 5}}))
    assert stated.deployment.pools[0].instance.runtime.host_us_per_request == 5.0


def _eager(backend: str, us: float = 1.0, pdl: bool = True):
    inst = make_instance("qwen3-235b-a22b", "b200", gpus=4, tp=1, dp=4, ep=4, dense="nvfp4", moe="nvfp4")
    rt = inst.runtime.model_copy(update={"host_us_per_request": us, "backend": backend, "pdl": pdl})
    return inst.model_copy(update={"runtime": rt})


def test_a_pytorch_executor_launches_an_eager_step_from_the_host():
    """A step with prefill is not replayed from a CUDA graph: the PyTorch executor dispatches each of its
    kernels from Python (launch_gap_eager_us per launch), host time that the GPU waits for once it
    exceeds the GPU time, even with PDL (which overlaps prologues on the GPU, not host dispatch)."""
    batch = StepBatch(8, 8 * 100, ((16, 0),) * 4)  # small: the GPU work is shorter than the launches
    fast = _eager("pytorch").model_copy(
        update={"runtime": _eager("pytorch").runtime.model_copy(update={"launch_gap_eager_us": 500.0})}
    )
    slow = step_cost(fast, batch)
    host = next(o for o in slow.ops if o.name == "host_per_request")
    assert host.time_s > 0
    launches_s = slow.time_s - sum(o.time_s for o in slow.ops if o.name != "host_per_request")
    assert launches_s == pytest.approx(host.time_s)
    assert slow.time_s > step_cost(_eager("pytorch"), batch).time_s


def test_eager_launches_are_not_host_time_for_graph_steps_or_a_tensorrt_engine():
    """A decode-only step replays a CUDA graph (one launch), and a TensorRT engine is enqueued by the C++
    executor: neither pays per-kernel Python dispatch."""
    big = {"launch_gap_eager_us": 500.0}
    for backend, batch in (("pytorch", StepBatch.decode(8, 100)), ("tensorrt", StepBatch(8, 800, ((16, 0),) * 4))):
        inst = _eager(backend)
        inst = inst.model_copy(update={"runtime": inst.runtime.model_copy(update=big)})
        assert all(o.name != "host_per_request" for o in step_cost(inst, batch).ops)

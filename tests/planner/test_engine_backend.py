"""TRT-LLM's two runtimes (PyTorch executor, TensorRT engine with the C++ executor) are engine data:
a deployment states `runtime.backend` or gets the engine version's default, listed as assumed, and
the host time per request per step comes from the profile's value for that backend."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from planner.engines import profile
from planner.inputs.scenario import ScenarioError, parse_scenario
from planner.model.defaults import resolve

ROOT = Path(__file__).resolve().parents[2]
OVERVIEW = ROOT / "validation/public/trtllm-perf-overview.yaml"
BASE = {
    "model": "qwen3-30b-a3b",
    "hardware": "b200",
    "engine": "trtllm",
    "deployment": {"aggregated": {"instances": 1, "gpus_per_instance": 1, "tp": 1, "ep": 1}},
    "precision": {"dense": "nvfp4", "moe": "nvfp4"},
    "mtp": None,
    "workload": {"isl": 1000, "osl": 1000, "concurrency": 8},
}


def _resolved(**runtime: object):
    res = resolve(parse_scenario(BASE | {"runtime": runtime}))
    return res, res.deployment.pools[0].instance.runtime


def test_trtllm_profile_gives_a_host_time_for_each_backend_and_a_sourced_default():
    """Both runtimes carry their own sourced value; the default is the TRT-LLM >= 1.0 one (PyTorch)."""
    b = profile("trtllm").backends
    assert b is not None
    assert b.default.value == "pytorch"
    assert "release notes" in b.default.source
    assert set(b.host_us_per_request) == {"pytorch", "tensorrt"}
    assert all(v.source for v in b.host_us_per_request.values())


def test_an_unknown_backend_is_the_default_and_listed_as_assumed():
    """A TRT-LLM deployment that does not say its runtime runs the default one and says so."""
    res, rt = _resolved()
    want = profile("trtllm").backends.host_us_per_request["pytorch"].value  # type: ignore[union-attr]
    assert rt.backend == "pytorch"
    assert rt.host_us_per_request == want > 0
    assert any(n.startswith("runtime.backend: pytorch") for n in res.assumed)


def test_a_stated_backend_picks_its_host_time_and_is_not_assumed():
    res, rt = _resolved(backend="tensorrt")
    want = profile("trtllm").backends.host_us_per_request["tensorrt"].value  # type: ignore[union-attr]
    assert rt.backend == "tensorrt"
    assert rt.host_us_per_request == want
    assert not any(n.startswith("runtime.backend") for n in res.assumed)


def test_single_runtime_engines_have_no_backend_and_no_host_time():
    """SGLang and vLLM have one runtime: no backend, no per-request host time from their profiles."""
    res = resolve(parse_scenario(BASE | {"engine": "sglang"}))
    rt = res.deployment.pools[0].instance.runtime
    assert rt.backend is None
    assert rt.host_us_per_request == 0.0


def test_a_backend_on_another_engine_is_an_error_naming_the_field():
    with pytest.raises(ScenarioError, match=r"runtime.backend"):
        parse_scenario(BASE | {"engine": "vllm", "runtime": {"backend": "tensorrt"}})
    with pytest.raises(ScenarioError, match=r"runtime.backend"):
        parse_scenario(BASE | {"runtime": {"backend": "onnx"}})


def test_overview_anchors_state_the_backend_their_edition_used():
    """The v0.17 edition (commit 258c754) built TensorRT engines (trtllm-bench build, --engine_dir);
    the later editions say testing used the PyTorch backend."""
    anchors = yaml.safe_load(OVERVIEW.read_text())["anchors"]
    for a in anchors:
        want = "tensorrt" if "258c7540c03517def55d9a5aadfa9288af474e1b" in a["url"] else "pytorch"
        assert a["runtime"]["backend"] == want, a["id"]

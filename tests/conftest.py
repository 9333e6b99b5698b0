"""Shared fixtures: catalog lookups and a small instance builder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import settings

from roofline.catalog import get_hardware, get_model
from roofline.deployment import InstanceSpec, MTPConfig, Parallelism, RuntimeOptions
from roofline.precision import PrecisionMix

SHARED = Path(__file__).resolve().parents[2] / "shared"

# CI explores the same examples every run, so a landing never depends on a lucky draw;
# locally hypothesis keeps exploring new ones.
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")


def make_instance(
    model: str = "deepseek-v3",
    hardware: str = "h200-sxm",
    gpus: int = 8,
    tp: int = 8,
    dp: int = 1,
    ep: int = 8,
    mtp: MTPConfig | None = None,
    **prec: str,
) -> InstanceSpec:
    mix = {"attention": "bf16", "kv_cache": "bf16", "dense": "fp8", "moe": "fp8"} | prec
    return InstanceSpec(
        model=get_model(model),
        hardware=get_hardware(hardware),
        parallel=Parallelism(gpus=gpus, tp=tp, dp_attention=dp, ep=ep),
        precision=PrecisionMix(**mix),
        runtime=RuntimeOptions(),
        mtp=mtp,
    )


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.exists():
        pytest.skip("../shared is not beside the checkout")
    return SHARED


@pytest.fixture(scope="session")
def default_scored():
    """The default question scored only (no simulation), once per session: (question, answer)."""
    from planner.inputs.question import DEFAULT_QUESTION
    from planner.search.plan import plan

    q = DEFAULT_QUESTION.model_copy(update={"verify_top": 0})
    return q, plan(q, workers=1)


@pytest.fixture(scope="session")
def default_plan_cli(tmp_path_factory):
    """`planner plan --json --chart front.html` with no question, once per session: (JSON, chart HTML)."""
    from typer.testing import CliRunner

    from planner.cli import app

    chart = tmp_path_factory.mktemp("default") / "front.html"
    out = CliRunner().invoke(app, ["plan", "--json", "--chart", str(chart)])
    assert out.exit_code == 0, out.output
    return json.loads(out.output), chart.read_text()

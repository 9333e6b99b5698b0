"""Shared fixtures: catalog lookups and a small instance builder."""

from __future__ import annotations

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

"""The busiest EP rank's load (roofline.imbalance) reproduces the measurement it is taken from
(TensorRT-LLM tech blog 4, DeepSeek-R1 EP32: (max - mean) / mean 1.564 without EPLB, 0.109 with it at
9 slots per rank), EPLB follows each engine's default, and the simulator's per-step draws average to
the estimator's figure."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.deployment import RuntimeOptions
from roofline.imbalance import imbalance, max_normal_mean, max_normal_quantiles, popularity_excess
from roofline.ops import expected_imbalance
from tests.conftest import make_instance


def test_expected_maximum_of_normals_matches_known_values():
    # E[max] of n standard normals (tabulated: 0.5642, 1.0294, 1.4236, 2.0697): the quantile grid's mean
    for n, known in ((2, 0.5642), (4, 1.0294), (8, 1.4236), (32, 2.0697)):
        assert float(np.mean(max_normal_quantiles(n))) == pytest.approx(known, rel=0.005)
        # the busiest rank is never below the mean: E[max(M, 0)], a small clipped tail above it
        assert known * 0.995 <= max_normal_mean(n) < known + 0.12
    assert max_normal_mean(8) == pytest.approx(1.4236, rel=0.005)
    assert max_normal_mean(1) == 0.0


def test_reproduces_the_blog_measurement_at_ep32():
    inst = make_instance(gpus=32, tp=1, dp=32, ep=32)
    assert expected_imbalance(inst, 1024) - 1 == pytest.approx(1.564, abs=0.01)
    eplb = inst.model_copy(update={"runtime": RuntimeOptions(redundant_experts=32)})
    assert expected_imbalance(eplb, 1024) - 1 == pytest.approx(0.109, abs=0.01)


def test_fewer_experts_per_rank_carry_more_of_a_hot_expert():
    ep4, ep8, ep72 = (popularity_excess(ep, 256, False) for ep in (4, 8, 72))
    assert ep4 < ep8 < ep72
    assert ep8 == pytest.approx(0.375)
    assert popularity_excess(72, 288, True) == popularity_excess(8, 256, True) < 0.05
    assert popularity_excess(1, 256, False) == 0.0


def test_eplb_is_on_with_redundant_experts_or_as_stated():
    assert not RuntimeOptions().load_balanced
    assert RuntimeOptions(redundant_experts=32).load_balanced
    assert RuntimeOptions(eplb=True).load_balanced
    assert not RuntimeOptions(redundant_experts=32, eplb=False).load_balanced


def test_engine_defaults_decide_eplb():
    from planner.engines import runtime_options
    from roofline.catalog import get_hardware
    from roofline.deployment import Parallelism

    hw = get_hardware("b200")
    wide, node = Parallelism(gpus=16, tp=1, dp_attention=16, ep=16), Parallelism(gpus=8, tp=1, dp_attention=8, ep=8)
    assert runtime_options("sglang", "decode", wide, hw).load_balanced  # large-scale EP recipe
    assert not runtime_options("sglang", "decode", node, hw).load_balanced  # ServerArgs enable_eplb False
    for engine in ("trtllm", "vllm"):
        assert not runtime_options(engine, "decode", wide, hw).load_balanced
    assert runtime_options("trtllm", "decode", wide, hw, {"eplb": True}).load_balanced


@pytest.mark.parametrize("ep", [2, 4, 8, 72])
def test_simulator_draws_average_to_the_estimate(ep):
    z = np.array(max_normal_quantiles(ep))
    pop, pairs = popularity_excess(ep, 256, False), 16.0
    draws = [imbalance(pop, pairs, float(v)) for v in z]
    assert float(np.mean(draws)) == pytest.approx(imbalance(pop, pairs, max_normal_mean(ep)), rel=1e-9)


def test_a_hot_expert_cannot_take_more_than_every_token():
    # 8 experts of top-2: one expert holds at most all tokens, 4 mean loads, an excess of 3
    assert popularity_excess(8, 8, False, experts=8, top_k=2) == pytest.approx(3.0)
    assert popularity_excess(8, 256, False, experts=256, top_k=8) == popularity_excess(8, 256, False)


def test_stated_eplb_off_drops_the_wide_ep_replicas():
    from planner.engines import runtime_options
    from roofline.catalog import get_hardware
    from roofline.deployment import Parallelism

    wide = Parallelism(gpus=16, tp=1, dp_attention=16, ep=16)
    rt = runtime_options("sglang", "decode", wide, get_hardware("b200"), {"eplb": False})
    assert rt.redundant_experts == 0
    assert not rt.load_balanced

"""Projections that read the same input run as one GEMM, as serving engines run them
(roofline.attention_ops.projection_gemms, roofline.ops.FFN_GEMMS): the count sets each GEMM's size
for the calibrated efficiency and its launches."""

from __future__ import annotations

import pytest

from planner.engines import profile
from roofline.attention_ops import attention_ops, projection_gemms
from roofline.batch import StepBatch
from roofline.deployment import MTPConfig
from roofline.ops import ffn_ops
from roofline.step import step_cost
from tests.conftest import make_instance


def _op(inst, name):
    return next(o for o in step_cost(inst, StepBatch.decode(1, 1000)).ops if o.name == name)


def _launches(inst, name):
    b = StepBatch.decode(1, 1000)
    return sum(o.launches for o in attention_ops(inst, b, 1.0) + ffn_ops(inst, b, 1.0) if o.name == name)


def _unfused(inst):
    return inst.model_copy(update={"runtime": inst.runtime.model_copy(update={"fused_mla_a_proj": False})})


@pytest.mark.parametrize(
    ("model", "fused", "unfused"),
    [("llama-3.1-8b", 2, 2), ("deepseek-v3", 3, 4), ("deepseek-v3.2", 6, 7)],
)
def test_gemms_per_layer_by_attention_kind(model, fused, unfused):
    """GQA: QKV + o; MLA: fused q_a/kv_a + q_b + o (4 where q_a and kv_a are separate, as in
    runtime.engine); DSA adds the indexer's three projections."""
    inst = make_instance(model, "h200-sxm", gpus=8, tp=8, ep=8 if model != "llama-3.1-8b" else 1)
    assert projection_gemms(inst) == fused
    assert projection_gemms(_unfused(inst)) == unfused
    layers = inst.model.num_layers
    assert _launches(inst, "attention.proj") == pytest.approx(fused * layers)


def test_gated_ffns_are_two_gemms():
    inst = make_instance("deepseek-v3", "h200-sxm")
    assert _launches(inst, "dense_ffn") == pytest.approx(2 * inst.model.dense_layers)
    assert _launches(inst, "moe.shared_expert") == pytest.approx(2 * inst.model.moe_layers)


def test_one_fused_gemm_is_not_slower_than_its_parts():
    """Same weights in fewer, larger GEMMs: at batch 1 on the calibrated H200 the fused
    projections take no longer than the separate ones (larger GEMMs reach more of the bandwidth)."""
    inst = make_instance("deepseek-v3", "h200-sxm")
    fused, split = _op(inst, "attention.proj"), _op(_unfused(inst), "attention.proj")
    assert fused.bytes == split.bytes
    assert fused.time_s <= split.time_s


def test_every_serving_engine_profile_fuses_the_mla_a_projections():
    for engine in ("sglang", "vllm", "trtllm", "other"):
        p = profile(engine)
        assert p.fused_mla_a_proj.value is True
        assert p.fused_mla_a_proj.source


def test_mtp_drafts_keep_each_gemm_at_its_own_size():
    """Each MTP draft is one more pass: its GEMMs are priced at their own size (calls scale with the
    drafts like FLOPs and bytes), not as one GEMM drafts times as large."""
    one = make_instance("deepseek-v3", "h200-sxm", mtp=MTPConfig(draft_tokens=1, accepted_tokens=0.8))
    three = make_instance("deepseek-v3", "h200-sxm", mtp=MTPConfig(draft_tokens=3, accepted_tokens=2.0))
    b1, b3 = StepBatch.decode(4, 1000, draft_tokens=1), StepBatch.decode(4, 1000, draft_tokens=3)
    (p1,) = [o for o in step_cost(one, b1).ops if o.name == "mtp.attention.proj"]
    (p3,) = [o for o in step_cost(three, b3).ops if o.name == "mtp.attention.proj"]
    assert p3.bytes == pytest.approx(3 * p1.bytes, rel=0.01)
    assert p3.time_s == pytest.approx(3 * p1.time_s, rel=0.05)

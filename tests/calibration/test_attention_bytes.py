"""The calibration tables are indexed by bytes per call: the measured side (runtime.ops and
calibration.fit) and the step model (roofline.attention_ops) must count attention bytes alike."""

from __future__ import annotations

import pytest

from calibration.fit import point_bytes
from roofline.attention_ops import attention_ops
from roofline.batch import StepBatch
from roofline.calibrated import gqa_decode_bytes, mla_decode_bytes, mla_prefill_bytes
from tests.conftest import make_instance

LAYERS = 61  # deepseek-v3: attention_ops sums over the layers an instance holds


def _op(ops, name):
    return next(o for o in ops if o.name == name)


def test_the_step_model_counts_decode_bytes_as_the_tables_were_built():
    """A measured decode point of batch 8 x ctx 2048 and the step model's decode op of the same
    batch are counted with one formula (KV reads only, no query/output traffic)."""
    inst = make_instance(gpus=1, tp=1, ep=1)
    att = _op(attention_ops(inst, StepBatch.decode(8, 2048), 1.0), "attention.decode")
    point = {"family": "mla_decode", "fmt": "bf16", "params": {"batch": 8, "ctx": 2048, "heads": 128}, "bytes": 1.0}
    assert att.bytes / LAYERS == pytest.approx(point_bytes(point))
    assert point_bytes(point) == mla_decode_bytes(8 * 2048, 512, 64, 2)


def test_the_step_model_counts_gqa_decode_bytes_as_the_tables_were_built():
    """Llama-3.1-8B at TP1 (32 query heads, 8 KV heads, head_dim 128, 32 layers): the step model's
    decode op per layer and a measured point of the same shape move the same bytes, K and V of the
    KV heads only."""
    inst = make_instance("llama-3.1-8b", gpus=1, tp=1, ep=1)
    att = _op(attention_ops(inst, StepBatch.decode(8, 2048), 1.0), "attention.decode")
    params = {"batch": 8, "ctx": 2048, "heads": 32, "kv_heads": 8, "head_dim": 128}
    point = {"family": "gqa_decode", "fmt": "bf16", "params": params, "bytes": 1.0}
    assert att.bytes / 32 == pytest.approx(point_bytes(point))
    assert point_bytes(point) == gqa_decode_bytes(8 * 2048, 8, 128, 2) == 8 * 2048 * 8 * 2 * 128 * 2
    assert (att.fmt, att.calls, att.rows) == ("bf16", 32, 8)  # looked up per layer call, by its KV format


def test_the_step_model_counts_prefill_bytes_as_the_tables_were_built():
    inst = make_instance(gpus=1, tp=1, ep=1)
    att = _op(attention_ops(inst, StepBatch.prefill([(1024, 4096), (1024, 4096)]), 1.0), "attention.prefill")
    params = {"batch": 2, "new": 1024, "prefix": 4096, "heads": 128}
    point = {"family": "attn_prefill", "fmt": "bf16", "params": params, "bytes": 1.0}
    assert att.bytes / LAYERS == pytest.approx(point_bytes(point))
    assert point_bytes(point) == mla_prefill_bytes(2048, 8192, 128, 192, 128)


def test_other_families_keep_their_measured_bytes():
    assert point_bytes({"family": "gemm", "fmt": "bf16", "params": {"m": 1}, "bytes": 1234.0}) == 1234.0


def test_the_runtime_ops_use_the_same_counts():
    """runtime.ops.attention sets its bytes from the shared functions (checked on the source: the
    ops themselves need flashinfer and a GPU)."""
    from pathlib import Path

    src = (Path(__file__).resolve().parents[2] / "runtime" / "ops" / "attention.py").read_text()
    assert "self.bytes = mla_decode_bytes(batch * ctx, CKV, KPE, kvb)" in src
    assert "self.bytes = mla_prefill_bytes(batch * new, batch * prefix, heads, qk, V_HEAD)" in src
    gqa = (Path(__file__).resolve().parents[2] / "runtime" / "ops" / "gqa.py").read_text()
    assert "self.bytes = gqa_decode_bytes(batch * ctx, kv_heads, head_dim, kvb)" in gqa

"""Runtime ops against plain-torch references on fresh random inputs, over parametrized grids.
GPU only: skipped cleanly where CUDA is absent (CI)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.mark.parametrize("kv", ["bf16", "fp8"])
@pytest.mark.parametrize(("batch", "ctx"), [(1, 100), (4, 2048), (33, 700)])
def test_mla_decode_matches_reference(batch, ctx, kv):
    from runtime.ops.attention import MLADecode

    MLADecode(batch, ctx, 16, kv).check()


@pytest.mark.parametrize("kv", ["bf16", "fp8"])
@pytest.mark.parametrize(("batch", "ctx", "heads", "kv_heads", "head_dim"), [(1, 100, 32, 8, 128), (5, 700, 64, 8, 64)])
def test_gqa_decode_matches_reference(batch, ctx, heads, kv_heads, head_dim, kv):
    from runtime.ops.gqa import GQADecode

    GQADecode(batch, ctx, heads, kv_heads, head_dim, kv).check()


@pytest.mark.parametrize(("batch", "new", "prefix"), [(1, 256, 0), (2, 300, 700), (3, 128, 64)])
def test_mla_prefill_with_cached_prefix_matches_reference(batch, new, prefix):
    from runtime.ops.attention import MLAPrefill

    MLAPrefill(batch, new, prefix, heads=16).check()


@pytest.mark.parametrize(("fmt", "scaling"), [("bf16", "tensor"), ("fp8", "tensor"), ("fp8", "block")])
@pytest.mark.parametrize("m", [1, 64, 512])
def test_dense_gemms_match_reference(m, fmt, scaling):
    from runtime.ops.gemm import DenseGemm

    if scaling == "block" and m < 256:
        pytest.skip("block scales are the prefill path")
    DenseGemm(m, 1536, 7168, fmt, scaling).check()


@pytest.mark.parametrize("fmt", ["bf16", "fp8"])
@pytest.mark.parametrize("tokens", [1, 32, 256])
def test_grouped_expert_gemms_match_reference(tokens, fmt):
    from runtime.ops.gemm import GroupedGemm

    GroupedGemm(8, tokens, 4096, 7168, fmt).check()


@pytest.mark.parametrize("tokens", [1, 17, 256])
def test_moe_layer_routing_permutation_combine_match_reference(tokens):
    from runtime.ops.moe import MoELayer

    MoELayer(tokens, experts=32, hidden=1024, inter=256).check()


def test_rmsnorm_and_rope():
    from runtime.ops.moe import RMSNormOp, rope

    RMSNormOp(300).check()
    x = torch.randn(5, 4, 64, device="cuda")
    pos = torch.arange(5, device="cuda")
    y = rope(x, pos)
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1), atol=1e-4, rtol=1e-4)  # rotations keep norms
    torch.testing.assert_close(y[0], x[0])  # position 0 is the identity

"""Which formats each architecture can run, and what they cost in bytes."""

from __future__ import annotations

import pytest

from roofline.catalog import get_hardware
from roofline.errors import PrecisionError
from roofline.precision import BYTES_PER_PARAM, gemm_rate_key
from tests.conftest import make_instance


def test_nvfp4_on_hopper_is_an_error_that_names_the_field_and_the_alternatives():
    with pytest.raises(PrecisionError, match=r"precision.moe: nvfp4 .*Blackwell.*h200-sxm is sm_90.*Allowed"):
        make_instance(moe="nvfp4")


def test_nvfp4_runs_on_fp4_tensor_cores_on_blackwell():
    assert gemm_rate_key("nvfp4", get_hardware("gb200-nvl72"), "x") == "fp4"
    assert gemm_rate_key("nvfp4", get_hardware("rtx-pro-6000"), "x") == "fp4"


def test_mxfp4_on_hopper_falls_back_to_bf16_math():
    assert gemm_rate_key("mxfp4", get_hardware("h100-sxm"), "x") == "bf16"


def test_fp8_attention_requires_an_fp8_kv_cache():
    with pytest.raises(PrecisionError, match="kv_cache: fp8"):
        make_instance(attention="fp8", kv_cache="bf16")


def test_bytes_per_parameter_include_scale_factors():
    assert BYTES_PER_PARAM["nvfp4"] == 0.5 + 1 / 16
    assert BYTES_PER_PARAM["mxfp4"] == 0.5 + 1 / 32
    assert BYTES_PER_PARAM["bf16"] == 2 * BYTES_PER_PARAM["fp8"] - 2 * 4 / 128**2


def test_mxfp4_on_blackwell_runs_at_the_fp8_rate_of_its_mxfp8_activations():
    """No engine quantizes activations to FP4 for an MXFP4 checkpoint (TRT-LLM #6908, SGLang)."""
    for hw in ("b200", "gb300-nvl72", "rtx-pro-6000"):
        assert gemm_rate_key("mxfp4", get_hardware(hw), "x") == "fp8"

"""Each engine's own kernels on an architecture (planner/engines `arch.<sm>.kernels`): the MXFP4
slot-GEMV seen in SGLang (seed 003) is not what TRT-LLM or vLLM run on sm_120."""

from __future__ import annotations

from planner.inputs.scenario import parse_scenario
from planner.model.defaults import resolve
from planner.model.estimator import estimate


def _gpt_oss_rtx(engine: str) -> dict:
    return {
        "name": f"gpt-oss-120b on one RTX PRO 6000, {engine}",
        "model": "gpt-oss-120b",
        "hardware": "rtx-pro-6000",
        "engine": engine,
        "deployment": {"aggregated": {"instances": 1, "gpus_per_instance": 1, "tp": 1}},
        "precision": {"kv_cache": "fp8"},
        "workload": {"isl": 1024, "osl": 1024, "concurrency": 256},
    }


def _kernel(engine: str, family: str) -> str:
    res = resolve(parse_scenario(_gpt_oss_rtx(engine)))
    rt = res.deployment.pools[0].instance.runtime
    from roofline.kernels import select

    return select(res.hardware.arch, family, "mxfp4", rt.kernel_overrides, rt.engine_kernels).name


def test_each_engine_runs_its_own_mxfp4_moe_on_sm120() -> None:
    assert _kernel("sglang", "moe_gemv") == "triton-mxfp4-slot-gemv-sm120"
    assert _kernel("sglang", "moe_gemm") == "marlin-w4a16-sm120"
    assert _kernel("vllm", "moe_gemv") == "marlin-w4a16-sm120"
    assert _kernel("trtllm", "moe_gemv") == "cutlass-fp4-grouped-sm120"


def test_trtllm_gpt_oss_on_rtx_pro_6000_is_not_priced_as_a_cuda_core_fallback() -> None:
    # Before engine kernels, every engine got SGLang's slot-GEMV: 46 output tok/s/GPU at C=256,
    # a TPOT of 5.6 s (MLPerf v6.0 publishes ~1,900 tok/s/GPU for TRT-LLM on this GPU).
    r = estimate(resolve(parse_scenario(_gpt_oss_rtx("trtllm"))))
    assert r.output_tok_s_per_gpu > 1000

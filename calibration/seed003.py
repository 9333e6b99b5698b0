"""Derive the sm_120 fallback-kernel efficiencies from the seed-003 decode profile.

Seed 003 (DeepSeek-V4-Flash, 4x RTX PRO 6000, TP4, SGLang, MXFP4 experts) profiled a decode step
at concurrency 16: TPOT 510 ms, of which the Triton sparse-MLA attention fallback took 39% and the
MXFP4 MoE slot-GEMV fallback 38%. Both run on CUDA cores. Given the FLOPs and bytes our op model
assigns to those two kernels at that batch, this solves for
- the sparse-MLA fallback's compute efficiency (vs the CUDA-core FP32 peak), and
- the slot-GEMV's memory efficiency (it re-reads expert weights for every routed token),
so that the kernels take those shares. `python -m calibration.seed003` prints them; the values in
`roofline.kernels` must match (a test checks it).
"""

from __future__ import annotations

from planner.engines import runtime_options
from roofline.attention_ops import attention_ops
from roofline.batch import StepBatch
from roofline.catalog import get_hardware, get_model
from roofline.deployment import InstanceSpec, Parallelism, RuntimeOptions
from roofline.kernels import KERNELS
from roofline.ops import ffn_ops
from roofline.precision import PrecisionMix

TPOT_S = 0.510
ATTENTION_SHARE = 0.39
MOE_SHARE = 0.38
CONCURRENCY = 16
KV_LEN = 1024 + 1024 / 2  # the planner's default workload (isl 1024, osl 1024) at mid-decode


def seed003_instance() -> InstanceSpec:
    """The profiled deployment, with SGLang's sm_120 kernels (the MXFP4 slot-GEMV) and no CUDA graphs."""
    hw, parallel = get_hardware("rtx-pro-6000"), Parallelism(gpus=4, tp=4)
    sglang = runtime_options("sglang", "decode", parallel, hw)
    return InstanceSpec(
        model=get_model("deepseek-v4-flash"),
        hardware=hw,
        parallel=parallel,
        precision=PrecisionMix(attention="bf16", kv_cache="fp8", dense="fp8", moe="mxfp4"),
        runtime=RuntimeOptions(cuda_graphs=False, engine_kernels=sglang.engine_kernels),
    )


def fit() -> dict[str, float]:
    inst = seed003_instance()
    batch = StepBatch.decode(CONCURRENCY, KV_LEN)
    hw = inst.hardware
    att = [o for o in attention_ops(inst, batch, 1.0) if o.name == "attention.decode"]
    moe = next(o for o in ffn_ops(inst, batch, 1.0) if o.name == "moe.experts")
    att_path = KERNELS["triton-sparse-mla-sm120"]
    moe_path = KERNELS["triton-mxfp4-slot-gemv-sm120"]
    att_fixed = sum(o.launches for o in att) * att_path.fixed_s
    att_flops = sum(o.flops for o in att)
    att_eff = att_flops / (hw.cuda_core_fp32_tflops * 1e12 * (ATTENTION_SHARE * TPOT_S - att_fixed))
    moe_fixed = moe.launches * moe_path.fixed_s
    moe_eff = moe.bytes / (hw.mem_bw * (MOE_SHARE * TPOT_S - moe_fixed))
    return {"sparse_mla_compute_eff": att_eff, "slot_gemv_memory_eff": moe_eff}


if __name__ == "__main__":
    for k, v in fit().items():
        print(f"{k}: {v:.6f}")

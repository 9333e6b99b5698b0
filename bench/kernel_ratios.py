"""Kernel-level ratios the seeds report, computed by the step-cost model (not stored anywhere):
FP8 vs BF16 decode attention on GB200 (seed 000: about 1.8x) and NVFP4 vs FP8 MoE GEMMs
(seed 000: up to 1.9x), over decode batch sizes. Prints a table, saves bench/results/kernel_ratios.json.
"""

from __future__ import annotations

import json
from pathlib import Path

from roofline.batch import StepBatch
from roofline.catalog import get_hardware, get_model
from roofline.deployment import InstanceSpec, Parallelism, RuntimeOptions
from roofline.precision import PrecisionMix
from roofline.step import step_cost

ROOT = Path(__file__).resolve().parents[1]


def _inst(**prec: str) -> InstanceSpec:
    mix = {"attention": "bf16", "kv_cache": "bf16", "dense": "fp8", "moe": "fp8"} | prec
    return InstanceSpec(
        model=get_model("deepseek-v3"),
        hardware=get_hardware("gb200-nvl72"),
        parallel=Parallelism(gpus=48, dp_attention=48, ep=48),
        precision=PrecisionMix(**mix),
        runtime=RuntimeOptions(),
    )


def _op_time(inst: InstanceSpec, batch: StepBatch, name: str) -> float:
    return sum(o.time_s for o in step_cost(inst, batch).ops if o.name == name)


def main() -> None:
    rows = []
    print("| decode batch / GPU | attention bf16 ms | attention fp8 ms | ratio | MoE fp8 ms | MoE nvfp4 ms | ratio |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for per_gpu in (16, 64, 256, 768, 1408):
        b = StepBatch.decode(48 * per_gpu, 2000)
        ab = _op_time(_inst(), b, "attention.decode")
        af = _op_time(_inst(attention="fp8", kv_cache="fp8"), b, "attention.decode")
        mf = _op_time(_inst(), b, "moe.experts")
        mn = _op_time(_inst(moe="nvfp4"), b, "moe.experts")
        rows.append(
            {
                "batch_per_gpu": per_gpu,
                "attention_bf16_ms": ab * 1e3,
                "attention_fp8_ms": af * 1e3,
                "attention_ratio": ab / af,
                "moe_fp8_ms": mf * 1e3,
                "moe_nvfp4_ms": mn * 1e3,
                "moe_ratio": mf / mn,
            }
        )
        print(
            f"| {per_gpu} | {ab * 1e3:.2f} | {af * 1e3:.2f} | {ab / af:.2f}x | {mf * 1e3:.2f} | {mn * 1e3:.2f} | "
            f"{mf / mn:.2f}x |"
        )
    out = ROOT / "bench" / "results" / "kernel_ratios.json"
    out.write_text(json.dumps(rows, indent=2))
    print(f"saved {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

"""Compile-only check of the Blackwell kernels `runtime.registry` names (sm_100a for B200/GB200,
sm_120a for RTX PRO 6000), run on a machine without those GPUs: flashinfer's JIT modules are
built with FLASHINFER_CUDA_ARCH_LIST set to the target, one process per module, all in parallel
under one deadline; the built library's embedded machine code is listed with cuobjdump. torch's
own kernels (matmul, grouped GEMMs) ship prebuilt: the check reads torch's arch list.

Nothing is run: "builds" means the module compiled and links for that architecture, not that it
is correct or fast there. Modules that need trtllm-gen cubins fetched at build time cannot build
on a machine without network access and say so.

Usage (needs nvcc and flashinfer): python -m runtime.build_check --out FILE [--deadline-s 420]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ARCH_ENV = {"sm_100": "10.0a", "sm_120": "12.0a"}
BF16, I32 = "torch.bfloat16", "torch.int32"
# (arch, registry op, kernel, python expression building the flashinfer JitSpec)
MODULES = [
    ("sm_100", "mla_decode", "trtllm-gen MLA", "attention.modules.gen_trtllm_gen_fmha_module()"),
    ("sm_100", "attn_prefill", "cutlass fmha sm100",
     f"attention.modules.gen_fmha_cutlass_sm100a_module({BF16}, {BF16}, {BF16}, {I32}, 192, 128, 0, False, False)"),
    ("sm_100", "gemm_fp8_decode", "gemm_fp8_nt_groupwise", "gemm.core.gen_gemm_sm100_module()"),
    ("sm_100", "gemm_fp4", "mm_fp4 cutlass", "gemm.core.gen_gemm_sm100_module_cutlass_fp4()"),
    ("sm_100", "moe_gemm_fp8", "trtllm-gen fused MoE", "fused_moe.gen_trtllm_gen_fused_moe_sm100_module()"),
    ("sm_120", "mla_decode", "xqa MLA", f"xqa.gen_xqa_module_mla({BF16}, {BF16}, 64, 576, 128)"),
    ("sm_120", "attn_prefill", "fa2 prefill",
     "attention.modules.gen_batch_prefill_module("
     f"'fa2', {BF16}, {BF16}, {BF16}, {I32}, 192, 128, 0, False, False, False)"),
    ("sm_120", "gemm_fp8_decode", "gemm_fp8_nt_groupwise", "gemm.core.gen_gemm_sm120_module()"),
    ("sm_120", "gemm_fp4", "mm_fp4 cutlass", "gemm.core.gen_gemm_sm120_module_cutlass_fp4()"),
    ("sm_120", "moe_gemm_fp4", "cutlass fused MoE",
     "fused_moe.gen_cutlass_fused_moe_sm120_module(use_fast_build=True)"),
]  # fmt: skip
ALIASES = {"gemm_fp8_decode": ("gemm_fp8_prefill",), "moe_gemm_fp8": ("moe_gemm_fp4",)}  # same module

CHILD = """
import sys, torch
import flashinfer.jit.attention.modules, flashinfer.jit.gemm.core, flashinfer.jit.fused_moe, flashinfer.jit.xqa
from flashinfer import jit
spec = eval("jit." + sys.argv[1], {"jit": jit, "torch": torch})
if sys.argv[2:] != ["--spec-only"]:
    spec.build()
print(spec.get_library_path())
"""


def _start(arch: str, expr: str, jobs: int, jit_dir: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "FLASHINFER_CUDA_ARCH_LIST": ARCH_ENV[arch], "MAX_JOBS": str(jobs),
           "FLASHINFER_JIT_DIR": str(jit_dir)}  # fmt: skip
    return subprocess.Popen([sys.executable, "-c", CHILD, expr], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip


def _sass(lib: str) -> list[str]:
    try:
        out = subprocess.run(
            ["cuobjdump", "--list-elf", lib], capture_output=True, text=True, timeout=60, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return sorted({w.split(".")[-2] for w in out.split() if w.endswith(".cubin") and "sm_" in w})


def torch_arches() -> dict[str, str]:
    import torch  # noqa: PLC0415

    have = torch.cuda.get_arch_list()
    return {a: ("builds (prebuilt in torch), not run here" if a in have else "not in torch's arch list")
            for a in ("sm_100", "sm_120")}  # fmt: skip


def run(deadline_s: float, root: Path) -> list[dict[str, Any]]:
    jobs = max(2, (os.cpu_count() or 8) // len(MODULES))
    t0 = time.monotonic()
    procs = [
        (arch, op, kernel, expr, _start(arch, expr, jobs, root / f"{arch}-{op}")) for arch, op, kernel, expr in MODULES
    ]
    results = []
    for arch, op, kernel, expr, p in procs:
        left = max(1.0, deadline_s - (time.monotonic() - t0))
        try:
            out, _ = p.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            status = f"did not finish within {deadline_s:.0f} s"
        else:
            status = "builds, not run here" if p.returncode == 0 else "build failed"
        lib = out.strip().splitlines()[-1] if p.returncode == 0 and out.strip() else ""
        results.append({"arch": arch, "op": op, "kernel": kernel, "module": expr, "status": status,
                        "seconds": round(time.monotonic() - t0, 1), "sass": _sass(lib) if lib else [],
                        "log_tail": "" if p.returncode == 0 else out[-1500:]})  # fmt: skip
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--deadline-s", type=float, default=420.0)
    ap.add_argument("--jit-dir", type=Path, default=Path("/tmp/fi-build-check"))
    a = ap.parse_args()
    from runtime.sweep import provenance  # noqa: PLC0415

    res = {
        "provenance": provenance(),
        "torch": torch_arches(),
        "aliases": ALIASES,
        "modules": run(a.deadline_s, a.jit_dir),
    }
    a.out.write_text(json.dumps(res, indent=1))
    for m in res["modules"]:
        print(f"{m['arch']} {m['op']:16s} {m['kernel']:24s} {m['status']} ({m['seconds']} s) {m['sass']}")


if __name__ == "__main__":
    main()

"""Real GPU kernels (torch, flashinfer) that produce calibration data.

The only package that imports torch or flashinfer (install extra `runtime`); it never imports
the simulator. `runtime.ops` holds the ops of a DeepSeek-style layer with plain-torch references,
`runtime.registry` chooses kernels by GPU architecture, `runtime.sweep` times shape grids and
writes a profile with provenance (`planner calibrate`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from roofline.errors import PlannerError


def require_cuda() -> None:
    """Raise a clear error where torch or a CUDA GPU is missing."""
    try:
        import torch  # noqa: PLC0415  (optional extra)
    except ImportError as exc:
        raise PlannerError("the runtime needs torch: pip install 'moe-capacity-planner[runtime]'") from exc
    if not torch.cuda.is_available():
        raise PlannerError("the runtime needs a CUDA GPU; none is visible here")


def calibrate(ops: str, out: Path, budget_s: float, check: bool, log: Callable[[str], Any]) -> None:
    """`planner calibrate`: time the comma-separated op families `ops` on this machine's GPU (and `comm`,
    the collectives across its GPUs, one process per GPU) and write the profile(s) to `out`."""
    require_cuda()
    from runtime.sweep import FAMILIES, run_sweep  # noqa: PLC0415

    families = [f.strip() for f in ops.split(",") if f.strip()]
    bad = [f for f in families if f not in (*FAMILIES, "comm")]
    if bad:
        raise PlannerError(f"--ops: unknown {', '.join(bad)}; allowed: {', '.join((*FAMILIES, 'comm'))}")
    if "comm" in families:  # collectives across this machine's GPUs, one process per GPU
        from runtime.comm_sweep import run_comm_sweep  # noqa: PLC0415

        families.remove("comm")
        comm_out = out if not families else out.with_name(f"{out.stem}-comm{out.suffix}")
        try:
            comm_profile = run_comm_sweep(comm_out, log=log)
        except RuntimeError as exc:
            raise PlannerError(f"--ops comm: {exc}") from exc
        log(f"{len(comm_profile['points'])} communication points in {comm_out}")
    if families:
        profile = run_sweep(families, out, budget_s, check=check, log=log)
        log(f"{len(profile['points'])} points in {out}")

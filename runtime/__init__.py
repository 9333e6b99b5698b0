"""Real GPU kernels (torch, flashinfer) that produce calibration data.

The only package that imports torch or flashinfer (install extra `runtime`); it never imports
the simulator. `runtime.ops` holds the ops of a DeepSeek-style layer with plain-torch references,
`runtime.registry` chooses kernels by GPU architecture, `runtime.sweep` times shape grids and
writes a profile with provenance (`planner calibrate`).
"""

from __future__ import annotations

from roofline.errors import PlannerError


def require_cuda() -> None:
    """Raise a clear error where torch or a CUDA GPU is missing."""
    try:
        import torch  # noqa: PLC0415  (optional extra)
    except ImportError as exc:
        raise PlannerError("the runtime needs torch: pip install 'moe-capacity-planner[runtime]'") from exc
    if not torch.cuda.is_available():
        raise PlannerError("the runtime needs a CUDA GPU; none is visible here")

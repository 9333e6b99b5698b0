"""Ops of a DeepSeek-style layer on real kernels, each with a plain-torch reference.

Every op follows the flashinfer split: construction plans (allocates inputs, builds metadata);
`run()` is what gets timed; `reference()` recomputes the result in plain torch (fp32 math) for
correctness checks; `flops` and `bytes` use the same formulas as `roofline.ops`, so a measured
time maps straight to an efficiency.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class GpuOp:
    name: str
    family: str  # roofline kernel family the measurement calibrates
    fmt: str  # bf16 | fp8
    params: dict[str, Any]
    flops: float = 0.0
    bytes: float = 0.0
    launches: int = 1
    tol: tuple[float, float] = (2e-2, 2e-2)  # atol, rtol against the reference
    kernel: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def run(self) -> torch.Tensor:
        raise NotImplementedError

    def reference(self) -> torch.Tensor:
        raise NotImplementedError

    def check(self) -> None:
        """Compare `run()` with the reference on this op's random inputs."""
        got = self.run().float()
        want = self.reference().float()
        torch.testing.assert_close(got[: want.shape[0]], want, atol=self.tol[0], rtol=self.tol[1])

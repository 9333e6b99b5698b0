"""How the engine's random-weight router spreads a decode batch over the 32 local experts: distinct
experts hit per MoE layer, against the 32 * (1 - (31/32)^B) that balanced random routing gives.
The step model assumes balanced routing; a concentrated router reads fewer expert weights.

Usage (on a GPU): python -m runtime.engine.routing OUT.json
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import torch

from runtime.engine.model import EXPERTS, Layer, Model
from runtime.engine.serve import Engine, Req
from runtime.ops.moe import rmsnorm
from runtime.sweep import provenance

HITS: list[int] = []
_ffn = Layer.ffn


def _counting_ffn(self: Layer, x: torch.Tensor) -> torch.Tensor:
    if not self.dense:
        h = rmsnorm(x, self.norm2)
        top = (torch.sigmoid(h.float() @ self.gate.float().t()) + self.bias).topk(1, dim=-1).indices
        HITS.append(int(top.unique().numel()))
    return _ffn(self, x)


def main() -> None:
    torch.manual_seed(0)
    eng = Engine(Model(layers=8, dense_layers=3), pages=8192)
    out: dict[str, object] = {"provenance": provenance()}
    for b in (1, 8, 64, 256):
        reqs = [Req(i, 512, 1000, 0.0, pages=[eng.free.popleft() for _ in range(10)]) for i in range(b)]
        for i in range(0, b, 16):
            eng.prefill_step([(r, 512) for r in reqs[i : i + 16]])
        for r in reqs:
            r.generated = 1
        for _ in range(3):  # real decode steps: tokens come from the model itself
            eng.decode(reqs, 8192)
        _, st, wrapper = eng._graph(next(x for x in (1, 2, 4, 8, 16, 32, 64, 128, 256) if x >= b), 8192)
        HITS.clear()
        Layer.ffn = _counting_ffn  # type: ignore[method-assign]
        eng._decode_body(st, wrapper)
        Layer.ffn = _ffn  # type: ignore[method-assign]
        eng.free.extend(p for r in reqs for p in r.pages)
        balanced = EXPERTS * (1 - (1 - 1 / EXPERTS) ** b)
        out[str(b)] = {"distinct_experts_per_layer": HITS[:], "mean": statistics.mean(HITS), "balanced": balanced}
        print(b, out[str(b)], flush=True)
    Path(sys.argv[1]).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

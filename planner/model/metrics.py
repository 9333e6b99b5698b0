"""The one metrics type of a deployment under traffic, whichever model produced it.

`method` says where the numbers come from: `estimate` (the steady-state model,
`planner.model.estimator`: means only) or `simulate` (the discrete-event simulation: means and
percentiles over the measured window). Renderers show `method` beside every figure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from roofline.memory import MemoryPlan
from roofline.step import StepCost


@dataclass(slots=True)
class Metrics:
    method: str  # estimate | simulate
    mode: str  # prefill | decode | aggregated | disaggregated
    gpus: int
    concurrency: float  # mean requests in flight
    ttft_s: float = 0.0  # means
    tpot_s: float = 0.0
    e2e_s: float = 0.0
    input_tok_s: float = 0.0
    output_tok_s: float = 0.0
    decode_batch: float = 0.0  # sequences per decode (or aggregated) instance
    decode_step: StepCost | None = None
    prefill_step: StepCost | None = None
    memory: dict[str, MemoryPlan] = field(default_factory=dict)
    saturated: bool = False  # the offered load exceeds what the deployment serves
    limit: str = ""  # the resource that binds, if any (e.g. "prefill pool at capacity")
    assumed: list[str] = field(default_factory=list)
    summary: dict[str, Any] | None = None  # simulate: the simulator's full summary (its percentiles)
    # answers of one token: no time per output token to show (tpot_s stays the decode step's, for the
    # figures built on it), as a simulation's summary has none
    one_token: bool = False

    @property
    def output_tok_s_per_gpu(self) -> float:
        return self.output_tok_s / self.gpus

    @property
    def input_tok_s_per_gpu(self) -> float:
        return self.input_tok_s / self.gpus

    @property
    def total_tok_s_per_gpu(self) -> float:
        return (self.input_tok_s + self.output_tok_s) / self.gpus

    @property
    def output_tok_s_per_user(self) -> float:
        return 1.0 / self.tpot_s if self.tpot_s and not self.one_token else 0.0

    def models(self, name: str) -> bool:
        """Whether these figures have latency `name`: the phase's (phase_models), and no TPOT for answers
        of one token."""
        return phase_models(self.mode, name) and not (name == "tpot" and self.one_token)

    def latency_ms(self, name: str, stat: str = "p90") -> float | None:
        """`name` in ttft/tpot/e2e; `stat` mean, or a percentile the simulation's summary gives (p50, p90,
        p99). An estimate has means only (None for a percentile). Answers of one token have no TPOT (None),
        as a simulation's summary has none."""
        if stat != "mean":
            v = ((self.summary or {}).get(f"{name}_ms") or {}).get(stat)
            return None if v is None else float(v)
        if name == "tpot" and (self.one_token or not self.tpot_s):
            return None
        return float(getattr(self, f"{name}_s")) * 1e3


def phase_models(mode: str, name: str) -> bool:
    """Whether a deployment of `mode` has latency `name` (ttft/tpot/e2e): a decode-only phase has no
    prompt to prefill (no TTFT, no E2E), a prefill-only phase no decode steps (no TPOT, no E2E). The
    estimate and the simulation of one deployment show the same quantities (`-` for the others)."""
    absent = {"decode": ("ttft", "e2e"), "prefill": ("tpot", "e2e")}.get(mode, ())
    return name not in absent


def add_request_overhead(m: Metrics, overhead_s: float, osl: int) -> None:
    """The per-request serving path (RuntimeOptions.request_overhead_s: HTTP, tokenization,
    scheduler hand-off, first detokenization) on a steady-state point: it lengthens TTFT and E2E
    by `overhead_s`, and a closed loop counts the requests inside it as in flight (Little's law:
    completions/s x overhead). The simulator applies the same delay to each arrival
    (simulator/engine.py `arrive`), so estimate and simulation agree."""
    if overhead_s <= 0:
        return
    m.ttft_s += overhead_s
    m.e2e_s += overhead_s
    m.concurrency += overhead_s * m.output_tok_s / max(osl, 1)

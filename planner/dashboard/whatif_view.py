"""What-if figures beside the plan's: cards with deltas whose colours know lower latency is
better, the explanation of why latencies moved, and one side of the side-by-side view.
What-if figures are estimates compared with the same deployment estimated the same way; the
plan's side is read from the recommendation record. This module does not estimate or draw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from planner.dashboard.view import slo_badges
from planner.dashboard.whatif import Breakdown
from planner.inputs.question import Question
from planner.report.plan_report import record
from planner.search.plan import Answer


@dataclass(frozen=True, slots=True)
class Delta:
    """A what-if figure against the unchanged deployment estimated the same way."""

    label: str
    value: float
    base: float
    lower_is_better: bool
    digits: int = 1
    floor: bool = False  # the value is a lower bound: that deployment's queue grows (a saturated estimate)
    base_floor: bool = False  # the same for the unchanged deployment

    @property
    def text(self) -> str:
        return f"{'>= ' if self.floor else ''}{self.value:,.{self.digits}f}"

    @property
    def change(self) -> str:
        """The change as the card shows it; where either side's queue grows, no difference is a number
        (a 22% lower TTFT read as a gain beside 'requests queue': trial)."""
        if self.floor:
            return "queue grows in both" if self.base_floor else f"queue grows (was {self.base:,.{self.digits}f})"
        d = self.value - self.base
        if self.base_floor:
            return f"{d:+,.{self.digits}f} (was a growing queue)"
        if self.better is None:
            return "unchanged"
        pct = f" ({d / self.base:+.0%})" if self.base else ""
        return f"{d:+,.{self.digits}f}{pct}"

    @property
    def color(self) -> str:
        """Streamlit reads the arrow from the change's sign and colours an up arrow green under 'normal':
        the mode follows the verdict ('+133.9 (was a growing queue)' is better, a red up arrow before)."""
        if self.better is None:
            return "off"  # unchanged: grey, no verdict
        up = not self.change.startswith("-")
        return "normal" if up == self.better else "inverse"

    @property
    def better(self) -> bool | None:
        if self.floor or self.base_floor:  # a growing queue is worse than any mean, and no better than another
            return None if self.floor and self.base_floor else self.base_floor
        d = self.value - self.base
        if abs(d) <= 1e-9 * max(abs(self.base), 1.0):
            return None
        return (d < 0) == self.lower_is_better


DELTA_HELP = (
    "what-if estimate (means); the change is against the same deployment estimated the same way, so it shows "
    "the change's effect alone. Green is better (lower latency, more capacity, fewer GPUs)"
)


def estimate_figures(b: Breakdown) -> dict[str, float | None]:
    """The estimate's latencies for the SLO badges; a growing queue's TTFT and E2E have no mean (inf)."""
    e = b.estimate
    queue = math.inf if e.saturated else 0.0
    return {"ttft_ms": max(e.ttft_s * 1e3, queue), "tpot_ms": e.tpot_s * 1e3, "e2e_ms": max(e.e2e_s * 1e3, queue)}


def _at_slo(b: Breakdown, gpus: int, osl: int) -> float:
    return (b.capacity_rps or 0.0) * osl / gpus


def what_if_deltas(b0: Breakdown, b1: Breakdown, gpus0: int, gpus1: int, osl: int) -> list[Delta]:
    """What-if cards: latency at the held traffic, and what rate the changed deployment sustains
    at the SLO (so lost capacity shows even though the request rate is held)."""
    e0, e1 = b0.estimate, b1.estimate
    queue = {"floor": e1.saturated, "base_floor": e0.saturated}  # TTFT of a growing queue has no mean
    return [
        Delta("TTFT ms (what-if, estimate)", e1.ttft_s * 1e3, e0.ttft_s * 1e3, lower_is_better=True, **queue),
        Delta("TPOT ms (what-if, estimate)", e1.tpot_s * 1e3, e0.tpot_s * 1e3, lower_is_better=True),
        Delta("requests/s it sustains at the SLO", b1.capacity_rps or 0.0, b0.capacity_rps or 0.0, False),
        Delta("tok/s/GPU at the SLO", _at_slo(b1, gpus1, osl), _at_slo(b0, gpus0, osl), lower_is_better=False),
        Delta("GPUs", float(gpus1), float(gpus0), lower_is_better=True, digits=0),
    ]


def explain_change(b0: Breakdown, b1: Breakdown, traffic: dict[str, Any]) -> str:
    """Why the latencies moved, from the two estimates' decode steps and batches."""
    e0, e1 = b0.estimate, b1.estimate
    step0 = e0.decode_step.time_s * 1e3 if e0.decode_step else 0.0
    step1 = e1.decode_step.time_s * 1e3 if e1.decode_step else 0.0
    held = traffic.get("workload", {})
    load = (
        f"{held['request_rate']:,.1f} requests/s"
        if "request_rate" in held
        else f"{held.get('concurrency', 0):,} requests in flight"
    )
    mixed = any(e.decode_step is not None and e.decode_step.carries_prompt for e in (e0, e1))
    step = "the decode step with a prompt (mixed scheduler)" if mixed else "the decode step"
    text = (
        f"Why: at the held load ({load}) {step} takes {step0:,.1f} -> {step1:,.1f} ms for "
        f"{e0.decode_batch:,.0f} -> {e1.decode_batch:,.0f} sequences per instance"
    )
    if b0.tokens_per_step != b1.tokens_per_step:
        text += (
            f", each advancing {b0.tokens_per_step:.2f} -> {b1.tokens_per_step:.2f} tokens per step (MTP: the step "
            "also verifies the draft tokens, so it costs more)"
        )
    text += (
        "; TPOT = step time / tokens per step"
        + (", averaged with the plain decode steps between prompts" if mixed else "")
        + ", and a longer step holds more sequences at the same rate."
    )
    pre0, pre1 = sum(b0.prefill_ms.values()), sum(b1.prefill_ms.values())
    if abs(pre1 - pre0) > 0.01 * max(pre0, 1e-9):
        off0, off1 = b0.prefill_ms["weight offload"], b1.prefill_ms["weight offload"]
        text += f" The prefill step takes {pre0:,.1f} -> {pre1:,.1f} ms"
        text += f" (weights streamed from host: {off0:,.1f} -> {off1:,.1f} ms)." if off0 or off1 else "."
    if e1.saturated:
        text += f" The changed deployment cannot keep up with that load ({e1.limit or 'saturated'}): requests queue."
    return text


def side_rows(a: Answer, index: int, b: Breakdown | None) -> list[dict[str, str]]:
    """One side of the side-by-side view: the record's figures, or the what-if's estimate."""
    d = record(a, a.recommendations[index], index + 1)
    if b is None:
        fig: dict[str, Any] = {
            "figures": d["figures"],
            "TTFT ms": d["ttft_ms"],
            "TPOT ms": d["tpot_ms"],
            "tok/s/GPU": d["output_tok_s_per_gpu"],
            "tok/s/user": d["output_tok_s_per_user"],
            "GPUs": d["gpus"],
            "SLO": f"{d['slo_verdict']} ({d['slo_verdict_by']})",
            "precision": d["precision_label"],
            "deployment": d["deployment"],
        }
    else:
        e = b.estimate
        fig = {
            "figures": "estimate (mean), with the what-if",
            "TTFT ms": f">= {e.ttft_s * 1e3:,.1f}" if e.saturated else e.ttft_s * 1e3,  # its queue grows
            "TPOT ms": e.tpot_s * 1e3,
            "tok/s/GPU": e.output_tok_s_per_gpu,
            "tok/s/user": e.output_tok_s_per_user,
            "GPUs": e.gpus,
            "requests/s at the SLO": b.capacity_rps,
            "SLO": slo_word(a.question, estimate_figures(b)) + " (estimate)",
            "deployment": d["deployment"] + " (changed)",
        }
    return [{"metric": k, "value": _fmt(v)} for k, v in fig.items()]


def slo_word(q: Question, figures: dict[str, float | None]) -> str:
    return "meets" if all(ok for _, ok in slo_badges(q, figures, "")) else "misses"


def _fmt(v: object) -> str:
    if isinstance(v, str):
        return v
    if v is None:
        return "-"
    return f"{v:,}" if isinstance(v, int) else f"{v:,.1f}"

"""An anchor's or question's unknown MTP, read the way a tuned deployment runs it.

`planner.model.defaults` gives an unknown MTP the engine's default (planner/engines `mtp_default`:
what the engine runs when speculative decoding is not configured). Where the quantity asked says
more (issue 11's rule for unknowns: what a tuned deployment would run for it), this module says so:
- a latency metric at one request in flight is the lowest latency: MTP on, with the drafts the
  search tries (`planner.model.defaults.MTP_DRAFTS`), where the model has MTP layers;
- a metric bound by an SLO (max_users_at_slo, a throughput with an `slo`) is the most the SLO allows:
  the caller tries MTP off and on (`settings`) and keeps the larger.
Anything else keeps the engine's default. It does not price anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from planner.inputs.scenario import MTPSpec, Scenario
from planner.model.defaults import MTP_DRAFTS
from planner.search.anchor_units import LATENCY_METRICS as LATENCY
from roofline.catalog import get_model
from roofline.errors import PlannerError

S = TypeVar("S", bound=Scenario)


def _has_mtp_layers(s: Scenario, base_dir: Path | None) -> bool:
    try:
        ref = str((base_dir / s.model).resolve()) if base_dir and (base_dir / s.model).is_file() else s.model
        return get_model(ref).mtp_layers > 0
    except PlannerError:
        return False


def with_mtp(s: S, on: bool) -> S:
    """`s` with MTP stated: off, or on with the search's drafts (acceptance from the default rule)."""
    return s.model_copy(update={"mtp": MTPSpec(draft_tokens=MTP_DRAFTS) if on else None})


def settings(s: Scenario, base_dir: Path | None) -> list[bool] | None:
    """The MTP settings to try for an SLO-bound metric (None: MTP is stated, or the model has none)."""
    return [False, True] if s.mtp == "unknown" and _has_mtp_layers(s, base_dir) else None


def for_latency_at_one(s: S, metric: str, base_dir: Path | None) -> tuple[S, list[str]]:
    """`s` with MTP on when it is unknown and `metric` is a latency at one request in flight."""
    w = s.workload
    at_one = w.concurrency == 1 and w.request_rate is None and w.concurrency_scope == "total"
    if metric not in LATENCY or not at_one or s.mtp != "unknown" or not _has_mtp_layers(s, base_dir):
        return s, []
    note = f"mtp: on, {MTP_DRAFTS} draft tokens (unknown; the lowest latency at one request in flight)"
    return with_mtp(s, True), [note]

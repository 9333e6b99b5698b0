"""How far the planner has been from published results like a deployment's: its track record.

`bench/track_record.py` groups the last public-anchor reading (`bench/public_anchors.py`,
bench/results/public_anchors.json) by split, metric kind (TTFT; TPOT with tok/s per user; throughput),
deployment mode (or the phase of a one-phase anchor), engine and GPU generation and writes
planner/report/track_record.json; this module reads it. For a deployment it finds, for each metric kind,
the most specific class with at least `MIN_COUNT` predicted anchors (`class_keys`: the generation, then
the engine, then the mode dropped where too few anchors share them): the held-out (test) split first
(sources no parameter was fitted to), then the train split.
The note is what a user should expect of the figures beside it: the median |error| and its sign on
those public runs. It does not predict, correct or widen any figure.
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any

from planner.model.deployment import Deployment

MIN_COUNT = 10  # anchors a class needs before its medians speak for a deployment
GENERATION = {"sm_90": "Hopper", "sm_100": "Blackwell", "sm_103": "Blackwell", "sm_120": "RTX PRO (sm_120)"}
LABEL = {"ttft": "TTFT", "tpot": "TPOT", "throughput": "throughput"}
SPLIT = {"test": "held-out", "train": "train split: sources the model was fitted to"}


@cache
def record() -> dict[str, Any]:
    """The track record file: its source line and its classes."""
    data: dict[str, Any] = json.loads(files("planner.report").joinpath("track_record.json").read_text())
    return data


def class_keys(mode: str | None, engine: str | None, generation: str | None) -> list[tuple[str | None, ...]]:
    """The classes of a run, most specific first: the engine is kept before the generation (its serving path
    and scheduler move TTFT more than the GPU generation does), the mode before both."""
    return [(mode, engine, generation), (mode, engine, None), (mode, None, generation), (mode, None, None), (None,) * 3]


def lookup(kind: str, mode: str, engine: str, generation: str) -> dict[str, Any] | None:
    """The most specific class of `kind` with at least MIN_COUNT anchors (held-out split first)."""
    classes = record()["classes"]
    for split in ("test", "train"):
        for key in class_keys(mode, engine, generation):
            for c in classes:
                same = (c["split"], c["kind"], c["mode"], c["engine"], c["generation"]) == (split, kind, *key)
                if same and c["count"] >= MIN_COUNT:
                    return c
    return None


def _scope(c: dict[str, Any]) -> str:
    what = " ".join(filter(None, [c["mode"] or "", c["engine"] or "", "runs"]))
    where = f" on {c['generation']}" if c["generation"] else ""
    every = " of every mode" if c["mode"] is None else ""
    return f"{c['count']} {SPLIT[c['split']].split(':')[0]} {what}{every}{where}"


def _way(signed: float) -> str:
    if abs(signed) < 0.005:
        return "no lean at the median"
    return f"predicted {'high' if signed > 0 else 'low'} by {100 * abs(signed):.0f}% at the median"


def note(dep: Deployment, phase: str = "end-to-end") -> str | None:
    """One line: for TTFT, TPOT and throughput, the median |error| (and which way) the planner's predictions
    (simulated where the anchor runs a loop, else estimated) have shown on published runs most like `dep`;
    None without a track record. A one-phase deployment or scenario (`phase` prefill or decode) leaves out
    the figure that phase does not have."""
    gen = GENERATION.get(dep.hardware.arch, "other")
    parts = []
    for kind, label in LABEL.items():
        if (kind, phase if phase != "end-to-end" else dep.mode) in (("ttft", "decode"), ("tpot", "prefill")):
            continue
        c = lookup(kind, dep.mode if phase == "end-to-end" else phase, dep.engine, gen)
        if c is None:
            continue
        parts.append(
            f"{label} {100 * c['median_abs_rel_error']:.0f}% ({_way(c['median_rel_error'])}; "
            f"{100 * c['within_tolerance']:.0f}% of {_scope(c)} within tolerance)"
        )
    if not parts:
        return None
    return (
        f"track record ({dep.mode if phase == 'end-to-end' else phase}): the planner's median error on published "
        "runs like these (its predictions of held-out public anchors, simulated where a run is a loop; "
        "bench/public_anchors.py): " + "; ".join(parts)
    )

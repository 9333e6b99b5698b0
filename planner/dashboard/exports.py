"""Files the dashboard offers and reads: downloads (with the what-if applied), an uploaded trace,
the validation table, and the cache key of persisted answers. No figures are computed here:
downloads render the recommendation record (`planner.report.plan_report`) and the what-if's scenario.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

import yaml

from planner.dashboard.whatif import WhatIf
from planner.inputs.scenario import parse_scenario
from planner.model.defaults import resolve
from planner.report.plan_report import answer_dict, csv_text
from planner.report.plan_report import scenario_of as record_scenario
from planner.search.plan import Answer, Recommendation
from planner.search.score import Point
from roofline.catalog import model_from_hf_file
from roofline.errors import PlannerError
from simulator import TraceSpec


def code_fingerprint() -> str:
    """Hash of every source and data file the answers depend on (cache key for persisted answers)."""
    root = Path(__file__).resolve().parents[2]
    h = hashlib.sha256()
    for pkg in ("roofline", "simulator", "planner"):
        for f in sorted((root / pkg).rglob("*")):
            if f.suffix in (".py", ".yaml", ".json"):
                h.update(f.read_bytes())
    return h.hexdigest()[:16]


def scenario_of(a: Answer, index: int) -> dict[str, Any]:
    """Recommendation `index` with the question's traffic, as a scenario mapping (the record's)."""
    return record_scenario(a.question, a.recommendations[index])


def file_stem(a: Answer, index: int, w: WhatIf) -> str:
    q = a.question
    return f"{q.model}_{q.hardware}_{q.isl}-{q.osl}_rec{index + 1}" + ("_what-if" if w.active else "")


def _what_if_launch(a: Answer, index: int, changed: dict[str, Any]) -> dict[str, str]:
    from planner.launch import launch_commands  # noqa: PLC0415  (only downloads need the launch templates)

    r = a.recommendations[index]
    res = resolve(parse_scenario(changed))
    dec = res.deployment.first("decode") or res.deployment.first("aggregated")
    batch = r.point.batch
    if res.concurrency and dec:
        batch = max(1, round(res.concurrency / dec.instances))
    point = Point(batch, res.deployment, r.point.metrics, r.point.bottleneck)
    return launch_commands(a.question, Recommendation(r.cand, point))


def downloads(a: Answer, index: int, w: WhatIf, changed: dict[str, Any]) -> dict[str, str]:
    """File name -> text. With a what-if, the scenario and launch commands are the changed
    deployment's, and results.json records the changes next to the planner's records."""
    stem = file_stem(a, index, w)
    scn = changed if w.active else scenario_of(a, index)
    note = ""
    if w.active:
        launch = _what_if_launch(a, index, changed)
    else:
        rec = answer_dict(a, launch_top=index + 1)["recommendations"][index]
        launch = rec.get("launch", {})
        if "load_note" in rec:
            note = f"# {rec['load_note']}\n\n"
    results = answer_dict(a)
    if w.active:
        results["what_if"] = {
            "recommendation": index + 1,
            "changes": w.changes(),
            "scenario": changed,
            "figures": "estimate (means): simulate the scenario to check the SLO's percentile",
        }
    return {
        f"{stem}_scenario.yaml": yaml.safe_dump(scn, sort_keys=False),
        f"{stem}_launch.txt": note + "\n\n".join(f"# {k}\n{v}" for k, v in launch.items()),
        f"{stem}_results.json": json.dumps(results, indent=2, default=str),
        f"{a.question.model}_{a.question.hardware}_recommendations.csv": csv_text(a),
    }


def trace_from_upload(data: bytes, filename: str, time_scale: float = 1.0) -> TraceSpec:
    """Save an uploaded trace and name its format from its header."""
    head = data[:200].decode("utf-8", errors="replace")
    if head.lstrip().startswith("{"):
        fmt = "mooncake"
    elif "arrived_at" in head:
        fmt = "splitwise"
    elif "TIMESTAMP" in head:
        fmt = "azure"
    else:
        raise PlannerError(f"trace: {filename} is not an Azure CSV, Splitwise CSV or Mooncake JSONL trace")
    path = Path(tempfile.mkdtemp(prefix="planner-trace-")) / Path(filename).name
    path.write_bytes(data)
    return TraceSpec.model_validate({"path": str(path), "format": fmt, "time_scale": time_scale})


def config_from_upload(data: bytes, filename: str) -> str:
    """Save an uploaded HF config.json where reruns find it again (named by its content) and check that it
    reads as a model; the path is the question's model, as `planner plan --model PATH` takes it."""
    digest = hashlib.sha256(data).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / "planner-configs"
    folder.mkdir(exist_ok=True)
    path = folder / f"{digest}-{Path(filename).name}"
    if not path.exists():
        path.write_bytes(data)
    model_from_hf_file(path)  # a config that does not read is one line (CatalogError), shown by the page
    return str(path)


def validation_rows(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Anchors with published, predicted and the error in percent (rounded)."""
    from planner.search.validate import validate_file  # noqa: PLC0415  (validation pulls in the simulator)

    results, summary = validate_file(path)
    rows = [
        {
            "anchor": r.id,
            "metric": r.metric,
            "published": r.published,
            "predicted": None if r.predicted is None else float(f"{r.predicted:.4g}"),
            "error %": None if r.rel_error is None else round(100 * r.rel_error, 1),
            "within tolerance": r.within_tolerance,
            "method": r.method,
            "problem": r.error or "",
        }
        for r in results
    ]
    return rows, summary

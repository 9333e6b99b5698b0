"""Accuracy on the public anchor corpus: predicts every anchor of `validation/public/*.yaml` (and any files
given) with the planner's own `planner.search.validate.predict_anchor`, prints error tables by split (each file's
`source.split`) and, within a split, by hardware, model, metric and method, TTFT and TPOT by the traffic an
anchor states (a concurrency, a request rate, or neither: `traffic` in each row), plus the anchors that could not
be predicted grouped by error class, and saves rows and tables to bench/results/public_anchors.json
(written to a .part file, then renamed).

It does not judge or edit anchors, and it computes no prediction of its own: every number in its tables is
a count, or a median of `rel_error = (predicted - published) / published` as `predict_anchor` returns it.
A bad anchor (or a file that does not load) becomes an error row, never a crash of the run.

`--refresh FILE ...` re-predicts only the anchors of the files named and keeps every other row of the saved
results (`--out`) as it is: for a change that can only move those files' anchors (say which in the commit); the
saved `provenance` says which files were re-predicted at which commit, on top of the provenance they came from.
A corpus file new since the saved run (in validation/public, not among its files) is predicted whole and
its rows added. `--match REGEX` (with `--refresh`) narrows it to the anchors whose id it matches (re.search;
plain text is a substring); the files' other rows are kept.

Usage: python bench/public_anchors.py [FILE ...] [--split test|train|all] [--jobs N] [--out PATH]
       python bench/public_anchors.py --refresh validation/public/F.yaml [...] [--match TEXT] [--jobs N] [--commit SHA]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from collections import defaultdict
from multiprocessing import Pool
from pathlib import Path
from typing import Any

from planner.inputs.scenario import load_yaml
from planner.search.validate import predict_anchor
from roofline.errors import PlannerError

ROOT = Path(__file__).resolve().parents[1]
PUBLIC = ROOT / "validation" / "public"
OUT = ROOT / "bench" / "results" / "public_anchors.json"
GROUPS = ("hardware", "model", "metric", "method")
LATENCY_METRICS = ("ttft_ms", "tpot_ms")

Task = tuple[Any, str, str, str]  # (raw anchor, file path, split, source name)


def load_tasks(paths: list[Path], split: str, match: str = "") -> tuple[list[Task], list[dict[str, Any]]]:
    """One task per anchor of the files whose split matches (and whose id `match` matches, re.search); a file that
    does not load is one error row."""
    tasks: list[Task] = []
    bad: list[dict[str, Any]] = []
    for p in paths:
        try:
            data = load_yaml(p)
        except PlannerError as exc:
            bad.append(error_row(p.stem, str(p), "unknown", "", str(exc)))
            continue
        src = data.get("source") if isinstance(data, dict) else None
        src = src if isinstance(src, dict) else {}
        file_split = str(src.get("split", "unknown"))
        anchors = data.get("anchors") if isinstance(data, dict) else None
        if not isinstance(anchors, list):
            bad.append(error_row(p.stem, str(p), file_split, "", f"{p}: expected an `anchors:` list"))
            continue
        if split not in ("all", file_split):
            continue
        tasks += [
            (raw, str(p), file_split, str(src.get("name", "")))
            for raw in anchors
            if not match or re.search(match, str(raw.get("id", "") if isinstance(raw, dict) else ""))
        ]
    return tasks, bad


def traffic_kind(raw: Any) -> str:
    """How an anchor states its traffic: `concurrency` (a closed loop), `request_rate` (an open loop) or
    `none` (neither stated, or `unknown`), read from its `workload:` as the anchor file writes it."""
    wl = raw.get("workload") if isinstance(raw, dict) else None
    wl = wl if isinstance(wl, dict) else {}
    for key in ("concurrency", "request_rate"):
        if wl.get(key) not in (None, "unknown"):
            return key
    return "none"


def error_row(aid: str, path: str, split: str, source: str, error: str, traffic: str = "none") -> dict[str, Any]:
    return {
        "id": aid,
        "file": Path(path).name,
        "split": split,
        "source": source,
        "hardware": "?",
        "model": "?",
        "metric": "?",
        "method": "none",
        "traffic": traffic,
        "published": None,
        "predicted": None,
        "rel_error": None,
        "within_tolerance": False,
        "tolerance": None,
        "error": error,
        "error_class": error_class(error),
    }


def predict(task: Task) -> dict[str, Any]:
    """Predict one anchor. predict_anchor turns planner errors into rows; anything else it raises (a bug
    the anchor exposes) is also recorded as this anchor's error, with its exception type, and the run goes on."""
    raw, path, split, source = task
    aid = str(raw.get("id", "?")) if isinstance(raw, dict) else "?"
    try:
        r = predict_anchor(raw, Path(path).parent)
    except Exception as exc:  # one anchor's failure must not stop the corpus run; it is recorded, not hidden
        msg = f"internal error {type(exc).__name__}: {exc}"
        return error_row(aid, path, split, source, msg, traffic_kind(raw))
    info = raw if isinstance(raw, dict) else {}
    return {
        "id": r.id,
        "file": Path(path).name,
        "split": split,
        "source": source,
        "hardware": str(info.get("hardware", "?")),
        "model": str(info.get("model", "?")),
        "metric": r.metric,
        "method": r.method if r.predicted is not None else "none",
        "traffic": traffic_kind(raw),
        "published": r.published,
        "predicted": r.predicted,
        "rel_error": r.rel_error,
        "within_tolerance": r.within_tolerance,
        "tolerance": r.tolerance,
        "error": r.error,
        "error_class": error_class(r.error) if r.error else None,
    }


def error_class(msg: str) -> str:
    """The first clause of an error, without the anchor id and with numbers as N, so that the same
    failure on many anchors counts once."""
    first = msg.split("; ", maxsplit=1)[0]
    first = re.sub(r"^anchor [^:]*: ", "", first)
    first = re.sub(r"\d+(\.\d+)?", "N", first)
    return first[:120]


def stats(rows: list[dict[str, Any]]) -> dict[str, Any]:
    errs = [r["rel_error"] for r in rows if r["rel_error"] is not None]
    return {
        "count": len(rows),
        "predicted": sum(r["predicted"] is not None for r in rows),
        "within_tolerance": sum(bool(r["within_tolerance"]) for r in rows),
        "median_abs_rel_error": round(statistics.median(abs(e) for e in errs), 4) if errs else None,
        "median_rel_error": round(statistics.median(errs), 4) if errs else None,
    }


def tables(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per split: overall stats, stats by each group key, and unpredicted anchors by error class."""
    out: dict[str, Any] = {}
    for split in sorted({r["split"] for r in rows}):
        srows = [r for r in rows if r["split"] == split]
        by: dict[str, dict[str, Any]] = {}
        for key in GROUPS:
            groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for r in srows:
                groups[str(r[key])].append(r)
            by[key] = {k: stats(v) for k, v in sorted(groups.items())}
        classes: dict[str, int] = defaultdict(int)
        for r in srows:
            if r["predicted"] is None:
                classes[r["error_class"] or "no prediction"] += 1
        latency: dict[str, dict[str, Any]] = defaultdict(dict)
        for metric in LATENCY_METRICS:
            for kind in ("concurrency", "request_rate", "none"):
                mrows = [r for r in srows if r["metric"] == metric and r.get("traffic") == kind]
                if mrows:
                    latency[metric][kind] = stats(mrows)
        out[split] = {
            "all": stats(srows),
            "by": by,
            "latency_by_traffic": dict(latency),
            "not_predicted": dict(sorted(classes.items(), key=lambda kv: (-kv[1], kv[0]))),
        }
    return out


def _pct(v: float | None, sign: str = "+") -> str:
    return "-" if v is None else f"{v:{sign}.1%}"


def render(tabs: dict[str, Any]) -> str:
    lines: list[str] = []
    for split, t in tabs.items():
        a = t["all"]
        lines.append(
            f"\n## split {split}: {a['count']} anchors, {a['predicted']} predicted, "
            f"{a['within_tolerance']} within tolerance, median |error| {_pct(a['median_abs_rel_error'], '')}"
        )
        for key, groups in t["by"].items():
            lines.append(f"\n| {key} | count | predicted | within | median abs err | median err |")
            lines.append("|---|---:|---:|---:|---:|---:|")
            for name, s in groups.items():
                lines.append(
                    f"| {name} | {s['count']} | {s['predicted']} | {s['within_tolerance']} | "
                    f"{_pct(s['median_abs_rel_error'], '')} | {_pct(s['median_rel_error'])} |"
                )
        lines.append("\n| metric | traffic stated | count | predicted | within | median abs err | median err |")
        lines.append("|---|---|---:|---:|---:|---:|---:|")
        for metric, kinds in t["latency_by_traffic"].items():
            for kind, s in kinds.items():
                lines.append(
                    f"| {metric} | {kind} | {s['count']} | {s['predicted']} | {s['within_tolerance']} | "
                    f"{_pct(s['median_abs_rel_error'], '')} | {_pct(s['median_rel_error'])} |"
                )
        lines.append("\n| not predicted: error class | count |")
        lines.append("|---|---:|")
        lines += [f"| {c} | {n} |" for c, n in t["not_predicted"].items()]
    return "\n".join(lines)


def save(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps(payload, indent=1))
    os.replace(part, path)


def run(paths: list[Path], split: str, jobs: int, match: str = "") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    tasks, rows = load_tasks(paths, split, match)
    if jobs > 1 and len(tasks) > 1:
        with Pool(jobs) as pool:
            rows += pool.map(predict, tasks, chunksize=4)
    else:
        rows += [predict(t) for t in tasks]
    return rows, tables(rows)


def _rel(p: Path) -> str:
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)


def refresh(paths: list[Path], out: Path, jobs: int, match: str = "", commit: str = "") -> int:
    """Re-predict the anchors of `paths` (those whose id `match` matches, re.search), keep the other rows saved in
    `out`, recompute every table."""
    missing = [p for p in paths if not p.is_file()]
    if missing:
        print(f"--refresh: not found: {', '.join(map(str, missing))}", file=sys.stderr)
        return 2
    try:
        saved = json.loads(out.read_text())
        kept_rows, split = saved["rows"], saved["split"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"--refresh: needs the saved results of a full run in {out} ({exc})", file=sys.stderr)
        return 2
    names = {_rel(p.resolve()) for p in paths}
    files = list(saved.get("files", []))
    added = sorted(n for n in names - set(files) if _in_corpus(n))  # a corpus file new since the saved run
    unknown = names - set(files) - set(added)
    if unknown:
        print(f"--refresh: {', '.join(sorted(unknown))} is not among the saved run's files", file=sys.stderr)
        return 2
    commit = commit or _head()  # the code that runs, read before it runs (HEAD may move while it does)
    fresh, _ = run([p.resolve() for p in paths], split, jobs, match)
    basenames = {p.name for p in paths}  # a row names its file by basename
    by_id = {(r["file"], r["id"]): r for r in fresh}
    rows, kept = [], 0
    for r in kept_rows:  # the saved order, each refreshed row in its old place
        if r.get("file") not in basenames or (match and not re.search(match, str(r.get("id", "")))):
            rows.append(r)
            kept += 1
        elif (r["file"], r["id"]) in by_id:
            rows.append(by_id.pop((r["file"], r["id"])))
    rows += list(by_id.values())  # anchors new to those files
    tabs = tables(rows)
    print(render(tabs))
    which = ", ".join(sorted(names))
    which = f"the anchors of {which} whose id matches {match!r}" if match else which
    note = f"{which} re-predicted (--refresh) at {commit}"
    if added:
        note += f" ({', '.join(added)} new to the corpus: its rows added)"
    payload = {**saved, "tables": tabs, "rows": rows, "files": files + added}
    payload["provenance"] = f"{saved.get('provenance', 'full run')}; then {note}"
    save(out, payload)
    print(f"\nsaved {out} ({len(fresh)} rows re-predicted, {kept} kept)")
    return 0


def _in_corpus(name: str) -> bool:
    """Whether a file (as `_rel` names it) is one of the corpus files a full run reads (validation/public)."""
    path = ROOT / name
    return path.parent.resolve() == PUBLIC.resolve() and path.suffix == ".yaml"


def _head() -> str:
    """The checkout's commit, '+ local changes' when tracked files differ from it."""

    def git(*a: str) -> str:
        return subprocess.run(["git", *a], check=False, capture_output=True, text=True, cwd=ROOT).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown commit"
    return head + (" + local changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path, help="extra anchor files (validation/public/*.yaml always read)")
    ap.add_argument("--split", choices=("test", "train", "all"), default="all")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--no-public", action="store_true", help="read only the files given")
    ap.add_argument("--refresh", nargs="+", type=Path, help="re-predict only these files, keep the other saved rows")
    ap.add_argument(
        "--match",
        default="",
        help="with --refresh: only the anchors whose id this regex matches",
    )
    ap.add_argument("--commit", default="", help="with --refresh: the commit to record (a copied checkout's own)")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        print("--jobs: must be at least 1", file=sys.stderr)
        return 2
    try:
        re.compile(args.match)
    except re.error as e:
        print(f"--match: not a regular expression ({e})", file=sys.stderr)
        return 2
    missing = [p for p in args.files if not p.is_file()]
    if missing:
        print(f"files: not found: {', '.join(map(str, missing))}", file=sys.stderr)
        return 2
    if args.refresh:
        return refresh(args.refresh, args.out, args.jobs, args.match, args.commit)
    given = ([] if args.no_public else sorted(PUBLIC.glob("*.yaml"))) + list(args.files)
    paths = list(dict.fromkeys(p.resolve() for p in given))  # a public file named again is read once
    rows, tabs = run(paths, args.split, args.jobs)
    print(render(tabs))
    files = [_rel(p) for p in paths]
    save(args.out, {"split": args.split, "files": files, "tables": tabs, "rows": rows})
    print(f"\nsaved {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Mutation fuzzing of every input the planner reads; the campaign of issue 13, reproducible.

    python3 bench/fuzz.py --n 10000 --seed 0 [--kinds scenarios,cli,anchors,traces,questions,hf,profiles]

Draws N cases (split over the kinds by the weights below; each case is fixed by kind, seed and
index, see `bench.fuzz_mutate`), runs each in a worker process under a per-case time limit
(`--limit-s`, 20 s) and a 6 GB address-space limit, classifies the outcome (`bench.fuzz_targets`)
and prints a table of counts by kind and outcome, then the distinct signatures of everything
that is not `ok` or `rejected`, each with one reproducing case. Writes bench/results/fuzz.json
atomically (a temporary file renamed over the old one). Exit status 1 when any case crashed,
hung or gave nonsense.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.fuzz_mutate import KINDS, make_case
from bench.fuzz_targets import run_case

WEIGHTS = {"scenarios": 50, "cli": 6, "anchors": 12, "traces": 10, "questions": 4, "hf": 10, "profiles": 8}
OUTCOMES = ("ok", "rejected", "bad_message", "crash", "nonsense", "hang")
BAD = ("bad_message", "crash", "nonsense", "hang")
OUT = Path(__file__).resolve().parent / "results" / "fuzz.json"


def split(n: int, kinds: list[str]) -> dict[str, int]:
    """N cases over the kinds in proportion to WEIGHTS (largest remainders get the rest)."""
    total = sum(WEIGHTS[k] for k in kinds)
    exact = {k: n * WEIGHTS[k] / total for k in kinds}
    out = {k: int(v) for k, v in exact.items()}
    for k in sorted(kinds, key=lambda k: exact[k] - out[k], reverse=True)[: n - sum(out.values())]:
        out[k] += 1
    return out


def _init() -> None:
    gb6 = 6 << 30
    resource.setrlimit(resource.RLIMIT_AS, (gb6, gb6))
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def _one(args: tuple[str, int, int, float]) -> tuple[str, int, str, str, str, list[str], float]:
    kind, seed, index, limit_s = args
    case = make_case(kind, seed, index)
    t0 = time.perf_counter()
    outcome, sig, detail = run_case(case, limit_s)
    return kind, index, outcome, sig, detail, case.mutations, time.perf_counter() - t0


def campaign(n: int, seed: int, kinds: list[str], limit_s: float = 20.0, workers: int = 2) -> dict[str, Any]:
    """Run the campaign and return its report (the content of fuzz.json)."""
    jobs = [(k, seed, i, limit_s) for k, m in split(n, kinds).items() for i in range(m)]
    rows: list[tuple[str, int, str, str, str, list[str], float]] = []
    t0 = time.perf_counter()
    ctx = mp.get_context("fork")
    pending = list(jobs)
    while pending:
        with ctx.Pool(workers, initializer=_init, maxtasksperchild=200) as pool:
            handles = [(job, pool.apply_async(_one, (job,))) for job in pending]
            pending = []
            for k, (job, h) in enumerate(handles):
                if len(rows) % 250 == 0 and rows:
                    print(f"{len(rows)}/{len(jobs)} cases, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
                try:
                    rows.append(h.get(timeout=4 * limit_s + 60))
                except mp.TimeoutError:  # stuck outside Python (the alarm never fired): a hang too
                    rows.append((job[0], job[2], "hang", f"hang {job[0]} (worker stuck)", "", [], 4 * limit_s))
                    pending = [j for j, hh in handles[k + 1 :] if not hh.ready()]
                    rows += [hh.get() for _, hh in handles[k + 1 :] if hh.ready()]
                    pool.terminate()
                    break
    return report(rows, n, seed, kinds, limit_s, time.perf_counter() - t0)


def report(rows: list[Any], n: int, seed: int, kinds: list[str], limit_s: float, wall_s: float) -> dict[str, Any]:
    counts = {k: dict.fromkeys(OUTCOMES, 0) for k in kinds}
    sigs: dict[str, dict[str, Any]] = {}
    for kind, index, outcome, sig, detail, mutations, _dt in rows:
        counts[kind][outcome] += 1
        if outcome in BAD:
            s = sigs.setdefault(sig, {"count": 0, "outcome": outcome, "kind": kind})
            s["count"] += 1
            example = {
                "kind": kind,
                "seed": seed,
                "index": index,
                "mutations": mutations,
                "detail": detail,
                "action": make_case(kind, seed, index).action,
            }
            s.setdefault("example", example)
    slowest = sorted(rows, key=lambda r: -r[6])[:5]
    return {
        "commit": _commit(),
        "n": len(rows),
        "requested": n,
        "seed": seed,
        "kinds": kinds,
        "limit_s": limit_s,
        "wall_s": round(wall_s, 1),
        "counts": counts,
        "totals": dict(Counter(r[2] for r in rows)),
        "signatures": dict(sorted(sigs.items(), key=lambda kv: -kv[1]["count"])),
        "slowest": [{"kind": r[0], "index": r[1], "outcome": r[2], "seconds": round(r[6], 2)} for r in slowest],
    }


def _commit() -> str:
    """The commit the campaign ran on, '+dirty' when the worktree had changes."""
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=root, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            cwd=root,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def table(rep: dict[str, Any]) -> str:
    lines = ["| inputs | runs | " + " | ".join(OUTCOMES) + " |", "|---|---:|" + "---:|" * len(OUTCOMES)]
    for kind, c in rep["counts"].items():
        lines.append(f"| {kind} | {sum(c.values())} | " + " | ".join(str(c[o]) for o in OUTCOMES) + " |")
    tot = Counter(rep["totals"])
    lines.append(f"| all | {rep['n']} | " + " | ".join(str(tot[o]) for o in OUTCOMES) + " |")
    if rep["signatures"]:
        lines += ["", "| n | outcome | signature | example (kind index: mutations) |", "|---:|---|---|---|"]
        for sig, s in rep["signatures"].items():
            ex = s["example"]
            what = f"{ex['kind']} {ex['index']}: {'; '.join(ex['mutations'])[:90]}"
            lines.append(f"| {s['count']} | {s['outcome']} | {sig} | {what} |")
    return "\n".join(lines)


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(text)
    tmp.replace(path)  # a reader sees the old file or the new one, never half of one


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="cases in all")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}")
    ap.add_argument("--limit-s", type=float, default=20.0, help="per-case time limit (a hang past it)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--case", help="run one case, KIND:INDEX, and print its files and outcome")
    a = ap.parse_args()
    if a.case:
        kind, index = a.case.split(":")
        case = make_case(kind, a.seed, int(index))
        for name, data in case.files.items():
            print(f"--- {name}\n{data[:3000].decode('utf-8', 'replace')}")
        print("mutations:", "; ".join(case.mutations))
        print("outcome:", *run_case(case, a.limit_s), sep="\n  ")
        return 0
    kinds = [k.strip() for k in a.kinds.split(",") if k.strip()]
    bad = [k for k in kinds if k not in KINDS]
    if bad or a.n <= 0:
        print(f"error: --kinds: unknown {', '.join(bad)}; allowed: {', '.join(KINDS)}" if bad else "error: --n > 0")
        return 2
    rep = campaign(a.n, a.seed, kinds, a.limit_s, a.workers)
    write_atomic(a.out, json.dumps(rep, indent=1, default=str))
    print(f"{rep['n']} cases, seed {a.seed}, {rep['wall_s']} s, per-case limit {a.limit_s:g} s\n")
    print(table(rep))
    return 1 if any(rep["totals"].get(o) for o in ("crash", "nonsense", "hang")) else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Trace readers: the Azure LLM inference CSV, the Splitwise/Vidur processed CSV and the Mooncake
JSONL. Each returns arrival times (s, starting at 0), input and output lengths, and Mooncake's
prefix-block hashes when present. A malformed line raises `TraceError` naming file and line.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np

from roofline.errors import PlannerError

FORMATS = ("azure", "splitwise", "mooncake")


class TraceError(PlannerError):
    """A trace file that cannot be read."""


@dataclass(slots=True)
class Trace:
    arrival_s: np.ndarray
    isl: np.ndarray
    osl: np.ndarray
    hash_ids: list[list[int]] | None = field(default=None)

    def __len__(self) -> int:
        return len(self.arrival_s)


def _positive(value: str, what: str, where: str) -> int:
    try:
        n = int(float(value))
    except ValueError as exc:
        raise TraceError(f"{where}: {what} {value!r} is not a number") from exc
    if n <= 0:
        raise TraceError(f"{where}: {what} must be positive (got {n})")
    return n


def _timestamp(value: str, where: str) -> float:
    try:
        return float(value)
    except ValueError:
        pass
    try:  # Azure 2023/2024 traces: "2023-11-16 18:15:46.6805900" (7-digit fraction)
        head, _, frac = value.strip().partition(".")
        return datetime.fromisoformat(head).timestamp() + (float("0." + frac) if frac else 0.0)
    except ValueError as exc:
        raise TraceError(f"{where}: timestamp {value!r} is neither seconds nor an ISO date") from exc


def _csv(path: Path, cols: tuple[str, str, str]) -> Trace:
    t, i, o = [], [], []
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in cols if c not in (reader.fieldnames or [])]
        if missing:
            raise TraceError(f"{path}: header lacks {', '.join(missing)} (expected {', '.join(cols)})")
        for lineno, row in enumerate(reader, start=2):
            where = f"{path}:{lineno}"
            if None in row.values() or None in row:
                raise TraceError(f"{where}: expected {len(reader.fieldnames or [])} fields")
            t.append(_timestamp(row[cols[0]], where))
            i.append(_positive(row[cols[1]], cols[1], where))
            o.append(_positive(row[cols[2]], cols[2], where))
    return _finish(path, t, i, o, None)


def _mooncake(path: Path) -> Trace:
    t, i, o, h = [], [], [], []
    with path.open() as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                rec = json.loads(line)
                t.append(float(rec["timestamp"]) / 1000.0)  # Mooncake timestamps are in ms
                i.append(_positive(str(rec["input_length"]), "input_length", where))
                o.append(_positive(str(rec["output_length"]), "output_length", where))
                h.append([int(x) for x in rec.get("hash_ids", [])])
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise TraceError(f"{where}: not a Mooncake record ({exc})") from exc
    return _finish(path, t, i, o, h)


def _finish(path: Path, t: list[float], i: list[int], o: list[int], h: list[list[int]] | None) -> Trace:
    if not t:
        raise TraceError(f"{path}: no requests")
    arr = np.asarray(t, dtype=float)
    order = np.argsort(arr, kind="stable")
    arr = arr[order] - arr[order][0]
    hashes = [h[k] for k in order] if h is not None else None
    return Trace(arr, np.asarray(i, dtype=np.int64)[order], np.asarray(o, dtype=np.int64)[order], hashes)


def read_trace(path: str | Path, fmt: str) -> Trace:
    p = Path(path)
    if fmt not in FORMATS:
        raise TraceError(f"trace format {fmt!r} unknown; allowed: {', '.join(FORMATS)}")
    if not p.exists():
        raise TraceError(f"trace file not found: {p}")
    if fmt == "azure":
        return _csv(p, ("TIMESTAMP", "ContextTokens", "GeneratedTokens"))
    if fmt == "splitwise":
        return _csv(p, ("arrived_at", "num_prefill_tokens", "num_decode_tokens"))
    return _mooncake(p)

"""Trace readers: the Azure LLM inference CSV, the Splitwise/Vidur processed CSV, the Mooncake
JSONL, and `lengths`, a CSV of a dataset's per-sample token counts (header input_length,
output_length; no timestamps: every row arrives at 0, for `LengthDist(kind="empirical")` draws or an
offline run). Each returns arrival times (s, starting at 0), input and output lengths, and Mooncake's
prefix-block hashes when present.

A malformed row (a missing field, a non-number, a length that is not positive or beyond
`MAX_TOKENS`, a timestamp that is not finite or lies more than `MAX_SPAN_S` from the median
arrival) is skipped and listed in `Trace.skipped` as
`file:line: reason`; the rest of the file still runs. A length that is not a whole number is malformed too;
rows out of time order are replayed in time order and counted (`Trace.reordered`). A file that cannot be read, lacks the
format's header, or has no good row raises `TraceError` naming the file (and the first bad line).
Bytes that are not UTF-8 make their row unreadable, not the file.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from roofline.errors import PlannerError
from simulator.config import MAX_TOKENS

FORMATS = ("azure", "splitwise", "mooncake", "lengths")
MAX_TIMESTAMP = 1e12  # seconds (~31,700 years): beyond it a timestamp is not a time
MAX_SPAN_S = 1e7  # ~116 days from the median arrival; the published traces span one hour to one week
MAX_HASH_BLOCKS = 100_000  # prefix blocks per request: 51M tokens at 512 tokens per block


class TraceError(PlannerError):
    """A trace file that cannot be read."""


@dataclass(slots=True)
class Trace:
    arrival_s: np.ndarray
    isl: np.ndarray
    osl: np.ndarray
    hash_ids: list[list[int]] | None = field(default=None)
    skipped: list[str] = field(default_factory=list)  # "file:line: reason" of each malformed row
    reordered: int = 0  # rows that arrive before a row above them (replayed in time order)

    def __len__(self) -> int:
        return len(self.arrival_s)


class _BadRow(ValueError):
    """One malformed row; the reader skips it and records why."""


def _positive(value: object, what: str) -> int:
    try:
        x = float(str(value))
    except ValueError:
        raise _BadRow(f"{what} {str(value)[:40]!r} is not a number") from None
    if not 1 <= x <= MAX_TOKENS:
        raise _BadRow(f"{what} must be between 1 and {MAX_TOKENS:,} tokens (got {x:g})")
    if x != int(x):  # 12.5 was cut to 12, unsaid (sixteenth trial)
        raise _BadRow(f"{what} {x:g} is not a whole number of tokens")
    return int(x)


def _timestamp(value: object, scale: float = 1.0) -> float:
    text = str(value)
    try:
        t = float(text) * scale
    except ValueError:
        try:  # Azure 2023/2024 traces: "2023-11-16 18:15:46.6805900" (7-digit fraction)
            head, _, frac = text.strip().partition(".")
            t = datetime.fromisoformat(head).timestamp() + (float("0." + frac) if frac else 0.0)
        except (ValueError, OverflowError, OSError):
            raise _BadRow(f"timestamp {text[:40]!r} is neither seconds nor an ISO date") from None
    if not math.isfinite(t) or abs(t) > MAX_TIMESTAMP:
        raise _BadRow(f"timestamp {text[:40]!r} is not a finite time within {MAX_TIMESTAMP:g} s")
    return t


def _open(path: Path) -> Any:
    return path.open(newline="", encoding="utf-8", errors="replace")


def _csv_row(row: dict[str, Any], cols: tuple[str | None, str, str], fields: int) -> tuple[float, int, int]:
    if None in row.values() or None in row:
        raise _BadRow(f"expected {fields} fields")
    t = 0.0 if cols[0] is None else _timestamp(row[cols[0]])
    return t, _positive(row[cols[1]], cols[1]), _positive(row[cols[2]], cols[2])


def _csv(path: Path, cols: tuple[str | None, str, str]) -> Trace:
    t, i, o, ln, skipped = [], [], [], [], []
    with _open(path) as fh:
        reader = csv.DictReader(fh)
        try:
            names = reader.fieldnames or []
        except csv.Error as exc:
            raise TraceError(f"{path}:1: not a CSV header ({exc})") from exc
        want = [c for c in cols if c is not None]
        missing = [c for c in want if c not in names]
        if not names:  # an empty file read 'header lacks ...' (sixteenth trial)
            raise TraceError(f"{path}: empty file (expected a header {', '.join(want)} and rows)")
        if missing:  # the header it has, not the wanted list twice (trial)
            found = ", ".join(str(n) for n in names[:8]) + (", ..." if len(names) > 8 else "")
            raise TraceError(f"{path}: header lacks {', '.join(missing)} (expected {', '.join(want)}; found {found})")
        while True:
            lineno = reader.line_num + 1
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                skipped.append(f"{path}:{lineno}: not a CSV row ({exc})")
                continue
            try:
                values = _csv_row(row, cols, len(names))
            except _BadRow as exc:
                skipped.append(f"{path}:{reader.line_num}: {exc}")
                continue
            t.append(values[0])
            i.append(values[1])
            o.append(values[2])
            ln.append(reader.line_num)
    return _finish(path, t, i, o, None, skipped, ln)


def _mooncake_row(line: str) -> tuple[float, int, int, list[int]]:
    try:
        rec = json.loads(line)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise _BadRow(f"not a JSON record ({str(exc)[:60]})") from None
    if not isinstance(rec, dict):
        raise _BadRow("not a Mooncake record (expected a JSON object)")
    missing = [k for k in ("timestamp", "input_length", "output_length") if k not in rec]
    if missing:
        raise _BadRow(f"not a Mooncake record (lacks {', '.join(missing)})")
    hashes = rec.get("hash_ids", [])
    if (
        not isinstance(hashes, list)
        or len(hashes) > MAX_HASH_BLOCKS
        or not all(isinstance(x, int) and not isinstance(x, bool) for x in hashes)
    ):
        raise _BadRow(f"hash_ids must be a list of at most {MAX_HASH_BLOCKS:,} integers")
    t = _timestamp(rec["timestamp"], 1e-3)  # Mooncake timestamps are in ms
    return t, _positive(rec["input_length"], "input_length"), _positive(rec["output_length"], "output_length"), hashes


def _mooncake(path: Path) -> Trace:
    t, i, o, h, ln, skipped = [], [], [], [], [], []
    with _open(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = _mooncake_row(line)
            except _BadRow as exc:
                skipped.append(f"{path}:{lineno}: {exc}")
                continue
            t.append(row[0])
            i.append(row[1])
            o.append(row[2])
            h.append(row[3])
            ln.append(lineno)
    return _finish(path, t, i, o, h, skipped, ln)


def _finish(
    path: Path,
    t: list[float],
    i: list[int],
    o: list[int],
    h: list[list[int]] | None,
    skipped: list[str],
    lines: list[int],
) -> Trace:
    arr = np.asarray(t, dtype=float)
    if len(arr):
        far = np.abs(arr - np.median(arr)) > MAX_SPAN_S
        skipped += [
            f"{path}:{lines[k]}: arrives {arr[k] - np.median(arr):.3g} s from the median arrival; "
            f"a trace spans at most {MAX_SPAN_S:g} s"
            for k in np.flatnonzero(far)
        ]
        keep = np.flatnonzero(~far)
        arr, i, o = arr[keep], [i[k] for k in keep], [o[k] for k in keep]
        h = [h[k] for k in keep] if h is not None else None
    if not len(arr):
        raise TraceError(f"{skipped[0]} (and no good row)" if skipped else f"{path}: no requests")
    reordered = int((np.diff(arr) < 0).sum())  # re-sorted silently before (sixteenth trial)
    order = np.argsort(arr, kind="stable")
    arr = arr[order] - arr[order][0]
    hashes = [h[k] for k in order] if h is not None else None
    i_, o_ = np.asarray(i, dtype=np.int64)[order], np.asarray(o, dtype=np.int64)[order]
    return Trace(arr, i_, o_, hashes, skipped, reordered)


def read_trace(path: str | Path, fmt: str) -> Trace:
    p = Path(path)
    if fmt not in FORMATS:
        raise TraceError(f"trace format {fmt!r} unknown; allowed: {', '.join(FORMATS)}")
    if not p.exists():
        raise TraceError(f"trace file not found: {p}")
    if not p.is_file():
        raise TraceError(f"trace {p}: not a file")
    try:
        if fmt == "azure":
            return _csv(p, ("TIMESTAMP", "ContextTokens", "GeneratedTokens"))
        if fmt == "splitwise":
            return _csv(p, ("arrived_at", "num_prefill_tokens", "num_decode_tokens"))
        if fmt == "lengths":
            return _csv(p, (None, "input_length", "output_length"))
        return _mooncake(p)
    except OSError as exc:
        raise TraceError(f"trace {p}: cannot be read ({exc.strerror or exc})") from exc

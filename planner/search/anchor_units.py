"""Which unit an anchor's metric is read in: the metric groups of `planner validate` and the rule that an
anchor's free-text `unit` agrees with its metric. It does not convert units."""

from __future__ import annotations

import re

from planner.inputs.edge import one_line

THROUGHPUT_METRICS = {"input_tok_s_per_gpu", "output_tok_s_per_gpu", "total_tok_s_per_gpu", "output_tok_s"}
LATENCY_METRICS = {"ttft_ms", "tpot_ms", "e2e_ms", "output_tok_s_per_user"}

# how a unit's text says what it measures: a time (a latency metric's value is milliseconds) or a rate
# of tokens per second (throughput and per-user speed); shares and user counts are neither
_MS = re.compile(r"^\s*(ms|msec|milliseconds?)\b", re.IGNORECASE)
_TIME = re.compile(r"^\s*(ms|msec|milliseconds?|s|secs?|seconds?|us|µs|microseconds?|min|minutes?|h|hours?)\b", re.I)
_TOK_RATE = re.compile(r"tok(en)?s?\s*/\s*s(ec)?\b|tok(en)?s?\s+per\s+s(ec|econd)?\b", re.IGNORECASE)


def unit_error(metric: str, unit: str) -> str | None:
    """Why an anchor's `unit` contradicts its `metric` (None when it agrees or is left out). The unit is
    free text (shared/validation/README.md: "human-readable, must agree with metric"); only its
    dimension is read: `ms` for the `_ms` latencies, tokens per second for throughput and per-user speed,
    neither for the decode-time shares (a fraction) and `max_users_at_slo` (a count)."""
    if not unit.strip():
        return None
    got = f"unit: {one_line(repr(unit), 60)} does not agree with metric {metric}; allowed: "
    if metric.endswith("_ms"):
        return None if _MS.search(unit) else got + "ms (milliseconds), or leave unit out"
    if metric in THROUGHPUT_METRICS or metric == "output_tok_s_per_user":
        return None if _TOK_RATE.search(unit) else got + "a tokens-per-second unit (e.g. 'output tok/s per GPU')"
    if _TIME.search(unit) or _TOK_RATE.search(unit) or "%" in unit:
        what = "a fraction (e.g. 'fraction of decode step')" if metric.startswith("decode_time_share") else "a count"
        return got + what + " (not a time, rate or percent), or leave unit out"
    return None

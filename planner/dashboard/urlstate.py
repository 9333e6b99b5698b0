"""Page settings kept in the URL's query parameters, so a page can be shared: each widget key
below has a type; `from_params` turns query parameters into widget values (ignoring ones that
do not parse, so a bad link still opens the default page) and `to_params` writes the values
back. It knows nothing about what the widgets mean.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def _bool(v: str) -> bool:
    return v.lower() in ("1", "true", "yes", "on")


SHARED: dict[str, Callable[[str], Any]] = {
    "page": str,
    "model": str,
    "hardware": str,
    "engine": str,
    "max_gpus": int,
    "isl": int,
    "osl": int,
    "price": float,
    "traffic": str,
    "rate": float,
    "concurrency": int,
    "ttft": float,
    "tpot": float,
    "pct": str,
    "rec": int,
    "other": int,
    "kv": str,
    "moe": str,
    "ep": int,
    "batch": int,
    "mtp": float,
    "overlap": float,
    "frac": float,
    "tc": _bool,
    "ts": _bool,
    "min_user": float,
    "prices": str,
}


def from_params(params: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, parse in SHARED.items():
        if key in params:
            try:
                out[key] = parse(params[key])
            except ValueError:
                continue
    return out


def to_params(values: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, str]:
    """Values that differ from their defaults, as strings (a short, stable URL)."""
    return {k: str(v) for k, v in values.items() if k in SHARED and v is not None and v != defaults.get(k)}

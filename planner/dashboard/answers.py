"""Planned answers kept between questions and restarts: in memory (the last few) and on disk
under the user's cache directory, keyed by a fingerprint of the planner's code and data and by
the question, so an upgrade never serves a stale answer. Unlike Streamlit's own cache this one
can say whether an answer is already there, so the page knows when to show estimates first.
It stores what `planner.search.plan.plan` returned; it plans nothing itself.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections import OrderedDict
from pathlib import Path

from planner.search.plan import Answer

MEMORY: OrderedDict[str, Answer] = OrderedDict()
KEEP = 32  # answers kept in memory


def cache_dir(fingerprint: str) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "moe-capacity-planner" / fingerprint


def _name(question_json: str) -> str:
    return hashlib.sha256(question_json.encode()).hexdigest()[:24] + ".pickle"


def load(question_json: str, fingerprint: str) -> Answer | None:
    key = fingerprint + question_json
    if key in MEMORY:
        MEMORY.move_to_end(key)
        return MEMORY[key]
    path = cache_dir(fingerprint) / _name(question_json)
    try:
        a = pickle.loads(path.read_bytes())  # written by `store` below, in the user's own cache
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        return None
    if not isinstance(a, Answer):
        return None
    _remember(key, a)
    return a


def store(question_json: str, fingerprint: str, a: Answer) -> None:
    _remember(fingerprint + question_json, a)
    d = cache_dir(fingerprint)
    try:
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / (_name(question_json) + ".part")
        tmp.write_bytes(pickle.dumps(a))
        tmp.replace(d / _name(question_json))
    except OSError:
        return  # a read-only home still answers, from memory


def _remember(key: str, a: Answer) -> None:
    MEMORY[key] = a
    MEMORY.move_to_end(key)
    while len(MEMORY) > KEEP:
        MEMORY.popitem(last=False)

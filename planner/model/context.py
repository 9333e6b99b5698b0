"""A model's context window: the catalog's `context_window` (max_position_embeddings of the
config.json the entry cites; read by `roofline.catalog.hf_import` for a config.json given as the
model).

`context_problem` says, in one line naming the fields, when a request (input + output tokens) is
longer than the window; it returns None when the request fits or the model states no window. It
does not estimate or plan: `planner.search.plan.plan`, `planner.model.defaults.resolve` and the
dashboard call it before planning.
"""

from __future__ import annotations

from pathlib import Path

from roofline.catalog import get_model
from roofline.catalog.schema import ModelSpec


def context_window(model: str | ModelSpec, base_dir: Path | None = None) -> int | None:
    """Tokens one request may hold (input + output); None if the model states no window."""
    return (model if isinstance(model, ModelSpec) else get_model(model, base_dir)).context_window


def context_problem(model: str | ModelSpec, isl: int, osl: int) -> str | None:
    ctx = context_window(model)
    if not ctx or isl + osl <= ctx:
        return None
    name = model.id if isinstance(model, ModelSpec) else model
    return (
        f"isl + osl: input + output tokens ({isl + osl:,}) are longer than {name}'s context window "
        f"({ctx:,} tokens, max_position_embeddings in its config.json): no deployment can serve this request"
    )

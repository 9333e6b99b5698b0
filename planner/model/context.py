"""A model's context window, read from its cited Hugging Face config.json.

`context_problem` says, in one line naming the fields, when a request (input + output tokens) is
longer than the window (`max_position_embeddings` of the config the catalog entry cites, found under
`shared/reference/hf_configs/`); it returns None when the request fits or no config is on file. It
does not estimate or plan: `planner.search.plan.plan` and the dashboard call it before planning.
"""

from __future__ import annotations

import json
from pathlib import Path

from roofline.catalog import get_model

ROOT = Path(__file__).resolve().parents[2]
REFERENCES = [base / "shared" / "reference" / "hf_configs" for base in (ROOT, ROOT.parent)]


def context_window(model: str) -> int | None:
    """`max_position_embeddings` of the config.json the catalog entry cites; None if not on file."""
    src = get_model(model).source
    if "hf_configs/" not in src:
        return None
    name = src.split("hf_configs/")[1].rstrip(")")
    path = next((d / name for d in REFERENCES if (d / name).exists()), None)
    if path is None:
        return None
    cfg = json.loads(path.read_text())
    ctx = cfg.get("max_position_embeddings") or (cfg.get("text_config") or {}).get("max_position_embeddings")
    return int(ctx) if ctx else None


def context_problem(model: str, isl: int, osl: int) -> str | None:
    ctx = context_window(model)
    if not ctx or isl + osl <= ctx:
        return None
    return (
        f"isl + osl: input + output tokens ({isl + osl:,}) are longer than {model}'s context window "
        f"({ctx:,} tokens, max_position_embeddings in its config.json): no deployment can serve this request"
    )

"""The catalog: model architectures and GPU systems as validated data files.

`get_model(id_or_path)` accepts a catalog id or a path to a HF `config.json`; `get_hardware(id)`
a catalog id. Unknown ids raise `CatalogError` listing the known ones.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from functools import cache
from importlib import resources
from pathlib import Path

import yaml
from pydantic import ValidationError

from roofline.catalog.hf_import import model_from_hf_file
from roofline.catalog.schema import HardwareSpec, ModelSpec
from roofline.errors import CatalogError

__all__ = ["HardwareSpec", "ModelSpec", "get_hardware", "get_model", "hardware_ids", "model_ids"]


def _data_dir(kind: str) -> Path:
    return Path(str(resources.files("roofline.catalog") / "data" / kind))


@cache
def _load_all(kind: str) -> dict[str, ModelSpec | HardwareSpec]:
    schema = ModelSpec if kind == "models" else HardwareSpec
    out: dict[str, ModelSpec | HardwareSpec] = {}
    for path in sorted(_data_dir(kind).glob("*.yaml")):
        try:
            entry = schema.model_validate(yaml.safe_load(path.read_text()), strict=False)
        except ValidationError as exc:
            raise CatalogError(f"catalog file {path.name} is invalid: {exc}") from exc
        if entry.id in out:
            raise CatalogError(f"duplicate catalog id {entry.id!r} in {path.name}")
        out[entry.id] = entry
    return out


def model_ids() -> list[str]:
    return list(_load_all("models"))


def hardware_ids() -> list[str]:
    return list(_load_all("hardware"))


def _nearest(ref: str, ids: Iterable[str]) -> str:
    """' (did you mean X?)' for the id `ref` most likely meant: one it starts (case aside), else one it
    extends by a suffix, else the closest spelling (difflib), else nothing."""
    ids, r = list(ids), ref.lower()
    if not r:
        return ""
    # the id in other letter case first ('DeepSeek-V3' suggested 'deepseek-v3.2', the first id it prefixes)
    exact = [i for i in ids if i.lower() == r]
    # an id the reference starts with at a word boundary ('b200-sxm' read 'h200-sxm', one letter off)
    within = sorted((i for i in ids if r.startswith(i.lower() + "-")), key=len, reverse=True)
    hit = exact or [i for i in ids if i.startswith(r)] or within or difflib.get_close_matches(r, ids, n=1, cutoff=0.6)
    return f" (did you mean {hit[0]!r}?)" if hit else ""


def get_model(ref: str, base_dir: Path | None = None) -> ModelSpec:
    """A catalog model id, or a path (absolute, or relative to `base_dir`) to a HF config.json."""
    models = _load_all("models")
    if ref in models:
        m = models[ref]
        assert isinstance(m, ModelSpec)
        return m
    if ref.endswith(".json"):
        path = Path(ref) if base_dir is None or Path(ref).is_absolute() else base_dir / ref
        return model_from_hf_file(path)
    raise CatalogError(
        f"unknown model {ref!r}{_nearest(ref, models)}; known: {', '.join(models)} (or a config.json path)"
    )


def get_hardware(ref: str) -> HardwareSpec:
    hw = _load_all("hardware")
    if ref not in hw:
        raise CatalogError(f"unknown hardware {ref!r}{_nearest(ref, hw)}; known: {', '.join(hw)}")
    h = hw[ref]
    assert isinstance(h, HardwareSpec)
    return h

"""Build a `ModelSpec` from a Hugging Face `config.json`.

Understands the DeepSeek-V3/R1/V3.2/V4, Kimi K2 (incl. `text_config` wrappers), Qwen3-MoE,
gpt-oss and Llama families. Anything it does not understand is an error naming the missing key;
it never guesses an architecture.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from roofline.catalog.schema import (
    CompressedAttention,
    GQAAttention,
    Indexer,
    MLAAttention,
    ModelSpec,
    MoE,
)
from roofline.errors import CatalogError


def _get(cfg: dict[str, Any], key: str, *alts: str) -> Any:
    for k in (key, *alts):
        if k in cfg and cfg[k] is not None:
            return cfg[k]
    raise CatalogError(f"HF config lacks `{key}`" + (f" (or {', '.join(alts)})" if alts else ""))


def _quant_format(cfg: dict[str, Any]) -> str:
    q = cfg.get("quantization_config") or {}
    if cfg.get("expert_dtype") == "fp4":
        return "fp8 (experts fp4)"
    if q.get("quant_method") == "fp8":
        return "fp8"
    if q.get("quant_method") == "mxfp4":
        return "mxfp4 experts"
    groups = q.get("config_groups") or {}
    for g in groups.values():
        w = (g or {}).get("weights") or {}
        if w.get("num_bits") == 4:
            return "nvfp4" if w.get("group_size") == 16 else "w4a16"
    return str(cfg.get("torch_dtype") or cfg.get("dtype") or "bf16")


def model_from_hf_config(cfg: dict[str, Any], model_id: str, source: str = "") -> ModelSpec:
    """Translate one HF config dict; `model_id` becomes the catalog id."""
    if isinstance(cfg.get("text_config"), dict):  # Kimi K2.5/K2.6 multimodal wrapper
        cfg = {**cfg["text_config"], "quantization_config": cfg.get("quantization_config")}
    mtype = str(_get(cfg, "model_type"))
    hidden = int(_get(cfg, "hidden_size"))
    layers = int(_get(cfg, "num_hidden_layers"))
    heads = int(_get(cfg, "num_attention_heads"))
    attention: MLAAttention | CompressedAttention | GQAAttention
    moe: MoE | None = None
    dense_layers, dense_inter = layers, int(cfg.get("intermediate_size") or 0)
    n_routed = cfg.get("n_routed_experts") or cfg.get("num_experts") or cfg.get("num_local_experts")
    if n_routed:
        moe = MoE(
            num_experts=int(n_routed),
            top_k=int(_get(cfg, "num_experts_per_tok", "experts_per_token")),
            expert_intermediate=int(_get(cfg, "moe_intermediate_size", "intermediate_size")),
            num_shared_experts=int(cfg.get("n_shared_experts") or 0),
            n_group=int(cfg.get("n_group") or 1),
            topk_group=int(cfg.get("topk_group") or 1),
            hash_layers=int(cfg.get("num_hash_layers") or 0),
        )
        dense_layers = int(cfg.get("first_k_dense_replace") or 0)
        if mtype == "qwen3_moe" and cfg.get("mlp_only_layers"):
            dense_layers = len(cfg["mlp_only_layers"])
        if dense_layers == 0:
            dense_inter = 0
    if "kv_lora_rank" in cfg:
        indexer = None
        if cfg.get("index_topk"):
            indexer = Indexer(
                num_heads=int(cfg["index_n_heads"]),
                head_dim=int(cfg["index_head_dim"]),
                topk=int(cfg["index_topk"]),
            )
        attention = MLAAttention(
            num_heads=heads,
            q_lora_rank=int(cfg.get("q_lora_rank") or 0),
            kv_lora_rank=int(cfg["kv_lora_rank"]),
            qk_nope_head_dim=int(_get(cfg, "qk_nope_head_dim")),
            qk_rope_head_dim=int(_get(cfg, "qk_rope_head_dim")),
            v_head_dim=int(_get(cfg, "v_head_dim")),
            indexer=indexer,
        )
    elif mtype == "deepseek_v4":
        ratios = cfg["compress_ratios"]
        if isinstance(ratios, str):
            ratios = json.loads(ratios)
        attention = CompressedAttention(
            num_heads=heads,
            head_dim=int(_get(cfg, "head_dim")),
            rope_dim=int(_get(cfg, "qk_rope_head_dim")),
            q_lora_rank=int(_get(cfg, "q_lora_rank")),
            o_lora_rank=int(_get(cfg, "o_lora_rank")),
            o_groups=int(_get(cfg, "o_groups")),
            sliding_window=int(_get(cfg, "sliding_window")),
            compress_ratios=tuple(int(r) for r in ratios),
            indexer=Indexer(
                num_heads=int(_get(cfg, "index_n_heads")),
                head_dim=int(_get(cfg, "index_head_dim")),
                topk=int(_get(cfg, "index_topk")),
            ),
        )
    else:
        layer_types = cfg.get("layer_types") or []
        sliding = sum(1 for t in layer_types if t == "sliding_attention")
        window = cfg.get("sliding_window") if (sliding or cfg.get("use_sliding_window")) else None
        attention = GQAAttention(
            num_heads=heads,
            num_kv_heads=int(_get(cfg, "num_key_value_heads")),
            head_dim=int(cfg.get("head_dim") or hidden // heads),
            sliding_window=int(window) if window else None,
            sliding_layers=sliding if window else 0,
        )
    try:
        return ModelSpec(
            id=model_id,
            name=model_id,
            hidden_size=hidden,
            num_layers=layers,
            vocab_size=int(_get(cfg, "vocab_size")),
            attention=attention,
            dense_layers=dense_layers,
            dense_intermediate=dense_inter,
            moe=moe,
            mtp_layers=int(cfg.get("num_nextn_predict_layers") or 0),
            hyper_connections=int(cfg.get("hc_mult") or 1),
            sinkhorn_iters=int(cfg.get("hc_sinkhorn_iters") or 0),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            checkpoint_format=_quant_format(cfg),
            source=source,
        )
    except ValidationError as exc:
        raise CatalogError(f"HF config for {model_id!r} is not a valid model: {exc}") from exc


def model_from_hf_file(path: str | Path) -> ModelSpec:
    p = Path(path)
    try:
        cfg = json.loads(p.read_text())
    except FileNotFoundError as exc:
        raise CatalogError(f"model config file not found: {p}") from exc
    except json.JSONDecodeError as exc:
        raise CatalogError(f"model config {p} is not valid JSON: {exc}") from exc
    stem = p.stem.removesuffix("_config").lower().replace("_", "-").replace("--", "-")
    model_id = "".join(c if c.isalnum() or c in ".-" else "-" for c in stem).strip("-.")
    return model_from_hf_config(cfg, model_id=model_id, source=str(p))

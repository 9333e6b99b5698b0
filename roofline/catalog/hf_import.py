"""Build a `ModelSpec` from a Hugging Face `config.json`.

Understands the DeepSeek-V3/R1/V3.2/V4, Kimi K2 (incl. `text_config` wrappers), Qwen3-MoE,
gpt-oss and Llama families. Anything it does not understand is an error naming the missing key;
it never guesses an architecture. Every value it reads is type-checked (an integer field holding
a string, a list or 1e300 is an error naming the key), and the file must be UTF-8 JSON of at
most 4 MiB; every failure is a one-line `CatalogError`.
"""

from __future__ import annotations

import json
import math
import re
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

MAX_CONFIG_BYTES = 4 << 20  # the largest shipped config.json is under 10 kB
MAX_INT = 1 << 40  # no dimension, count or rank of a model comes near 1e12


def _get(cfg: dict[str, Any], key: str, *alts: str) -> Any:
    for k in (key, *alts):
        if k in cfg and cfg[k] is not None:
            return cfg[k]
    raise CatalogError(f"HF config lacks `{key}`" + (f" (or {', '.join(alts)})" if alts else ""))


def _as_int(value: Any, key: str) -> int:
    """An integer config value (integral floats such as 7168.0 accepted) within [0, MAX_INT]."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise CatalogError(f"HF config `{key}` must be an integer (got {str(value)[:40]!r})")
    if not 0 <= value <= MAX_INT or value != int(value):
        raise CatalogError(f"HF config `{key}` must be a whole number in [0, {MAX_INT}] (got {value!r})")
    return int(value)


def _int(cfg: dict[str, Any], key: str, *alts: str) -> int:
    return _as_int(_get(cfg, key, *alts), key)


def _opt_int(cfg: dict[str, Any], key: str, default: int = 0) -> int:
    v = cfg.get(key)
    return default if v is None or v == 0 else _as_int(v, key)


def _dict(value: Any, key: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise CatalogError(f"HF config `{key}` must be a mapping (got {type(value).__name__})")
    return value


def _list(value: Any, key: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise CatalogError(f"HF config `{key}` must be a list (got {type(value).__name__})")
    return value


def _quant_format(cfg: dict[str, Any]) -> str:
    q = _dict(cfg.get("quantization_config"), "quantization_config")
    if cfg.get("expert_dtype") == "fp4":
        return "fp8 (experts fp4)"
    if q.get("quant_method") == "fp8":
        return "fp8"
    if q.get("quant_method") == "mxfp4":
        return "mxfp4 experts"
    groups = _dict(q.get("config_groups"), "quantization_config.config_groups")
    for g in groups.values():
        w = _dict(_dict(g, "quantization_config.config_groups.*").get("weights"), "config_groups.*.weights")
        if w.get("num_bits") == 4 and w.get("group_size") != 16:
            return "w4a16"
        if w.get("num_bits") == 4:  # NVFP4; ModelOpt's `ignore` keeps the listed modules in the config's dtype
            return "nvfp4 experts" if _attention_ignored(cfg, q) else "nvfp4"
    return str(cfg.get("torch_dtype") or cfg.get("dtype") or "bf16")[:40]


def _attention_ignored(cfg: dict[str, Any], q: dict[str, Any]) -> bool:
    """Whether a ModelOpt NVFP4 checkpoint leaves most layers' attention unquantized: its `ignore` list names
    the self_attn modules (or whole layers) of at least half the layers (nvidia/Kimi-K2.6-NVFP4: all 61)."""
    layers = _opt_int(cfg, "num_hidden_layers", 1)
    kept = set()
    for entry in _list(q.get("ignore"), "quantization_config.ignore"):
        hit = re.search(r"layers\.(\d+)(\.self_attn|\*|$)", str(entry))
        if hit:
            kept.add(int(hit.group(1)))
    return len(kept) >= max(1, layers) / 2


def model_from_hf_config(cfg: dict[str, Any], model_id: str, source: str = "") -> ModelSpec:
    """Translate one HF config dict; `model_id` becomes the catalog id."""
    try:
        return _model(cfg, model_id, source)
    except ValidationError as exc:  # a value of the right type that the schema refuses (e.g. 0 experts)
        why = "; ".join(_error_text(e["loc"], e["msg"]) for e in exc.errors()[:3])
        raise CatalogError(f"HF config for {model_id!r} is not a valid model: {why}") from exc


def _error_text(loc: tuple[Any, ...], msg: str) -> str:
    """One schema error: its field path where it has one, pydantic's 'Value error, ' prefix dropped (a
    whole-model check read ': Value error, top_k (16) exceeds num_experts (8)')."""
    path = ".".join(str(x) for x in loc)
    msg = msg.removeprefix("Value error, ")
    return f"{path}: {msg}" if path else msg


def _model(cfg: dict[str, Any], model_id: str, source: str) -> ModelSpec:
    if not isinstance(cfg, dict):
        raise CatalogError(f"HF config for {model_id!r} must be a JSON object (got {type(cfg).__name__})")
    if isinstance(cfg.get("text_config"), dict):  # Kimi K2.5/K2.6 multimodal wrapper
        # the checkpoint's quantization sits beside text_config or inside it (moonshotai/Kimi-K2.5: INT4
        # experts in text_config.quantization_config; read as BF16 before, 258 GB per GPU on 8 B200)
        quant = cfg.get("quantization_config") or cfg["text_config"].get("quantization_config")
        cfg = {**cfg["text_config"], "quantization_config": quant}
    mtype = str(_get(cfg, "model_type"))
    hidden = _int(cfg, "hidden_size")
    layers = _int(cfg, "num_hidden_layers")
    heads = _int(cfg, "num_attention_heads")
    attention: MLAAttention | CompressedAttention | GQAAttention
    moe: MoE | None = None
    dense_layers, dense_inter = layers, _opt_int(cfg, "intermediate_size")
    routed_key = next((k for k in ("n_routed_experts", "num_experts", "num_local_experts") if cfg.get(k)), None)
    if routed_key:
        moe = MoE(
            num_experts=_int(cfg, routed_key),
            top_k=_int(cfg, "num_experts_per_tok", "experts_per_token"),
            expert_intermediate=_int(cfg, "moe_intermediate_size", "intermediate_size"),
            num_shared_experts=_opt_int(cfg, "n_shared_experts"),
            n_group=_opt_int(cfg, "n_group", 1),
            topk_group=_opt_int(cfg, "topk_group", 1),
            hash_layers=_opt_int(cfg, "num_hash_layers"),
        )
        moe = _own_expert_kernels(mtype, moe)
        dense_layers = _opt_int(cfg, "first_k_dense_replace")
        if mtype == "qwen3_moe" and cfg.get("mlp_only_layers"):
            dense_layers = len(_list(cfg["mlp_only_layers"], "mlp_only_layers"))
        if mtype == "llama4_text":  # read as Mixtral before: no shared expert, every layer MoE (101.7B, not 107.7B)
            moe, dense_layers, dense_inter = _llama4_ffn(cfg, moe, layers)
        if dense_layers == 0:
            dense_inter = 0
    if "kv_lora_rank" in cfg:
        indexer = None
        if cfg.get("index_topk"):
            indexer = Indexer(
                num_heads=_int(cfg, "index_n_heads"),
                head_dim=_int(cfg, "index_head_dim"),
                topk=_int(cfg, "index_topk"),
            )
        attention = MLAAttention(
            num_heads=heads,
            q_lora_rank=_opt_int(cfg, "q_lora_rank"),
            kv_lora_rank=_int(cfg, "kv_lora_rank"),
            qk_nope_head_dim=_int(cfg, "qk_nope_head_dim"),
            qk_rope_head_dim=_int(cfg, "qk_rope_head_dim"),
            v_head_dim=_int(cfg, "v_head_dim"),
            indexer=indexer,
        )
    elif mtype == "deepseek_v4":
        ratios = _get(cfg, "compress_ratios")
        if isinstance(ratios, str):
            try:
                ratios = json.loads(ratios)
            except (json.JSONDecodeError, RecursionError) as exc:
                raise CatalogError(f"HF config `compress_ratios` is not a JSON list ({exc})") from exc
        attention = CompressedAttention(
            num_heads=heads,
            head_dim=_int(cfg, "head_dim"),
            rope_dim=_int(cfg, "qk_rope_head_dim"),
            q_lora_rank=_int(cfg, "q_lora_rank"),
            o_lora_rank=_int(cfg, "o_lora_rank"),
            o_groups=_int(cfg, "o_groups"),
            sliding_window=_int(cfg, "sliding_window"),
            compress_ratios=tuple(_as_int(r, "compress_ratios") for r in _list(ratios, "compress_ratios")),
            indexer=Indexer(
                num_heads=_int(cfg, "index_n_heads"),
                head_dim=_int(cfg, "index_head_dim"),
                topk=_int(cfg, "index_topk"),
            ),
        )
    else:
        attention = _gqa(cfg, mtype, heads, hidden, layers)
    return ModelSpec(
        id=model_id,
        name=model_id,
        hidden_size=hidden,
        num_layers=layers,
        vocab_size=_int(cfg, "vocab_size"),
        attention=attention,
        dense_layers=dense_layers,
        dense_intermediate=dense_inter,
        moe=moe,
        mtp_layers=_opt_int(cfg, "num_nextn_predict_layers"),
        hyper_connections=_opt_int(cfg, "hc_mult", 1),
        sinkhorn_iters=_opt_int(cfg, "hc_sinkhorn_iters"),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        checkpoint_format=_quant_format(cfg),
        context_window=_opt_int(cfg, "max_position_embeddings") or None,
        source=source,
    )


def _gqa(cfg: dict[str, Any], mtype: str, heads: int, hidden: int, layers: int) -> GQAAttention:
    """Grouped-query attention, with its sliding-window layers (`layer_types`, gpt-oss) or chunked ones (Llama 4)."""
    layer_types = _list(cfg.get("layer_types"), "layer_types")
    sliding = sum(1 for t in layer_types if t == "sliding_attention")
    window = cfg.get("sliding_window") if (sliding or cfg.get("use_sliding_window")) else None
    if mtype == "llama4_text" and cfg.get("attention_chunk_size"):
        window, sliding = _llama4_chunks(cfg, layers)
    return GQAAttention(
        num_heads=heads,
        num_kv_heads=_int(cfg, "num_key_value_heads"),
        head_dim=_opt_int(cfg, "head_dim", hidden // max(heads, 1)),
        sliding_window=_as_int(window, "sliding_window") if window else None,
        sliding_layers=sliding if window else 0,
    )


def _llama4_ffn(cfg: dict[str, Any], moe: MoE, layers: int) -> tuple[MoE, int, int]:
    """Llama 4's feed-forward layers (transformers models/llama4/modeling_llama4.py): every MoE layer also
    runs a shared expert of `intermediate_size` (Llama4TextMoe.shared_expert), and only every
    `interleave_moe_layer_step`-th layer is MoE (Maverick: 2), the others dense MLPs of
    `intermediate_size_mlp`. Returns (the experts, the dense layers, their intermediate size)."""
    step = max(1, _opt_int(cfg, "interleave_moe_layer_step", 1))
    dense = layers - layers // step
    return moe.model_copy(update={"num_shared_experts": 1}), dense, _opt_int(cfg, "intermediate_size_mlp")


def _llama4_chunks(cfg: dict[str, Any], layers: int) -> tuple[int, int]:
    """Llama 4's chunked local attention: the layers with RoPE (`no_rope_layers` 1; by default three of
    every four, transformers Llama4TextConfig) attend within `attention_chunk_size`-token chunks, so their KV
    is at most one chunk, priced as a sliding window of that size (vLLM's hybrid allocator holds them
    alike); the NoPE layers attend globally. Returns (the window, the windowed layers)."""
    chunk = _as_int(cfg["attention_chunk_size"], "attention_chunk_size")
    rope = _list(cfg.get("no_rope_layers"), "no_rope_layers")
    interval = max(1, _opt_int(cfg, "nope_layer_interval", 4))
    local = sum(1 for v in rope if v) if rope else sum(1 for i in range(layers) if (i + 1) % interval)
    return chunk, local


def _own_expert_kernels(mtype: str, moe: MoE) -> MoE:
    """A DeepSeek-V4 config gets the expert kernels the catalog's V4 entry names (`MoE.kernels`: the
    engines run V4's FP4 experts on DeepGEMM), so an imported V4 is priced as the catalog's is."""
    if mtype != "deepseek_v4":
        return moe
    from roofline.catalog import get_model  # noqa: PLC0415 - the catalog imports this module

    v4 = get_model("deepseek-v4-pro").moe
    return moe if v4 is None else moe.model_copy(update={"kernels": v4.kernels, "kernels_source": v4.kernels_source})


def model_from_hf_file(path: str | Path) -> ModelSpec:
    p = Path(path)
    try:
        if not p.is_file():
            why = "not a file" if p.exists() else "file not found"
            raise CatalogError(f"model config {p}: {why}")
        if p.stat().st_size > MAX_CONFIG_BYTES:
            raise CatalogError(f"model config {p}: larger than {MAX_CONFIG_BYTES >> 20} MiB")
        cfg = json.loads(p.read_bytes().decode("utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: also JSONDecodeError, UnicodeDecodeError, NUL in path
        raise CatalogError(f"model config {p}: not readable UTF-8 JSON ({' '.join(str(exc).split())[:120]})") from exc
    except RecursionError as exc:
        raise CatalogError(f"model config {p}: nested too deeply") from exc
    stem = p.stem.removesuffix("_config").lower().replace("_", "-").replace("--", "-")
    model_id = "".join(c if c.isalnum() or c in ".-" else "-" for c in stem).strip("-.")
    return model_from_hf_config(cfg, model_id=model_id, source=str(p))

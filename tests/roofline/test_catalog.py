"""The catalog loads, validates strictly, and its parameter and KV counts match the papers."""

from __future__ import annotations

import json

import pytest

from roofline.catalog import get_hardware, get_model, hardware_ids, model_ids
from roofline.catalog.hf_import import model_from_hf_config, model_from_hf_file
from roofline.errors import CatalogError
from roofline.params import active_params, kv_bytes_per_token, total_params, window_bytes_per_seq

REQUIRED_MODELS = {
    "deepseek-v3",
    "deepseek-v3.2",
    "deepseek-v4-flash",
    "deepseek-v4-pro",
    "kimi-k2",
    "qwen3-235b-a22b",
    "qwen3-30b-a3b",
    "gpt-oss-120b",
    "llama-3.1-70b",
    "llama-3.1-8b",
}
REQUIRED_HW = {"h100-sxm", "h200-sxm", "h800", "b200", "b300", "gb200-nvl72", "gb300-nvl72", "rtx-pro-6000"}


def test_catalog_has_every_model_and_system_the_anchor_format_names():
    assert set(model_ids()) >= REQUIRED_MODELS
    assert set(hardware_ids()) >= REQUIRED_HW


def test_every_hardware_entry_cites_sources_for_its_rates():
    for hid in hardware_ids():
        hw = get_hardware(hid)
        assert "peak_tflops" in hw.sources, hid
        assert hw.peak_tflops.fp8 == pytest.approx(2 * hw.peak_tflops.bf16, rel=0.01)


def test_nvfp4_rate_exists_only_on_blackwell():
    for hid in hardware_ids():
        hw = get_hardware(hid)
        assert (hw.peak_tflops.fp4 is not None) == hw.is_blackwell, hid


@pytest.mark.parametrize(
    ("model", "total_b", "active_b"),
    [
        ("deepseek-v3", 671, 37),
        ("deepseek-v4-flash", 284, 13),
        ("deepseek-v4-pro", 1600, 49),
        ("qwen3-235b-a22b", 235, 22),
        ("gpt-oss-120b", 117, 5.1),
        ("llama-3.1-70b", 70.6, 70.6),
        ("qwen3-30b-a3b", 30.5, 3.3),
        ("kimi-k2", 1030, 32.5),
    ],
)
def test_parameter_counts_match_published_sizes(model, total_b, active_b):
    """Published totals (model cards) within 3%; active within 12% (cards differ on embeddings)."""
    m = get_model(model)
    assert total_params(m) / 1e9 == pytest.approx(total_b, rel=0.03)
    assert active_params(m) / 1e9 == pytest.approx(active_b, rel=0.12)


def test_deepseek_v3_kv_bytes_per_token_are_70272_bf16_and_35136_fp8():
    m = get_model("deepseek-v3")
    assert kv_bytes_per_token(m, "bf16") == 70272
    assert kv_bytes_per_token(m, "fp8") == 35136


def test_v32_indexer_adds_fp8_keys_with_scales():
    """128 fp8 indexer values plus one fp32 scale per 128 = 132 bytes per layer."""
    m = get_model("deepseek-v3.2")
    assert kv_bytes_per_token(m, "fp8") == 35136 + 61 * 132


def test_v4_pro_kv_at_one_million_tokens_matches_vllm_blog():
    """vLLM blog (2026-04-24): 9.62 GiB of BF16 KV per sequence at 1M context."""
    m = get_model("deepseek-v4-pro")
    gib = (kv_bytes_per_token(m, "bf16") * 2**20 + window_bytes_per_seq(m, "bf16")) / 2**30
    assert gib == pytest.approx(9.62, abs=0.05)


def test_gqa_kv_shards_over_kv_heads():
    m = get_model("llama-3.1-70b")
    assert kv_bytes_per_token(m, "bf16") == 2 * 8 * 128 * 2 * 80
    assert kv_bytes_per_token(m, "bf16", kv_heads_per_rank=1) == 2 * 128 * 2 * 80


def test_hf_import_reproduces_catalog_entries(shared_dir):
    pairs = {
        "deepseek-v3": "deepseek-ai--DeepSeek-V3_config.json",
        "deepseek-v3.2": "deepseek-ai--DeepSeek-V3.2_config.json",
        "deepseek-v4-flash": "deepseek-ai--DeepSeek-V4-Flash_config.json",
        "qwen3-235b-a22b": "Qwen--Qwen3-235B-A22B_config.json",
        "gpt-oss-120b": "openai--gpt-oss-120b_config.json",
        "llama-3.1-70b": "meta-llama--Meta-Llama-3.1-70B_config.json",
    }
    for mid, fn in pairs.items():
        cfg = json.loads((shared_dir / "reference" / "hf_configs" / fn).read_text())
        imported = model_from_hf_config(cfg, mid)
        cat = get_model(mid)
        assert imported.attention == cat.attention, mid
        assert imported.moe == cat.moe, mid
        assert total_params(imported) == total_params(cat), mid


def test_every_catalog_context_window_is_its_cited_configs(shared_dir):
    """The window the planner refuses long requests by is the cited config.json's
    max_position_embeddings, for every entry whose config is on file (and every entry states one)."""
    checked = 0
    for mid in model_ids():
        m = get_model(mid)
        assert m.context_window, mid
        if "hf_configs/" not in m.source:
            continue
        cfg = json.loads(
            (shared_dir / "reference" / "hf_configs" / m.source.split("hf_configs/")[1].rstrip(")")).read_text()
        )
        assert m.context_window == model_from_hf_config(cfg, mid).context_window, mid
        checked += 1
    assert checked >= 8


def test_every_real_hf_config_imports(shared_dir):
    paths = [
        p
        for p in sorted((shared_dir / "reference" / "hf_configs").glob("*_config.json"))
        if not p.name.endswith("hf_quant_config.json")
    ]  # quantization metadata, not a model
    assert len(paths) >= 10
    for path in paths:
        m = model_from_hf_file(path)
        assert total_params(m) > 1e9, path.name


def test_kimi_multimodal_wrapper_imports_its_text_model(shared_dir):
    m = model_from_hf_file(shared_dir / "reference" / "hf_configs" / "nvidia--Kimi-K2.6-NVFP4_config.json")
    assert m.moe is not None
    assert m.moe.num_experts == 384
    assert m.checkpoint_format == "nvfp4 experts"  # attention and shared experts ignored: 16-bit


def test_unknown_ids_list_the_known_ones():
    with pytest.raises(CatalogError, match=r"known: .*deepseek-v3"):
        get_model("deepseek-v9")
    with pytest.raises(CatalogError, match=r"known: .*h200-sxm"):
        get_hardware("h300")


def test_hf_config_missing_a_key_names_it():
    with pytest.raises(CatalogError, match=r"hidden_size"):
        model_from_hf_config({"model_type": "llama", "num_hidden_layers": 2}, "x")


def test_missing_config_file_is_a_clear_error(tmp_path):
    with pytest.raises(CatalogError, match=r"not found"):
        model_from_hf_file(tmp_path / "nope_config.json")


def test_an_unknown_id_suggests_the_one_most_likely_meant():
    """`--hardware H100` and `--model deepseek-r1` (the V3 architecture) name the catalog id to use."""
    from roofline.catalog import get_hardware, get_model
    from roofline.errors import CatalogError

    with pytest.raises(CatalogError, match=r"unknown hardware 'H100' \(did you mean 'h100-sxm'\?\)"):
        get_hardware("H100")
    with pytest.raises(CatalogError, match=r"\(did you mean 'deepseek-v3'\?\)"):
        get_model("deepseek-r1")
    with pytest.raises(CatalogError) as e:
        get_model("foo")
    assert "did you mean" not in str(e.value)

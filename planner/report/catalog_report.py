"""The `planner catalog` tables: the models and GPU systems the catalog holds, with their shapes and peaks
and where each comes from (a model's config source; each system's sources for the figures shown).
It does not load or validate catalog files (`roofline.catalog`)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from roofline.catalog import get_hardware, get_model, hardware_ids, model_ids
from roofline.params import active_params, kv_bytes_per_token, total_params


def print_catalog(con: Console, what: str) -> None:
    """Print the `models` table, the `hardware` table, or both (`all`)."""
    if what in ("all", "models"):
        t = Table(title="models")
        for col in ("id", "name", "layers", "total params", "active", "KV B/token bf16", "attention", "source"):
            t.add_column(col, no_wrap=col == "id")
        for mid in model_ids():
            m = get_model(mid)
            t.add_row(
                mid,
                m.name,
                str(m.num_layers),
                f"{total_params(m) / 1e9:,.1f}B",
                f"{active_params(m) / 1e9:,.1f}B",
                f"{kv_bytes_per_token(m, 'bf16'):,.0f}",
                m.attention.kind,
                m.source or "-",
            )
        con.print(t)
    if what in ("all", "hardware"):
        t = Table(title="hardware (dense peaks per GPU)")
        for col in ("id", "arch", "BF16 TF", "FP8 TF", "FP4 TF", "memory", "BW TB/s", "NVLink domain", "NIC Gb/s"):
            t.add_column(col, no_wrap=col == "id")
        for hid in hardware_ids():
            h = get_hardware(hid)
            fp4 = f"{h.peak_tflops.fp4:,.0f}" if h.peak_tflops.fp4 else "-"
            t.add_row(
                hid,
                h.arch,
                f"{h.peak_tflops.bf16:,.0f}",
                f"{h.peak_tflops.fp8:,.0f}",
                fp4,
                f"{h.memory_gb:g} GB",
                f"{h.memory_bw_tbps:g}",
                str(h.scaleup.domain_gpus),
                f"{h.nic_gbps_per_gpu:g}",
            )
        con.print(t)
        for hid in hardware_ids():  # where the figures above come from (catalog hardware/<id>.yaml `sources`)
            said = "; ".join(f"{k}: {v}" for k, v in get_hardware(hid).sources.items())
            con.print(f"{hid} sources: {said}", markup=False, highlight=False)

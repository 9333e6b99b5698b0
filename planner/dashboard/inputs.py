"""The dashboard's input panels: the question (sidebar) and the what-if controls. Widgets are
keyed by the names `planner.dashboard.urlstate` keeps in the URL; the panels return plain
values (a question mapping for `build_question`, a `WhatIf`) and compute nothing.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from planner.dashboard import exports
from planner.dashboard.whatif import WhatIf
from planner.inputs.question import MAX_PLAN_GPUS
from planner.search.space import WIDE_EP
from roofline.catalog import hardware_ids, model_ids

CHOICES: dict[str, list[Any]] = {  # the options of each choice widget, by its key
    "page": ["Plan", "Which GPU?", "Validation"],
    "engine": ["sglang", "trtllm", "vllm"],
    "traffic": ["best operating point", "request rate", "concurrency"],
    "pct": ["p90", "p99"],  # the percentile the SLO targets bind (planner.inputs.question.SLO)
    "kv": ["as planned", "bf16", "fp8"],
    "moe": ["as planned", "fp8", "nvfp4", "mxfp4", "w4a16"],
    "ep": [0, 2, 4, 8, *WIDE_EP],  # a link's EP; the panel offers the model's own (whatif.ep_scales)
    "mtp": [-1.0, *[i / 4 for i in range(13)]],  # -1: as planned, 0: off
    "overlap": [-1.0, *[i / 20 for i in range(21)]],
    "frac": [-1.0, *[i / 100 for i in range(30, 100)]],  # 0.30-0.99: a scenario takes any fraction
}
RANGES: dict[str, tuple[float, float]] = {  # (least, most) of each number widget, by its key
    "max_gpus": (1, MAX_PLAN_GPUS),  # what the CLI's --gpus takes (it stopped at 1,152)
    "isl": (1, 10_000_000),
    "osl": (1, 1_000_000),
    "price": (0.01, 100.0),
    "rate": (0.01, 1e6),
    "concurrency": (1, 1_000_000),
    "ttft": (1.0, 1e6),
    "tpot": (0.01, 1e5),
    "batch": (0, 100_000),
    "min_user": (0.0, 10_000.0),
}


def valid(key: str, value: Any) -> bool:
    """Whether a value from a shared link fits its widget (a stale link opens the default)."""
    if key in CHOICES:
        return value in CHOICES[key]
    if key in RANGES:
        lo, hi = RANGES[key]
        return lo <= value <= hi
    return True


def _number(where: Any, label: str, key: str) -> float:
    lo, hi = RANGES[key]
    return where.number_input(label, lo, hi, key=key)


def question_panel() -> dict[str, Any]:
    sb = st.sidebar
    sb.header("Question")
    q: dict[str, Any] = {
        "model": sb.selectbox("model", model_ids(), key="model"),
        "hardware": sb.selectbox("hardware", hardware_ids(), key="hardware"),
        "max_gpus": int(_number(sb, "GPUs (at most)", "max_gpus")),
        "isl": int(_number(sb, "input tokens", "isl")),
        "osl": int(_number(sb, "output tokens", "osl")),
        "engine": sb.selectbox("engine", CHOICES["engine"], key="engine"),
        "price_per_gpu_hour": float(_number(sb, "price per GPU-hour (USD)", "price")),
    }  # verify_top: the question's default, as `planner plan` (the trial read 2 simulated rows here, 3 there)
    traffic = sb.radio("traffic", CHOICES["traffic"], key="traffic")
    if traffic == "request rate":
        q["rate"] = float(_number(sb, "requests/s", "rate"))
    elif traffic == "concurrency":
        q["concurrency"] = int(_number(sb, "requests in flight", "concurrency"))
    sb.subheader("SLO")
    pct = sb.radio("percentile", CHOICES["pct"], key="pct", horizontal=True)
    q["slo"] = {
        f"ttft_{pct}_ms": float(_number(sb, "TTFT ms", "ttft")),
        f"tpot_{pct}_ms": float(_number(sb, "TPOT ms", "tpot")),
    }
    config = sb.file_uploader("model config.json (replaces the model above)", type=["json"])
    if config is not None:  # what `planner plan --model PATH` takes (the dashboard offered catalog ids only)
        q["model"] = exports.config_from_upload(config.getvalue(), config.name)
    upload = sb.file_uploader("trace (Azure/Splitwise CSV, Mooncake JSONL)", type=["csv", "jsonl"])
    if upload is not None:
        trace = exports.trace_from_upload(upload.getvalue(), upload.name)
        q["simulation"] = {"requests": 2000, "trace": trace.model_dump()}
    return q


def what_if_panel(fallbacks: bool, eps: list[int]) -> WhatIf:
    st.markdown("**What if** (estimates; compared with the same deployment estimated the same way)")
    c = st.columns(4)
    kv = c[0].selectbox("KV cache", CHOICES["kv"], key="kv")
    moe = c[1].selectbox("experts", CHOICES["moe"], key="moe")
    if st.session_state.get("ep", 0) not in eps:  # a link's or another model's EP: as planned
        st.session_state["ep"] = 0
    ep = c[2].selectbox("decode EP", [0, *eps], format_func=lambda v: str(v) if v else "as planned", key="ep")
    batch = _number(c[3], "batch cap / instance (0: as planned)", "batch")
    c2 = st.columns(4)
    mtp = c2[0].select_slider(
        "MTP accepted of 3 drafts",
        CHOICES["mtp"],
        key="mtp",
        format_func=lambda v: "as planned" if v < 0 else "off" if v == 0 else f"{v:g}",
    )
    overlap = c2[1].select_slider(
        "comm overlap", CHOICES["overlap"], key="overlap", format_func=lambda v: "as planned" if v < 0 else f"{v:.0%}"
    )
    frac = c2[2].select_slider(
        "KV memory fraction",
        CHOICES["frac"],
        key="frac",
        format_func=lambda v: "as planned" if v < 0 else f"{v:.2f}",
    )
    tc = c2[3].toggle("tensor-core kernels for fallbacks", key="tc") if fallbacks else False
    return WhatIf(
        kv_cache=None if kv == "as planned" else kv,
        moe=None if moe == "as planned" else moe,
        ep=ep or None,
        batch=int(batch) or None,
        mtp_accepted=None if mtp < 0 else mtp,
        comm_overlap=None if overlap < 0 else overlap,
        mem_fraction=None if frac < 0 else frac,
        tensor_core_kernels=bool(tc),
    )

"""Streamlit dashboard: `streamlit run app.py`.

Thin by design: it lays out what `planner.dashboard` computes from the same API as the `planner`
CLI. Every figure of a recommendation comes from its one record (`planner.report.plan_report.record`);
what-if figures are estimates, compared with the same deployment estimated the same way.
Settings live in the URL so a page can be shared; bad input shows as a message on the page.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import streamlit as st

from planner.dashboard import answers, charts, exports, inputs, pages, simview, urlstate, view, whatif_view
from planner.dashboard.whatif import Breakdown, WhatIf, apply_what_if, breakdown, ep_scales, gpu_budget_problem, gpus_of
from planner.dashboard.whatif import tensor_core_overrides as tc_overrides
from planner.inputs.question import DEFAULT_QUESTION, Question, build_question
from planner.report.plan_notes import notes
from planner.report.plan_report import records, table_rows
from planner.search.plan import Answer, plan
from roofline.catalog import hardware_ids, model_ids
from roofline.errors import PlannerError

ROOT = Path(__file__).resolve().parent
ANCHORS = next(
    (p for p in (b / "shared" / "validation" / "seed_anchors.yaml" for b in (ROOT, ROOT.parent)) if p.exists()),
    ROOT.parent / "shared" / "validation" / "seed_anchors.yaml",
)
D = DEFAULT_QUESTION
DEFAULTS: dict[str, Any] = {
    "page": "Plan", "model": D.model, "hardware": D.hardware, "engine": D.engine, "max_gpus": D.max_gpus or 72,
    "isl": D.isl, "osl": D.osl, "price": D.price_per_gpu_hour, "traffic": "best operating point", "rate": 10.0,
    "concurrency": 256, "ttft": D.slo.target("ttft") or 2000.0, "tpot": D.slo.target("tpot") or 50.0,
    "pct": D.slo.statistic, "rec": 0,
    "other": 1, "kv": "as planned", "moe": "as planned", "ep": 0, "batch": 0, "mtp": -1.0, "overlap": -1.0,
    "frac": -1.0, "tc": False, "ts": False, "min_user": 0.0, "prices": "",
}  # fmt: skip

st.set_page_config(page_title="MoE capacity planner", layout="wide")
# No Deploy button: a capacity tool, not a demo (st.set_option cannot change the toolbar once served).
# A narrower question panel and page margins leave the recommendations table its full width at 1600 px.
st.html(
    "<style>[data-testid='stAppDeployButton'] {display: none;}"
    "[data-testid='stSidebar'] {min-width: 230px; max-width: 230px;}"
    "[data-testid='stMainBlockContainer'] {padding: 2rem 1.5rem 2rem 1.5rem; max-width: none;}</style>"
)

if "_seeded" not in st.session_state:  # first run of a session: settings from the URL
    st.session_state["_seeded"] = True
    catalog = {"model": model_ids(), "hardware": hardware_ids()}
    for k, v in urlstate.from_params(st.query_params).items():
        if inputs.valid(k, v) and v in catalog.get(k, [v]):  # a stale link opens the defaults, not an error
            st.session_state[k] = v
for k, v in DEFAULTS.items():  # re-stated each run, so settings survive a page that hides their widgets
    st.session_state[k] = st.session_state.get(k, v)


@st.cache_resource
def code_fingerprint() -> str:
    return exports.code_fingerprint()


def answer_for(q_in: dict[str, Any]) -> Answer:
    """The planned answer; on a first visit the estimates show while the top candidates are
    simulated, then the verified answer replaces them."""
    key, fp = _js(q_in), code_fingerprint()
    a = answers.load(key, fp)
    if a is not None:
        return a
    holder = st.empty()
    with holder.container(), st.spinner("scoring candidates..."):
        quick = plan(build_question({**q_in, "verify_top": 0}), workers=None)
    if quick.recommendations:
        with holder.container():
            st.info(
                "Estimates, not yet simulated: the top candidates are being simulated; this table will be replaced."
            )
            show_table(quick)
    with st.spinner("simulating the top candidates..."):
        a = plan(build_question(q_in), workers=None)
    answers.store(key, fp, a)
    holder.empty()
    return a


def show_table(a: Answer) -> list[dict[str, Any]]:
    rows = table_rows(a)
    st.subheader("Recommendations" if a.feasible else "Closest configuration first")
    st.dataframe(
        rows,
        hide_index=True,
        width="stretch",
        height=35 * (len(rows) + 1) + 3,
        column_order=view.TABLE_COLUMNS,
        column_config={
            k: st.column_config.Column(help=h, width=view.COLUMN_WIDTHS.get(k)) for k, h in view.COLUMN_HELP.items()
        },
    )
    st.caption(view.ranking_note(a))
    return rows


@st.cache_data(max_entries=256)
def breakdown_for(scn_json: str) -> Breakdown:
    return breakdown(json.loads(scn_json))


@st.cache_data(max_entries=64)
def fallbacks_for(scn_json: str) -> dict[str, str]:
    return tc_overrides(json.loads(scn_json))


@st.cache_data(show_spinner="simulating...", max_entries=16)
def timeseries_for(scn_json: str, sim_json: str) -> dict[str, Any]:
    return simview.timeseries(json.loads(scn_json), json.loads(sim_json))


def _js(x: object) -> str:
    return json.dumps(x, sort_keys=True, default=str)


def show_cards(cards: list[view.Card]) -> None:
    for col, c in zip(st.columns(len(cards)), cards, strict=True):
        arrow = "off" if c.delta_color == "off" else "auto"  # no arrow on an unchanged figure
        col.metric(c.label, c.value, c.delta, delta_color=c.delta_color, help=c.help, delta_arrow=arrow)  # type: ignore[arg-type]


def what_if_section(q: Question, a: Answer, i: int, base: dict[str, Any], w: WhatIf) -> tuple[Breakdown, Any]:
    b0 = breakdown_for(_js(base))
    if not w.active:
        return b0, None
    changed = apply_what_if(base, w)
    try:
        b1 = breakdown_for(_js(changed))
    except PlannerError as exc:  # an impossible what-if (e.g. NVFP4 on Hopper) is a message, the rest stays
        st.error(f"what-if: {exc}")
        return b0, None
    over = gpu_budget_problem(changed, q.budget)
    if over:
        st.error(over)
    for note in b1.notes:
        st.warning(note)
    deltas = whatif_view.what_if_deltas(b0, b1, gpus_of(base), gpus_of(changed), q.osl)
    show_cards([view.Card(d.label, d.text, whatif_view.DELTA_HELP, d.change, d.color) for d in deltas])
    st.markdown(view.badge_markdown(view.slo_badges(q, whatif_view.estimate_figures(b1), "what-if estimate, mean")))
    st.caption(whatif_view.explain_change(b0, b1, base))
    return b1, changed


def side_by_side(a: Answer, i: int, j: int, b_whatif: Breakdown | None) -> None:
    st.subheader("Side by side")
    left, right = st.columns(2)
    rows_l = whatif_view.side_rows(a, i, b_whatif)
    rows_r = whatif_view.side_rows(a, j, None)
    title_l = f"#{i + 1} with the what-if" if b_whatif else f"#{i + 1} as planned"
    left.markdown(f"**{title_l}**")
    left.dataframe(rows_l, hide_index=True, width="stretch")
    right.markdown(f"**#{j + 1} as planned**")
    right.dataframe(rows_r, hide_index=True, width="stretch")


def plan_page(q_in: dict[str, Any]) -> None:
    q = build_question(q_in)  # bad input becomes a message, not a traceback
    st.title("MoE capacity planner")
    st.markdown(view.header(q))
    problem = view.context_problem(q)
    if problem:
        st.error(problem)
        return
    a = answer_for(q_in)
    st.caption(f"{a.scored} candidates scored, {sum(a.pruned.values())} pruned, {a.simulated} simulations run")
    if q.simulation and q.simulation.trace:
        st.info(f"Trace-driven: the simulated rows and the time series replay {Path(q.simulation.trace.path).name}.")
    for msg in filter(None, [view.closest_message(a), *notes(a, records(a))]):
        st.warning(msg)
    empty = view.empty_reason(a)
    if empty:
        st.error(empty)
        return
    rows = show_table(a)
    labels = [f"#{r['#']} {r['deployment']} ({r['precision']}{', MTP' if r['MTP'] == 'yes' else ''})" for r in rows]
    for key in ("rec", "other"):
        if st.session_state[key] >= len(labels):
            st.session_state[key] = min(DEFAULTS[key], len(labels) - 1)
    c1, c2 = st.columns(2)
    i = c1.selectbox("deployment", range(len(labels)), format_func=labels.__getitem__, key="rec")
    j = c2.selectbox("compare with", range(len(labels)), format_func=labels.__getitem__, key="other")
    st.subheader("Pareto front")
    reason = view.front_reason(a)
    if reason:
        st.info(reason)
    st.plotly_chart(charts.pareto_figure(a, i), width="stretch")
    deployment_section(q, q_in, a, rows, i, j)


def deployment_section(
    q: Question, q_in: dict[str, Any], a: Answer, rows: list[dict[str, Any]], i: int, j: int
) -> None:
    """The chosen deployment: its record's cards, the what-if, side by side, charts, downloads."""
    st.subheader(f"#{i + 1} {rows[i]['deployment']}")
    cards, rec = view.plan_cards(a, i)
    show_cards(cards)
    st.markdown(view.badge_markdown(view.slo_badges(q, rec, rec["figures"])))
    base = exports.scenario_of(a, i)
    b_plan = breakdown_for(_js(base))
    if b_plan.capacity_rps is not None:
        st.caption(
            f"At the SLO #{i + 1} sustains about {b_plan.capacity_rps:,.1f} requests/s (estimate: the largest rate "
            "whose estimated means meet every target)."
        )
    w = inputs.what_if_panel(bool(fallbacks_for(_js(base))), ep_scales(q.model, q.hardware, q.engine, q.budget))
    b1, changed = what_if_section(q, a, i, base, w)
    b_other = breakdown_for(_js(exports.scenario_of(a, j)))
    side_by_side(a, i, j, b1 if changed else None)
    items = [(f"#{i + 1}", b_plan)] + ([("what-if", b1)] if changed else []) + [(f"#{j + 1}", b_other)]
    st.caption("time per forward step by category (the step-cost model, at the held traffic: estimates)")
    st.plotly_chart(charts.breakdown_figure(items), width="stretch")
    st.caption(f"memory per GPU, #{i + 1}{' with the what-if' if changed else ''}")
    st.plotly_chart(charts.memory_figure(b1), width="stretch")
    scn = changed or base
    if st.toggle("simulate this deployment (time series)", key="ts"):
        ts = timeseries_for(_js(scn), _js(q_in.get("simulation")))
        steady = "" if ts.get("converged") else "; the measured window had not converged (figures still moving)"
        st.caption(f"simulated: {ts['requests']:,} requests, {ts['source']}{steady}. Dotted: the record's batch.")
        slo = {f"{k.split('_')[0]}_ms": v for k, v in q.slo.targets().items()}
        chart = charts.timeseries_figure(ts, slo, rec["batch_per_instance"], q.slo.statistic)
        st.plotly_chart(chart, width="stretch")
    downloads(a, i, w, scn)


def downloads(a: Answer, i: int, w: WhatIf, scn: dict[str, Any]) -> None:
    files = exports.downloads(a, i, w, scn)
    for col, (name, text) in zip(st.columns(len(files)), files.items(), strict=True):
        col.download_button(name, text, file_name=name)
    with st.expander("scenario to download" + (" (with the what-if)" if w.active else "")):
        st.code(next(iter(files.values())), language="yaml")


page = st.sidebar.radio("page", inputs.CHOICES["page"], key="page", horizontal=True)
try:
    if page == "Plan":
        plan_page(inputs.question_panel())
    elif page == "Which GPU?":
        pages.compare_page(code_fingerprint())
    else:
        pages.validation_page(ANCHORS)
except PlannerError as exc:
    st.error(str(exc))
values = {k: st.session_state.get(k) for k in DEFAULTS}
st.query_params.from_dict(urlstate.to_params(values, DEFAULTS))

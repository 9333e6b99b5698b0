"""The candidate space of a planning question, and why candidates are pruned.

A candidate is a serving mode (aggregated, or disaggregated prefill + decode), an instance
layout per pool (TP, attention DP, EP, PP), a precision mix the hardware can run, MTP on/off and
a KV memory fraction. Concurrency per instance is not part of the candidate: `planner.search.score`
sweeps it. Layouts include non-powers of two (EP 24, 48, 72, 144) where the NVLink domain and
the budget allow; PP appears only where the PP=1 layout of the same GPUs cannot hold the weights.
A question that states part of a layout (an anchor, a scenario with unknown fields) searches
`stated_layouts`: the space's own layouts that match, else every split of the stated GPUs the
model allows (any TP x attention-DP x PP, EP over a stage's GPUs), and may fix the precisions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import cache

from pydantic import ValidationError

from planner.engines import expert_replicas, wide_ep_replicas
from planner.inputs.question import Question
from planner.model.defaults import MTP_DRAFTS, checkpoint_formats, fp8_cache_attention, mtp_acceptance
from planner.model.deployment import Deployment, Pool, make_pool
from planner.model.steps import memory
from roofline.catalog import get_hardware, get_model
from roofline.catalog.schema import HardwareSpec, ModelSpec
from roofline.deployment import MTPConfig, Parallelism
from roofline.errors import PlannerError
from roofline.memory import kv_needed_tokens
from roofline.precision import PrecisionMix

WIDE_EP = (16, 24, 32, 40, 48, 56, 64, 72, 96, 128, 144)


def lay(gpus: int, tp: int = 1, dp: int = 1, ep: int = 1, pp: int = 1) -> Parallelism:
    return Parallelism(gpus=gpus, tp=tp, dp_attention=dp, ep=ep, pp=pp)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A deployment shape without instance counts (the score sizes them)."""

    mode: str
    decode: Parallelism  # the aggregated instance, or the decode pool's instance
    prefill: Parallelism | None
    precision: PrecisionMix
    mtp: bool
    mem_fraction: float | None  # None: each pool's engine default for its layout and role


@cache
def pool(
    model: str,
    hardware: str,
    engine: str,
    role: str,
    par: Parallelism,
    prec: PrecisionMix,
    mtp: bool,
    frac: float | None,
    isl: int | None = None,
) -> Pool:
    """One instance of a pool as the search prices it: the same `make_pool` scenario resolution
    uses, with the engine profile's runtime options and the candidate's KV memory fraction (None: the
    engine's default for this layout and role, as resolution gives a scenario that states none)."""
    m, hw = get_model(model), get_hardware(hardware)
    spec = MTPConfig(draft_tokens=MTP_DRAFTS, accepted_tokens=mtp_acceptance(MTP_DRAFTS)) if mtp else None
    stated: dict[str, object] = {} if frac is None else {"mem_fraction": frac}
    return make_pool(engine, role, 1, par, m, hw, prec, spec, stated, isl=isl)


def deployment(q: Question, c: Candidate, n_decode: int = 1, n_prefill: int = 1) -> Deployment:
    """The candidate as a Deployment with the given instance counts."""
    args = (q.model, q.hardware, q.engine)
    if c.prefill is None:
        agg = pool(*args, "aggregated", c.decode, c.precision, c.mtp, c.mem_fraction, q.longest_prompt())
        return Deployment(q.engine, (replace(agg, instances=n_decode),))
    pre = pool(*args, "prefill", c.prefill, c.precision, False, c.mem_fraction, q.longest_prompt())
    dec = pool(*args, "decode", c.decode, c.precision, c.mtp, c.mem_fraction, q.longest_prompt())
    return Deployment(q.engine, (replace(pre, instances=n_prefill), replace(dec, instances=n_decode)))


def even_experts(experts: int, par: Parallelism, replicas: int) -> bool:
    """Whether `par`'s EP ranks hold the expert copies evenly: the model's experts plus the replicas the
    engine places there (`planner.engines.expert_replicas`, from its wide-EP `replicas`). SGLang's EPLB
    places num_physical_experts / ep_size on each rank (and asserts the division); without replicas
    the engines' EP gives each rank num_experts / ep_size. (EP 24, 48, 72 and 144 were searched for
    every model: Mixtral's 8 experts and 32 replicas over 24 ranks, Qwen3-235B's 160 copies over 48.)
    vLLM also runs uneven splits; the search keeps to even ones."""
    return (experts + expert_replicas(replicas, par)) % par.ep == 0


def layouts(m: ModelSpec, hw: HardwareSpec, budget: int, role: str, replicas: int = 0) -> list[Parallelism]:
    """The layouts searched for `role` within `budget` GPUs; `replicas`: the engine's wide-EP expert
    replicas (`even_experts`)."""
    node = min(hw.gpus_per_node * 2, 8) if hw.scaleup.domain_gpus > 1 else hw.gpus_per_node
    out: list[Parallelism] = []
    tps = [g for g in (1, 2, 4, 8) if g <= min(budget, node)]
    if m.moe is None:
        for tp in tps:
            out.append(lay(tp, tp=tp))
            if 2 * tp <= budget and tp >= 4:
                out.append(lay(2 * tp, tp=tp, pp=2))
        return [p for p in out if hw.one_node(p.gpus)]
    experts = m.moe.num_experts

    def split(par: Parallelism, tp: int) -> Parallelism:  # experts over the group where they divide evenly,
        return par if even_experts(experts, par, replicas) else lay(par.gpus, tp=tp, pp=par.pp)  # else TP experts

    for g in tps:
        out.append(split(lay(g, tp=g, ep=g), g))
    cap = 16 if role == "prefill" else budget
    for g in (2, 4, 8, *WIDE_EP):
        if 2 <= g <= min(budget, cap) and even_experts(experts, par := lay(g, dp=g, ep=g), replicas):
            out.append(par)
    for g in (4, 8):  # pipeline over two groups where one group cannot hold the model
        if 2 * g <= budget:
            out.append(split(lay(2 * g, tp=g, ep=g, pp=2), g))
    # no wider than a node where no network joins nodes (InstanceSpec's rule: a PCIe-only server)
    return sorted({p for p in out if hw.one_node(p.gpus)}, key=lambda p: (p.gpus, p.pp, p.dp_attention))


def matches(par: Parallelism, stated: dict[str, int]) -> bool:
    """Does `par` agree with every stated layout field (`instances` is not a layout field)?"""
    names = {"gpus_per_instance": par.gpus, "tp": par.tp, "dp_attention": par.dp_attention, "ep": par.ep, "pp": par.pp}
    return all(names[k] == v for k, v in stated.items() if k in names)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _splits(m: ModelSpec, hw: HardwareSpec, g: int, stated: dict[str, int], replicas: int = 0) -> list[Parallelism]:
    """Every layout of `g` GPUs matching `stated`. Unstated fields take what engines run: PP 1, TP
    within the NVLink domain, EP over all GPUs of a stage or none (expert TP), EP splitting the experts,
    or their copies with the engine's replicas, evenly (`even_experts`); a stated field is taken as
    stated (TP 12 of a 128-head model, EP 12 of 256 experts)."""
    out: list[Parallelism] = []
    for pp in [stated["pp"]] if "pp" in stated else [1]:
        if g % pp:
            continue
        stage = g // pp
        if "tp" in stated or "dp_attention" in stated:
            tps = [t for t in _divisors(stage) if "tp" in stated or t <= hw.scaleup.domain_gpus]
        else:  # attention all TP (within the NVLink domain) or all DP, as engines launch them
            tps = [t for t in {1, stage} if t <= hw.scaleup.domain_gpus]
        for tp in tps:
            experts = m.moe.num_experts if m.moe else 1
            eps = [stated["ep"]] if "ep" in stated else sorted({stage, 1})
            for ep in eps if m.moe else [1]:
                try:
                    par = lay(g, tp=tp, dp=stage // tp, ep=ep, pp=pp)
                except ValidationError:
                    continue
                # an anchor's stated redundant experts may make another split even (Kimi-K2's 384 + 96 over 96)
                even = experts % ep == 0 or even_experts(experts, par, replicas)
                if matches(par, stated) and ep <= experts and ("ep" in stated or not m.moe or even):
                    out.append(par)
    return out


def stated_layouts(
    m: ModelSpec, hw: HardwareSpec, budget: int, role: str, stated: dict[str, int], replicas: int = 0
) -> list[Parallelism]:
    """Layouts of `role` that match what is stated: the space's own, and every split of the stated
    GPUs (or of each instance size the space has) that the model allows."""
    own = layouts(m, hw, budget, role, replicas)
    sizes = [stated["gpus_per_instance"]] if "gpus_per_instance" in stated else sorted({p.gpus for p in own})
    found = {p for p in own if matches(p, stated)} | {p for g in sizes for p in _splits(m, hw, g, stated, replicas)}
    return sorted(found, key=lambda p: (p.gpus, p.pp, p.dp_attention, p.tp, p.ep))


def precisions(m: ModelSpec, hw: HardwareSpec, engine: str = "other") -> list[PrecisionMix]:
    """The precision mixes the search tries on this hardware (NVFP4 experts only on Blackwell; a published
    MXFP4 or INT4 (w4a16) checkpoint's own experts wherever they run, `planner.model.defaults.checkpoint_formats`). A
    dense MLA model's FP8 KV cache comes with the attention math `engine` runs over it
    (`planner.model.defaults.fp8_cache_attention`); a sparse-attention model runs its FP8 cache with the
    math its kernels set (one mix, not two that price the same); GQA models pair an FP8 cache with FP8
    attention math."""
    sparse = m.sparse_attention
    fp8_att = fp8_cache_attention(engine, m, hw)
    kv = [(fp8_att, "fp8")] if sparse else [("bf16", "bf16"), (fp8_att, "fp8")]  # sparse kernels read FP8 KV
    dense_ck, moe_ck = checkpoint_formats(m)
    dense = [dense_ck] if dense_ck == "fp8" else ["bf16", "fp8"]
    experts = {"fp8"} if m.moe else {dense[0]}
    if m.moe and hw.is_blackwell and hw.peak_tflops.fp4:
        experts.add("nvfp4")
    if m.moe and moe_ck in ("mxfp4", "w4a16"):  # the published 4-bit experts (gpt-oss, Kimi K2.5), wherever they run
        experts.add(moe_ck)
    return [
        PrecisionMix.model_validate({"attention": a, "kv_cache": k, "dense": d, "moe": e})
        for a, k in kv
        for d in dense
        for e in sorted(experts)
    ]


def candidates(
    q: Question,
    m: ModelSpec,
    hw: HardwareSpec,
    mixes: list[PrecisionMix] | None = None,
    stated: dict[str, dict[str, int]] | None = None,
) -> tuple[list[Candidate], Counter[str]]:
    """All candidates whose instances fit in memory, and the count of pruned ones by reason;
    `mixes` replaces the space's precision mixes, `stated` (per role) restricts the layouts."""
    pruned: Counter[str] = Counter()
    fits: dict[tuple[Parallelism, PrecisionMix, bool, float | None, str], bool] = {}

    def ok(par: Parallelism, prec: PrecisionMix, mtp: bool, frac: float | None, role: str) -> bool:
        key = (par, prec, mtp, frac, role)
        if key not in fits:
            try:
                p = pool(q.model, q.hardware, q.engine, role, par, prec, mtp, frac, q.longest_prompt())
                need = kv_needed_tokens(p.instance, role, q.isl + q.osl)  # as the simulator's PoolDef
                fits[key] = memory(p, need).max_seqs(q.isl + q.osl) >= 1
                if not fits[key]:
                    pruned["KV pool holds no sequence"] += 1
            except (PlannerError, ValidationError) as exc:
                pruned[_reason(exc)] += 1
                fits[key] = False
        return fits[key]

    out: list[Candidate] = []
    replicas = wide_ep_replicas(q.engine, hw)
    mtps = [x for x in q.mtp if not x or m.mtp_layers]
    if q.osl <= 1:  # MTP drafts decode tokens: a one-token answer has none (its rows would differ in the flag only)
        mtps = [False]
    main = (stated or {}).get("aggregated", (stated or {}).get("decode", {}))
    if stated is None:
        decode_layouts = layouts(m, hw, q.budget, "decode", replicas)
        prefill_layouts = layouts(m, hw, q.budget, "prefill", replicas)
    else:
        decode_layouts = stated_layouts(m, hw, q.budget, "decode", main, replicas)
        prefill_layouts = stated_layouts(m, hw, q.budget, "prefill", stated.get("prefill", {}), replicas)
    for cand in _enumerate(q, decode_layouts, prefill_layouts, mixes or precisions(m, hw, q.engine), mtps):
        if (
            cand.decode.pp == 2
            and cand.decode.dp_attention == 1
            and "pp" not in main
            and ok(
                lay(cand.decode.gpus // 2, tp=cand.decode.tp, ep=cand.decode.ep),
                cand.precision,
                cand.mtp,
                cand.mem_fraction,
                "decode",
            )
        ):
            pruned["pipeline parallelism not needed"] += 1
            continue
        if cand.prefill and cand.decode.gpus + cand.prefill.gpus > q.budget:
            pruned["over the GPU budget"] += 1
            continue
        if cand.prefill and not hw.one_node(cand.decode.gpus + cand.prefill.gpus):  # check_hand_off's rule
            pruned[PRUNE_REASONS["NoNetworkError"]] += 1
            continue
        role = "aggregated" if cand.mode == "aggregated" else "decode"
        if not ok(cand.decode, cand.precision, cand.mtp, cand.mem_fraction, role):
            continue
        if cand.prefill and not ok(cand.prefill, cand.precision, False, cand.mem_fraction, "prefill"):
            continue
        out.append(cand)
    return out, pruned


def _reason(exc: Exception) -> str:
    """A pruning reason: the error's kind (memory, layout), not its numbers."""
    if isinstance(exc, ValidationError):
        return "layout does not fit the model"
    return PRUNE_REASONS.get(type(exc).__name__, type(exc).__name__)


# error kinds as the pruning counts name them (the plan's summary line and the dashboard)
PRUNE_REASONS = {
    "InsufficientMemoryError": "weights do not fit",
    "KVCacheCapacityError": "KV pool holds no sequence",
    "ValidationError": "layout does not fit the model",
    "NoNetworkError": "spans nodes with no network between them",
}


def _enumerate(
    q: Question, dec: list[Parallelism], pre: list[Parallelism], precs: list[PrecisionMix], mtps: list[bool]
) -> Iterator[Candidate]:
    for prec in precs:
        for frac in q.kv_mem_fractions:
            for mtp in mtps:
                for d in dec:
                    if "aggregated" in q.modes:
                        yield Candidate("aggregated", d, None, prec, mtp, frac)
                    if "disaggregated" in q.modes:
                        for p in pre:
                            if p.pp == 1:
                                yield Candidate("disaggregated", d, p, prec, mtp, frac)

"""What every engine's launch recipe needs from one pool: its layout split into per-instance and
per-rank limits, the nodes an instance spans, and the checkpoint it loads.

Per-instance vs per-rank: the plan's decode batch (`Recommendation.point.batch`) is sequences per
instance; an engine limit that applies per attention-DP rank gets `ceil(batch / dp)`. Which limit
is which is recorded with each flag in planner/engines/<engine>.yaml (`launch:`). This module
renders no engine's flags; planner/launch/<engine>.py do.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass

from planner.engines import LaunchTool, profile
from planner.inputs.question import Question
from planner.model.defaults import carried_dense, checkpoint_formats
from planner.model.deployment import Pool, layout_label
from planner.model.steps import step_memory
from roofline.catalog import model_ids
from roofline.memory import embedding_bytes

CHECKPOINT_HOLE = "${CHECKPOINT:?"  # a checkpoint placeholder the user must fill (Weights.missing)
OFFLOAD_GROUP = 4  # layers per offload group (see Inst.offload_groups)
PORT = 30000  # HTTP port of every server (each runs on its own node or instance)
ROUTER_PORT = 8000  # the OpenAI-compatible front door: router, disaggregation proxy or Dynamo frontend


def tool(engine: str, name: str) -> LaunchTool:
    """An engine's launch template for one program (server, router, disaggregation proxy, Dynamo)."""
    launch = profile(engine).launch
    if launch is None or name not in launch:
        raise KeyError(f"engine {engine!r} has no launch template {name!r}")
    return launch[name]


@dataclass(frozen=True, slots=True)
class Inst:
    """One pool's instance as the engines' flags see it."""

    role: str  # prefill | decode | aggregated
    instances: int
    gpus: int
    tp: int
    dp: int
    ep: int
    pp: int
    label: str
    nodes: int  # nodes one instance spans
    gpus_per_node: int  # GPUs of the instance on each of its nodes
    batch: int  # decode sequences per instance (0 for a prefill pool: the KV pool sets it)
    prefill_tokens_per_rank: int
    chunked_prefill: bool  # prompts split over steps (RuntimeOptions.chunked_prefill), as priced
    cuda_graph_max_per_rank: int
    mem_fraction: float
    redundant_experts: int
    eplb: bool  # expert-parallel load balancing (RuntimeOptions.load_balanced), as priced
    experts: int  # routed experts of the model (0: dense); with redundant ones, TRT-LLM's slots
    kv_fp8: bool
    mtp_drafts: int  # 0: no MTP
    layers: int  # the model's layers (the offloader's groups are of layers)
    offload_gb: float  # weights per GPU streamed from host each step as priced (planner.model.steps.step_memory)
    layer_weights_gb: float  # weights per GPU inside the layers (resident and offloaded; embeddings and head apart)

    @property
    def batch_per_rank(self) -> int:
        """Sequences one attention-DP rank holds: the instance's batch split over its DP ranks."""
        return math.ceil(self.batch / self.dp)

    @property
    def graph_batch_per_rank(self) -> int:
        """Decode CUDA-graph batch per rank: the rank's batch, within the profile's graph limit."""
        return max(1, min(self.batch_per_rank, self.cuda_graph_max_per_rank))

    @property
    def offload_groups(self) -> tuple[int, int] | None:
        """(group size, layers offloaded per group) for a layer-group prefetch offloader (SGLang's and
        vLLM's `--offload-group-size` / `--offload-num-in-group`: the last k of every g layers live in
        host memory and are prefetched a layer ahead): the smallest k whose offloaded layers hold at
        least the priced bytes (`host_gb`); None when nothing is offloaded. Groups of OFFLOAD_GROUP
        layers spread the offloaded layers so each prefetch overlaps resident layers' compute."""
        if self.offload_gb <= 0 or self.layer_weights_gb <= 0:
            return None
        g = min(OFFLOAD_GROUP, self.layers)
        k = next((k for k in range(1, g + 1) if self.host_gb(g, k) >= self.offload_gb), g)
        return g, k

    def host_gb(self, g: int, k: int) -> float:
        """Weights per GPU the offloader holds in host memory with groups of g layers, the last k of each
        offloaded (layers i with i % g >= g - k; embeddings and head stay resident), layers of equal size."""
        n = (self.layers // g) * k + max(0, self.layers % g - (g - k))
        return n / self.layers * self.layer_weights_gb

    @property
    def wide_ep(self) -> bool:
        return self.ep > 1 and self.dp > 1

    @property
    def head(self) -> str:
        span = f", {self.nodes} nodes x {self.gpus_per_node} GPUs" if self.nodes > 1 else ""
        return f"# {self.role}: {self.instances} instance(s) of {self.gpus} GPU(s){span}, {self.label}"


def inst(pool: Pool, batch: int, isl: int) -> Inst:
    par, spec = pool.parallel, pool.instance
    mem = step_memory(pool, isl)
    gpn = spec.hardware.gpus_per_node
    nodes = math.ceil(par.gpus / gpn)
    rt = spec.runtime
    return Inst(
        role=pool.role,
        instances=pool.instances,
        gpus=par.gpus,
        tp=par.tp,
        dp=par.dp_attention,
        ep=par.ep,
        pp=par.pp,
        label=layout_label(par),
        nodes=nodes,
        gpus_per_node=min(par.gpus, gpn),
        batch=batch if pool.role != "prefill" else 0,
        prefill_tokens_per_rank=rt.prefill_tokens_per_rank,
        chunked_prefill=rt.chunked_prefill,
        cuda_graph_max_per_rank=rt.cuda_graph_max_batch_per_rank,
        mem_fraction=rt.mem_fraction,
        redundant_experts=rt.redundant_experts,
        eplb=par.ep > 1 and rt.load_balanced,
        experts=spec.model.moe.num_experts if spec.model.moe is not None else 0,
        kv_fp8=spec.precision.kv_cache == "fp8",
        mtp_drafts=spec.mtp.draft_tokens if spec.mtp is not None else 0,
        layers=spec.model.num_layers,
        offload_gb=mem.offloaded_bytes / 1e9,
        layer_weights_gb=(mem.weights_bytes + mem.offloaded_bytes - embedding_bytes(spec)) / 1e9,
    )


def offload_note(i: Inst, engine: str) -> str:
    """The comment a pool's command carries when it holds weights in host memory."""
    groups = i.offload_groups
    assert groups is not None
    g, k = groups
    return (
        f"# {i.role}: {i.offload_gb:.1f} GB of weights per GPU stream from host memory each step as priced; "
        f"{engine}'s prefetch offloader holds the last {k} of every {g} layers there (about {i.host_gb(g, k):.1f} "
        f"of the layers' {i.layer_weights_gb:.1f} GB)\n"
    )


def cannot_offload(engine: str, pools: list[Inst]) -> str | None:
    """Why `engine` cannot launch pools that hold weights in host memory (its profile's host_offload
    is false), or None."""
    off = [i for i in pools if i.offload_groups is not None]
    if not off or profile(engine).host_offload.value:
        return None
    what = ", ".join(f"{i.role} {i.offload_gb:.1f} GB/GPU" for i in off)
    return (
        f"# not launchable on {engine}: the plan streams weights from host memory ({what}), which {engine} "
        f"does not do ({profile(engine).host_offload.source}); run it on an engine that offloads with prefetch\n"
    )


@dataclass(frozen=True, slots=True)
class Weights:
    """The checkpoint a pool loads and how its format relates to the plan's precision."""

    path: str  # HF repo id, a user-given path, or a ${CHECKPOINT:?...} placeholder
    fmt: str  # weight format the plan runs: bf16 | fp8 | nvfp4 | mxfp4 (a MoE model's: its experts')
    online_fp8: bool  # BF16 weights quantized to FP8 at load (SGLang/vLLM --quantization fp8)
    note: str  # one comment line saying where the checkpoint comes from
    need: str = ""  # the weights a missing checkpoint must hold, in words (`fmt` when empty)
    own: bool = False  # a config.json model's own checkpoint (its precision): only its repo id is unknown

    @property
    def missing(self) -> bool:
        """No checkpoint is known for the format: `path` is the placeholder that stops the shell."""
        return self.path.startswith(CHECKPOINT_HOLE)


def weights(q: Question, pool: Pool) -> Weights:
    """The checkpoint for the pool's precision: `--checkpoint` if given, else the catalog's repo
    id for the format the plan runs (a MoE model's: its experts', where that checkpoint's dense layers
    are in the plan's dense format too, `carried_dense`), else BF16 weights with online FP8 when the
    plan runs every layer in FP8 (online quantization takes dense layers and experts alike), else a
    placeholder that stops the shell with the field to fill."""
    m, p = pool.instance.model, pool.instance.precision
    fmt = p.moe if m.moe is not None else p.dense
    ck = m.checkpoints
    repo = getattr(ck, fmt, None) if ck is not None else None  # formats with no field (w4a16): none
    carried = carried_dense(m, fmt) if m.moe is not None else p.dense
    need = fmt if carried == p.dense else f"{p.dense} dense layers, {fmt} experts"
    if q.checkpoint:
        formats = checkpoint_formats(m)
        config = q.model not in model_ids()  # a config.json's --checkpoint is its own release (a catalog model's: any)
        online = config and fmt == "fp8" and p.dense == "fp8" and formats == ("bf16", "bf16")
        if not config or (p.dense, fmt) == formats or online:
            said = "(BF16) quantized to FP8 at load" if online else f"must hold {fmt} weights"
            return Weights(q.checkpoint, fmt, online, f"# weights: {q.checkpoint} (--checkpoint); {said}")
        # a config.json's --checkpoint is its own release, in the config's formats: a row in others cannot load it
        # (trial, twenty-first session: gpt-oss-20b's MXFP4 checkpoint given, an NVFP4 row read 'needs' nothing)
        held = f"{formats[0]} dense layers, {formats[1]} experts" if m.moe is not None else f"{formats[0]} weights"
        where = f"--checkpoint {q.checkpoint} holds {held} (its config.json)"
        hole = CHECKPOINT_HOLE + where + "}"
        return Weights(hole, fmt, False, f"# weights: set CHECKPOINT ({where})", need)
    if repo and carried == p.dense:
        return Weights(repo, fmt, False, f"# weights: {repo} ({fmt}; catalog {m.id}.yaml checkpoints)")
    if fmt == "fp8" and p.dense == "fp8" and ck is not None and ck.bf16:
        return Weights(ck.bf16, fmt, True, f"# weights: {ck.bf16} (BF16) quantized to FP8 at load")
    other = f" ({repo} has {carried} dense layers)" if repo else ""
    where = (
        "the model is a HF config.json: pass planner plan --checkpoint REPO_ID"
        if q.model not in model_ids()
        else f"no checkpoint of {m.id} with {need} in the catalog{other}: export CHECKPOINT or pass --checkpoint"
    )
    hole = CHECKPOINT_HOLE + where + "}"
    own = q.model not in model_ids() and (p.dense, fmt) == checkpoint_formats(m)
    return Weights(hole, fmt, False, f"# weights: set CHECKPOINT ({where})", need, own)


def sh(value: object) -> str:
    """One shell word: values with ${...} or $((...)) in double quotes so they expand."""
    text = str(value)
    if "$" in text:
        assert '"' not in text, text
        assert "`" not in text, text
        return f'"{text}"'
    return shlex.quote(text)


def render(words: list[tuple[str, ...]]) -> str:
    """A command as lines of `flag value` pairs joined by backslash-newlines."""
    lines = [" ".join(w if i == 0 and not w.startswith("$") else sh(w) for i, w in enumerate(ws)) for ws in words]
    return " \\\n  ".join(lines)


def node_rank(nodes: int) -> str:
    return "${NODE_RANK:?0 on the first node of the instance, 1.." + str(nodes - 1) + " on the others}"


HEAD_IP = "${HEAD_NODE_IP:?address of the first node of the instance}"


def host_var(role: str, i: int) -> str:
    """The address of instance `i` of a role (its first node), filled in by the user."""
    return "${" + f"{role.upper()}_{i}_HOST:?address of {role} instance {i}" + "}"

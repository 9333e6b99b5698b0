"""Launch recipes parse with the engines' own flag lists, and carry the plan's per-rank limits,
multi-node arguments, disaggregation setup and checkpoints.

Every printed command is split and parsed with a parser rebuilt from the flag list dumped from
the pinned engine version (planner/engines/flags/): SGLang 0.5.23 ServerArgs, sglang-router
0.3.2, vLLM 0.33.0 `vllm serve`, TRT-LLM option names from its source, srun, Dynamo 1.6.1.
"""

from __future__ import annotations

import math
import random
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from planner.engines import ENGINES as PROFILES
from planner.engines import profile
from planner.inputs.question import Question
from planner.inputs.scenario import load_scenario
from planner.launch import ENGINES, launch_commands, requirements
from planner.launch.check import SAMPLES, flag_file, option_names, problems, split
from planner.launch.common import inst
from planner.model.defaults import resolve
from planner.model.deployment import Deployment, make_pool
from planner.model.estimator import estimate, max_batch
from planner.model.steps import decode_capacity
from planner.search.plan import plan
from roofline.catalog import get_hardware, get_model, hardware_ids, model_ids
from roofline.deployment import Parallelism
from roofline.precision import PrecisionMix

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))
FILE_KEY = {
    "sglang-0.5.23.json": "sglang",
    "sglang-router-0.3.2.json": "router",
    "vllm-0.33.0.json": "vllm",
    "trtllm-source-snapshot.json": "trtllm",
    "slurm-srun.json": "srun",
}


def assert_parses(out: dict[str, str]) -> None:
    for engine, text in out.items():
        found = problems(text)
        assert not found, f"{engine}:\n" + "\n".join(found)
        assert split(text)[0], f"{engine}: no command printed"


@pytest.fixture(scope="module")
def default_plan(default_scored):
    return default_scored


def test_every_template_flag_is_in_its_pinned_flag_list():
    """A template flag the pinned engine version does not define could never parse."""
    for engine in PROFILES:
        for name, t in (profile(engine).launch or {}).items():
            if t.flags_file.startswith("dynamo"):
                known = set(flag_file("dynamo")["workers"][engine]) | option_names(
                    {"sglang": "sglang", "vllm": "vllm"}.get(engine, "trtllm")
                )
            else:
                key = FILE_KEY[t.flags_file]
                known = option_names(key)
                if key == "trtllm":
                    known |= set(flag_file("trtllm")["yaml"]["llm_api_options"]["fields"])
                    known |= {o for f in flag_file("trtllm")["subcommands"]["disaggregated"] for o in f["options"]}
            for role, f in t.flags.items():
                assert f.flag in known, f"{engine}.{name}.{role}: {f.flag} not in {t.flags_file}"
                assert f.source


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_launch_command_parses(path):
    s = load_scenario(path)
    res = resolve(s, path.parent)
    dep = res.deployment
    batch = estimate(res).decode_batch or max_batch(dep, res.isl, res.osl)
    q = Question(model=s.model, hardware=s.hardware, engine=dep.engine, max_gpus=dep.gpus)
    r = SimpleNamespace(deployment=dep, point=SimpleNamespace(batch=max(1, math.ceil(batch))))
    out = launch_commands(q, r)  # type: ignore[arg-type]
    assert set(ENGINES) <= set(out)
    assert ("dynamo" in out) == (dep.mode == "disaggregated")
    assert_parses(out)


def test_default_plan_launch_commands_parse(default_plan_cli):
    """`planner plan` with no arguments: the launch commands it prints for its top answers."""
    recs = default_plan_cli[0]["recommendations"]
    launches = [r["launch"] for r in recs if r["launch"] is not None]
    assert launches
    for out in launches:
        assert set(ENGINES) <= set(out)
        assert_parses(out)


def _random_questions(n: int, seed: int) -> list[Question]:
    rng = random.Random(seed)
    return [
        Question(
            model=rng.choice(model_ids()),
            hardware=rng.choice(hardware_ids()),
            max_gpus=rng.choice([4, 8, 16, 32, 72]),
            engine=rng.choice(ENGINES),
            isl=rng.choice([1000, 2000, 8000]),
            osl=rng.choice([200, 1000]),
            verify_top=0,
        )
        for _ in range(n)
    ]


def assert_loads_a_real_checkpoint(q: Question, text: str) -> None:
    """The model is an org/name repo id (or the placeholder asking for one), and ModelOpt FP4
    quantization is only asked of an NVFP4 checkpoint."""
    ck = get_model(q.model).checkpoints
    for argv in split(text)[0]:
        if argv[:3] != ["python", "-m", "sglang.launch_server"]:
            continue
        model = argv[argv.index("--model-path") + 1]
        assert "/" in model, model
        if "modelopt_fp4" in argv:
            assert model in (ck.nvfp4 if ck else None, SAMPLES["CHECKPOINT"]), model


def _random_plans_parse(n: int, seed: int) -> int:
    """`n` seeded random questions; every engine's commands for each top answer parse. Returns how
    many questions had an answer."""
    answered = 0
    for q in _random_questions(n, seed=seed):
        a = plan(q, workers=1)
        if not a.recommendations:
            continue
        out = launch_commands(q, a.recommendations[0])
        assert_parses(out)
        assert_loads_a_real_checkpoint(q, out["sglang"])
        answered += 1
    return answered


def test_random_plans_parse_for_every_engine():
    """The quick profile: 8 seeded random questions (the default suite's time; `-m fuzz` runs 20)."""
    assert _random_plans_parse(8, seed=16) >= 6


@pytest.mark.fuzz
def test_twenty_random_plans_parse_for_every_engine():
    """20 seeded random questions (the long profile, `pytest -m fuzz`)."""
    assert _random_plans_parse(20, seed=16) >= 15


@pytest.mark.parametrize(
    ("engine", "old", "new"),
    [
        ("sglang", "--cuda-graph-max-bs-decode", "--cuda-graph-max-bs"),  # a flag 0.5.23 does not have
        ("sglang", "--attn-dp-size {n}", "--dp-size {n} --enable-dp-attention"),  # deprecated in 0.5.23
        ("sglang", "fp8_e4m3", "fp8"),  # not a --kv-cache-dtype choice
        ("sglang", "--nnodes {n}", "--nnodes eight"),  # not an int
        ("vllm", '"kv_role"', '"role"'),  # not a KVTransferConfig field
        ("vllm", "--kv-cache-dtype fp8", "--kv-cache-dtype fp9"),  # not a CacheDType
        ("trtllm", "free_gpu_memory_fraction", "free_gpu_mem_fraction"),  # not a KvCacheConfig field
        ("trtllm", "backend: NIXL", "backend: nixl"),  # not a CacheTransceiverConfig backend
        ("trtllm", "num_instances: {n}", "num_instances: {m}"),  # urls do not match
        ("dynamo", "- --max-running-requests", "- --max-requests"),  # not an SGLang flag
    ],
)
def test_a_flag_the_parser_rejects_is_reported(default_plan, engine, old, new):
    """The check can fail: each edit makes one printed command invalid for its engine (on the plan's
    first disaggregated deployment, whose commands carry every engine's disaggregation setup)."""
    q, a = default_plan
    r = next(r for r in a.recommendations if r.deployment.mode == "disaggregated")
    text = launch_commands(q, r)[engine]
    if "{n}" in old:  # the layout's own number, whatever that deployment is
        n = re.findall(rf"{re.escape(old.split(' {n}')[0])} (\d+)", text)[0]
        old, new = old.format(n=n), new.format(n=n, m=int(n) + 1)
    assert old in text
    assert problems(text) == []
    assert problems(text.replace(old, new, 1))


def _flag(text: str, flag: str) -> list[str]:
    return re.findall(rf"{re.escape(flag)} (\S+)", text)


def test_limits_are_per_instance_or_per_rank_as_each_engine_reads_them(default_plan):
    q, a = default_plan
    r = a.recommendations[0]
    dec = r.deployment.first("decode") or r.deployment.first("aggregated")
    dp, batch = dec.parallel.dp_attention, decode_capacity(dec, q.in_flight_kv())  # what was simulated
    assert dp > 1
    assert batch > r.point.batch  # the pool admits more than the operating batch
    per_rank = math.ceil(batch / dp)
    out = launch_commands(q, r)
    assert _flag(out["sglang"], "--max-running-requests") == [str(batch)]  # per instance
    assert _flag(out["sglang"], "--cuda-graph-max-bs-decode") == [str(min(per_rank, 512))]
    assert set(_flag(out["vllm"], "--max-num-seqs")) == {str(per_rank)}  # per DP rank
    gen = split(out["trtllm"])[1]
    decode_yaml = next(v for k, v in gen.items() if k in ("gen.yaml", "agg.yaml"))
    assert f"max_batch_size: {per_rank}" in decode_yaml  # per rank with attention DP


def test_an_instance_larger_than_a_node_gets_per_node_commands(default_plan):
    q, a = default_plan
    r = next(r for r in a.recommendations if max(p.gpus_per_instance for p in r.deployment.pools) > 4)
    big = max(r.deployment.pools, key=lambda p: p.gpus_per_instance)
    nodes = math.ceil(big.gpus_per_instance / 4)  # GB200: 4 GPUs per node
    out = launch_commands(q, r)
    assert f"--nnodes {nodes}" in out["sglang"]
    assert "--node-rank" in out["sglang"]
    assert "--dist-init-addr" in out["sglang"]
    assert "--headless" in out["vllm"]
    assert "--data-parallel-address" in out["vllm"]
    assert f"srun -N {nodes} --ntasks-per-node 4" in out["trtllm"]
    assert "trtllm-llmapi-launch trtllm-serve" in out["trtllm"]


def test_disaggregated_plans_get_each_engines_disaggregation_setup(default_plan):
    q, a = default_plan
    r = next(r for r in a.recommendations if r.deployment.mode == "disaggregated")
    out = launch_commands(q, r)
    assert "--disaggregation-bootstrap-port" in out["sglang"]
    assert "sglang_router.launch_router" in out["sglang"]
    assert "--pd-disaggregation" in out["sglang"]
    assert "NixlConnector" in out["vllm"]
    assert "trtllm-serve disaggregated" in out["trtllm"]
    assert "cache_transceiver_config" in out["trtllm"]
    dgd = split(out["dynamo"])[1]["dynamo.yaml"]
    assert "kind: DynamoGraphDeployment" in dgd
    assert "subComponentType: prefill" in dgd
    assert "subComponentType: decode" in dgd


def _kimi_disagg(engine: str) -> tuple[Question, SimpleNamespace]:
    """Kimi K2 NVFP4 on GB200: a DP2 EP2 prefill pool holds about 300 GB of weights per GPU, more than
    a 186 GB GPU, so (as `planner plan` ranked it first for a 16-GPU question) the priced prefill
    streams the rest from host memory over NVLink-C2C each step."""
    m, hw = get_model("kimi-k2"), get_hardware("gb200-nvl72")
    prec = PrecisionMix(attention="fp8", kv_cache="fp8", dense="fp8", moe="nvfp4")
    pre = make_pool(engine, "prefill", 1, Parallelism(gpus=2, dp_attention=2, ep=2), m, hw, prec, None, isl=4000)
    dec = make_pool(engine, "decode", 1, Parallelism(gpus=8, dp_attention=8, ep=8), m, hw, prec, None, isl=4000)
    q = Question(model="kimi-k2", hardware="gb200-nvl72", max_gpus=16, isl=4000, osl=1000, engine=engine)
    return q, SimpleNamespace(deployment=Deployment(engine, (pre, dec)), point=SimpleNamespace(batch=64))


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_a_pool_that_streams_weights_from_host_launches_with_the_prefetch_offloader(engine):
    """The launch holds at least the priced share of the weights in host memory with the engine's layer-group
    prefetch offloader; an engine that cannot offload (TRT-LLM) prints why instead of a server that would
    run out of memory; the recommendation's record says what the launch needs."""
    from planner.model.steps import step_memory

    q, r = _kimi_disagg(engine)
    pre = r.deployment.first("prefill")
    mem = step_memory(pre, q.isl)
    share = mem.offloaded_bytes / (mem.weights_bytes + mem.offloaded_bytes)
    assert 0.2 < share < 0.8
    out = launch_commands(q, r)  # type: ignore[arg-type]
    flags = dict(re.findall(r"--(offload-group-size|offload-num-in-group) (\d+)", out[engine]))
    g, k = int(flags["offload-group-size"]), int(flags["offload-num-in-group"])
    i = inst(pre, 0, q.isl)
    assert i.host_gb(g, k) >= mem.offloaded_bytes / 1e9  # the offloaded layers hold the priced bytes
    assert k == 1 or i.host_gb(g, k - 1) < mem.offloaded_bytes / 1e9  # and no layer more than that needs
    assert out[engine].count("--offload-group-size") == 1  # the prefill pool only: decode holds its weights
    assert "--offload-backend prefetch" in out["vllm"] or engine == "sglang"
    assert "not launchable on trtllm" in out["trtllm"]
    assert "trtllm-serve" not in out["trtllm"]
    assert_parses({k: v for k, v in out.items() if k != "trtllm"})
    needs = requirements(q, r.deployment)  # type: ignore[arg-type]
    assert any(n.startswith("prefill weights") and "on host" in n for n in needs), needs


def test_trtllm_plans_never_hold_weights_on_host():
    """TRT-LLM's profile says it does not offload, so the same prefill pool on TRT-LLM does not fit."""
    from planner.model.steps import step_memory
    from roofline.errors import InsufficientMemoryError

    q, r = _kimi_disagg("trtllm")
    with pytest.raises(InsufficientMemoryError, match="offload is off"):
        step_memory(r.deployment.first("prefill"), q.isl)
    assert profile("trtllm").host_offload.value is False
    assert profile("sglang").host_offload.value is True


def test_the_engine_the_plan_priced_prints_first():
    q, r = _kimi_disagg("vllm")
    assert next(iter(launch_commands(q, r))) == "vllm"  # type: ignore[arg-type]
    q, r = _kimi_disagg("sglang")
    assert next(iter(launch_commands(q, r))) == "sglang"  # type: ignore[arg-type]


def test_the_plan_says_which_load_its_first_row_meets():
    """New-user trial: the launch commands admit the engine's running limit (1,433 for a row planned
    at batch 56) with nothing saying the row holds only at its own load."""
    from planner.inputs.question import build_question
    from planner.report.plan_notes import load_note
    from planner.search.plan import plan

    q = build_question(
        {"model": "llama-3.1-8b", "hardware": "h100-sxm", "gpus": 1, "concurrency": 256, "verify_top": 0}
    )
    ans = plan(q, workers=None)
    note = load_note(q, ans.recommendations[0])
    assert note.startswith("#1's figures are for 256 requests in flight")
    assert "--max-running-requests" in note
    # a light row (8 of the ~900 sequences one H100 holds): capping it at its batch would queue requests it has
    # room for (twentieth trial), so the note says it is light instead
    q = q.model_copy(update={"concurrency": 8})
    note = load_note(q, plan(q, workers=None).recommendations[0])
    assert note.startswith("#1's figures are for 8 requests in flight, well within what it holds")
    assert "--max-running-requests" not in note

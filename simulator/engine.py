"""Wires a deployment into a SimPy environment and runs a workload through it.

`simulate(pools, workload, cfg)` builds the instances of each pool (prefill, decode or
aggregated), a router, the arrival process (open loop from arrival times, or closed loop that
issues a new request when one finishes), and the KV-transfer hop between prefill and decode.
It returns the per-request table and the per-step log; `simulator.metrics` summarises them.
The same seed gives the same result. A deployment may have a decode pool only (prompts arrive
prefilled, as in a decode benchmark) or a prefill pool only (each request ends at its first
token). A run stops with `SimulationError` after `cfg.max_steps` forward steps, or when no
request completes; every request ends finished or dropped with its reason.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simpy

from roofline.comm import kv_transfer_time
from roofline.deployment import InstanceSpec
from roofline.errors import InsufficientMemoryError, PlannerError
from roofline.memory import MemoryPlan, kv_needed_tokens, plan_memory
from simulator.aggregated_instance import AggregatedInstance
from simulator.config import SimConfig
from simulator.decode_instance import DecodeInstance
from simulator.handoff import Handoff
from simulator.instances import Instance, PrefillInstance
from simulator.mtp import DraftSampler
from simulator.request import RequestTable
from simulator.router import Router
from simulator.stepfn import StepTimer
from simulator.workload import Workload


class SimulationError(PlannerError):
    """A run that stopped at its step budget, or in which no request could complete."""


@dataclass(frozen=True, slots=True)
class PoolDef:
    role: str  # prefill | decode | aggregated
    instances: int
    inst: InstanceSpec
    budget_tokens: int  # prefill tokens per step for the whole instance
    seq_tokens: float = 0.0  # prompt + output of the workload's requests (the KV one sequence needs)

    def memory_plan(self) -> MemoryPlan:
        """The memory plan each instance of this pool runs with: the KV `roofline.memory.kv_needed_tokens`
        asks of its role (as the plan's fit check and the estimate) must fit beside the weights."""
        need = kv_needed_tokens(self.inst, self.role, self.seq_tokens)
        try:
            return plan_memory(self.inst, need)
        except InsufficientMemoryError:
            if self.role == "prefill":
                raise
            # no room for one sequence: each request is dropped with that reason (instances.NEVER_FITS)
            return plan_memory(self.inst)


@dataclass(slots=True)
class SimResult:
    table: RequestTable
    steps: np.ndarray  # columns: end time, instance uid, batch, output tokens, input tokens, kv fraction, queue
    instances: list[tuple[str, int]]  # (role, pool index) per uid
    window: tuple[float, float]
    gpus: int
    wall_time_s: float
    model_calls: int
    extra: dict[str, Any] = field(default_factory=dict)


class Context(Handoff):
    """Shared state of one run: environment, request table, router; the hand-offs between pools are
    `simulator.handoff.Handoff`'s."""

    def __init__(self, pools: list[PoolDef], wl: Workload, cfg: SimConfig, same_domain: bool) -> None:
        self.env = simpy.Environment()
        self.cfg = cfg
        self.rng = np.random.default_rng(cfg.seed + 1)
        self.table = RequestTable(wl.isl, wl.osl)
        self.hash_ids = wl.hash_ids
        self.warm = wl.warm  # requests 0..warm-1 are a warm start: their prompts' KV was computed before 0 s
        self.log: list[tuple[float, int, int, float, int, float, int]] = []
        self.log_blocks: list[np.ndarray] = []  # runs of decode steps (record_run), rows as `log`'s
        self.out_blocks: list[np.ndarray] = []  # their (time, tokens), as `out_tokens`
        self.logged = 0  # rows in log_blocks
        self.out_tokens: list[tuple[float, float]] = []
        self.instances: list[Instance] = []
        self.by_role: dict[str, list[Instance]] = {"prefill": [], "decode": [], "aggregated": []}
        self.samplers: dict[int, DraftSampler] = {}
        self.on_finish: Callable[[int], None] = lambda i: None
        self.transfer_s: Callable[[int], float] = lambda i: 0.0
        self.prefill_at: dict[int, DecodeInstance] = {}
        dec_pool = next((p for p in pools if p.role == "decode"), None)
        self.handoff = dec_pool.inst.runtime.disagg_kv_handoff if dec_pool else "push"
        for p_idx, p in enumerate(pools):
            self._build_pool(p_idx, p, same_domain)
        # the serving path sits before the pool a request enters; a decode-only run takes prompts prefilled
        entry = next((p for r in ("prefill", "aggregated") for p in pools if p.role == r), None)
        self.request_overhead_s = entry.inst.runtime.request_overhead_s if entry else 0.0
        # an engine refuses a request longer than the model's window (a trace row of 200,000 tokens against
        # Llama-3.1-8B's 131,072 was served, unsaid: sixteenth trial)
        self.context_window = pools[0].inst.model.context_window if pools else None
        self.router = Router(cfg.router, self.by_role, np.random.default_rng([cfg.seed, 3]))
        self.notes: list[str] = list(wl.notes)
        self.decode_only = not self.router.front
        if not self.by_role["decode"] and not self.by_role["aggregated"]:
            self.table.osl[:] = 1
            self.notes.append("prefill pool only: each request ends at its first token")
        if self.decode_only:
            self.notes.append("decode pool only: prompts arrive prefilled (their first token at arrival)")

    def _build_pool(self, p_idx: int, p: PoolDef, same_domain: bool) -> None:
        cls = {"prefill": PrefillInstance, "decode": DecodeInstance, "aggregated": AggregatedInstance}[p.role]
        plan = p.memory_plan()
        dp = p.inst.parallel.dp_attention
        capacity = plan.kv_pool_bytes / plan.kv_bytes_per_token * dp if plan.kv_bytes_per_token else math.inf
        window = plan.window_bytes_per_seq / plan.kv_bytes_per_token if plan.kv_bytes_per_token else 0.0
        # the engine's running-request limit per attention-DP rank (vLLM max_num_seqs, TRT-LLM
        # max_batch_size; planner/engines/*.yaml), unless the simulation section sets one; on a
        # prefill pool it bounds the prompts a rank prefills in a step (Instance.take_chunks)
        limit = p.inst.runtime.max_running_per_rank
        engine_cap = limit * dp if limit else 1 << 30
        max_running = engine_cap if p.role == "prefill" else self.cfg.max_running_requests or engine_cap
        drafts = p.inst.mtp.draft_tokens if p.inst.mtp and p.role != "prefill" else 0
        if p.role == "decode" and plan.kv_bytes_per_token:
            hw = p.inst.hardware
            per_token = plan.kv_bytes_per_token * p.inst.parallel.pp
            self.transfer_s = lambda i: kv_transfer_time(hw, same_domain, float(self.table.isl[i]) * per_token)
        for _ in range(p.instances):
            uid = len(self.instances)
            timer = StepTimer(
                p.inst, np.random.default_rng([self.cfg.seed, uid]), self.cfg.ep_imbalance_noise, plan.offloaded_bytes
            )
            inst = cls(
                self, uid, p_idx, timer, p.budget_tokens, capacity, window, max_running, drafts, self.cfg.kv_reservation
            )
            if p.inst.mtp and p.role != "prefill":
                self.samplers[uid] = DraftSampler(p.inst.mtp, np.random.default_rng([self.cfg.seed, uid, 7]))
            self.instances.append(inst)
            self.by_role[p.role].append(inst)
            self.env.process(inst.run())

    def cached_tokens(self, inst: Instance, i: int, context: int) -> int:
        if self.table.preemptions[i]:
            return 0  # a recompute prefills everything again
        if i < self.warm:  # a warm start's request arrives with its KV (its last token still runs)
            self.table.cached[i] = context - 1
            return context - 1
        if self.hash_ids is not None:
            blocks = self.hash_ids[i]
            hit = 0
            for h in blocks:
                if h not in inst.seen_blocks:
                    break
                hit += 1
            inst.seen_blocks.update(blocks)
            cached = hit * self.cfg.prefix_block_tokens
        else:
            cached = int(context * self.cfg.prefix_cache_hit_rate)
        cached = min(cached, context - 1)
        self.table.cached[i] = cached
        return cached

    def preempted(self, inst: Instance, i: int, gen: int) -> None:
        self.table.on_preempted(i, int(self.table.generated[i]) + gen)
        if self.decode_only:  # the recompute happens outside the simulated deployment
            inst.enqueue_decode(i)  # type: ignore[attr-defined]
            return
        target = inst if inst.kind == "aggregated" else self.router.to_prefill(i, self.table)
        target.enqueue_prefill(i, self.table.context(i))

    def finished(self, inst: Instance | None, i: int) -> None:
        self.table.on_finish(i, self.env.now)
        if inst is not None and inst.kind == "aggregated":
            inst.notify(arrived=False)  # KV freed: a waiting prompt may fit
        self.on_finish(i)

    def drop(self, i: int, reason: str) -> None:
        self.table.on_drop(i, self.env.now, reason)
        self.on_finish(i)

    def output_tokens(self, tokens: float) -> None:
        self.out_tokens.append((self.env.now, tokens))

    def record(self, inst: Instance, batch: int, out_tokens: float, in_tokens: int) -> None:
        st = inst.state
        kv = (st.kv_tokens() + inst.held) / st.capacity if st.capacity < math.inf else 0.0
        self.log.append((self.env.now, inst.uid, batch, out_tokens, in_tokens, kv, self.waiting(inst)))
        self._within_max_steps()

    def waiting(self, inst: Instance) -> int:
        """Requests at `inst` not yet running: its prefill queue, and a decode instance's backlog."""
        return len(inst.queue) + getattr(inst, "backlog", 0)

    def record_run(
        self, inst: Instance, start: float, ends: np.ndarray, batch: int, tokens: float, waiting: int
    ) -> None:
        """`record` and `output_tokens` for a run of decode steps of one batch (`Instance.decode_step`)
        that began at `start` and whose steps ended at `ends`: one log row per step at its start, its
        KV share from the state's step counter, the requests waiting when the run began (what arrives
        during a run ends it), and its tokens at its end, as the steps one at a time would have
        written them. Kept as one block (`SimResult.steps` is built from the rows and the blocks)."""
        st, m = inst.state, len(ends)
        rows = np.empty((m, 7))
        rows[0, 0] = start
        rows[1:, 0] = ends[:-1]
        rows[:, 1], rows[:, 2], rows[:, 3], rows[:, 4], rows[:, 6] = inst.uid, batch, tokens, 0, waiting
        if st.capacity < math.inf:  # DecodeState.kv_tokens at each step's counter, plus the prompts held
            rows[:, 5] = (st.kv_tokens() + inst.held + np.arange(m) * st.t_sum) / st.capacity
        else:
            rows[:, 5] = 0.0
        self.log_blocks.append(rows)
        self.out_blocks.append(np.column_stack((ends, np.full(m, tokens))))
        self.logged += m
        self._within_max_steps()

    def _within_max_steps(self) -> None:
        if len(self.log) + self.logged > self.cfg.max_steps:
            t = self.table
            done = int((~np.isnan(t.finish)).sum())
            raise SimulationError(
                f"simulation.max_steps: stopped after {self.cfg.max_steps:,} forward steps at "
                f"t = {self.env.now:,.1f} s with {done:,} of {len(t):,} requests done; "
                "use fewer requests or a larger max_steps"
            )


def _open_loop(ctx: Context, arrivals: np.ndarray) -> Generator[Any, Any, None]:
    env = ctx.env
    for i, t in enumerate(arrivals):
        if t > env.now:
            yield env.timeout(t - env.now)
        ctx.arrive(i)


def simulate(
    pools: list[PoolDef],
    wl: Workload,
    cfg: SimConfig,
    same_domain: bool = True,
    progress: Callable[[int], None] | None = None,
) -> SimResult:
    start = time.process_time()
    cfg = cfg.checked()
    ctx = Context(pools, wl, cfg, same_domain)
    n = len(wl)
    done = [0]
    issued = [0]

    def finished(i: int) -> None:
        done[0] += 1
        if progress and done[0] % 1000 == 0:
            progress(done[0])
        if wl.arrival_s is None and issued[0] < n:
            issued[0] += 1
            ctx.arrive(issued[0] - 1)

    ctx.on_finish = finished
    if wl.arrival_s is None:
        first = min(wl.concurrency, n)
        issued[0] = first
        ramp = cfg.closed_loop_ramp_s or 0.0
        starts = np.sort(ctx.rng.uniform(0, ramp, size=first)) if ramp else np.zeros(first)
        ctx.env.process(_open_loop(ctx, starts))
    else:
        ctx.env.process(_open_loop(ctx, wl.arrival_s))
    ctx.env.run()
    _settle(ctx)
    arrivals = ctx.table.arrival
    order = np.sort(arrivals[~np.isnan(arrivals)])[wl.warm :]  # a warm start (at 0 s) is never measured
    runs = n - wl.warm
    t0 = float(order[min(int(cfg.warmup_fraction * runs), len(order) - 1)])
    last = max(len(order) - 1 - int(cfg.cooldown_fraction * runs), 0)  # the cool-down's arrivals are not measured
    t1 = float(order[last]) if len(order) > 1 else float(np.nanmax(ctx.table.finish))
    if t1 <= t0:
        t1 = float(np.nanmax(ctx.table.finish))
    steps = np.array(ctx.log, dtype=float).reshape(-1, 7)
    if ctx.log_blocks:  # in time order, runs' steps among the others
        steps = np.concatenate([steps, *ctx.log_blocks])
        steps = steps[np.argsort(steps[:, 0], kind="stable")]
    out_tokens = np.concatenate([np.array(ctx.out_tokens, dtype=float).reshape(-1, 2), *ctx.out_blocks])
    gpus = sum(p.instances * p.inst.parallel.gpus for p in pools)
    return SimResult(
        ctx.table,
        steps,
        [(i.kind, i.pool) for i in ctx.instances],
        (t0, t1),
        gpus,
        time.process_time() - start,
        sum(i.timer.calls for i in ctx.instances),
        {
            "out_tokens": out_tokens,
            "warmup_by": cfg.warmup_by,
            "warmup_fraction": cfg.warmup_fraction,
            "open_loop": wl.arrival_s is not None,  # arrivals at their own times, not when requests finish
            "warm_start": wl.warm,
            "notes": ctx.notes,
        },
    )


def _settle(ctx: Context) -> None:
    """Every request ends finished or dropped with a reason; a run where none finished is an error."""
    t = ctx.table
    for i in np.flatnonzero(np.isnan(t.finish)):  # nothing left to run them: say so, never hide them
        t.on_drop(int(i), ctx.env.now, "never scheduled (no instance could take it)")
    if not (~t.dropped).any():
        reasons = sorted(set(t.drop_reason.values()))
        raise SimulationError(f"no request completed: all {len(t):,} were dropped ({'; '.join(reasons)})")

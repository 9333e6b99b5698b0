"""Step times for the simulator, from `roofline.step.step_cost` and nothing else.

Calls are memoized on a quantized batch shape (KV length to 32 tokens, prefill tokens to 64,
prefixes to 256), so a 100,000-request run calls the model a few thousand times rather than
once per step. Optionally each decode step draws its own expert-parallel load imbalance: the
routing noise of the busiest of `ep` ranks is a draw of the maximum of `ep` standard normals
(`roofline.imbalance.max_normal_quantiles`, whose mean is the estimator's), and the MoE share of
the step scales with it around the expected imbalance that `step_cost` already includes.
A mixed step (decodes and prefill chunks together, vLLM and TRT-LLM)
is one `StepBatch` holding both, priced by the same `step_cost` as the estimator's mixed step;
with pp stages decode and mixed steps run as pp micro-batches in flight (`roofline.pipeline`).
"""

from __future__ import annotations

import math

import numpy as np

from roofline.batch import StepBatch
from roofline.deployment import InstanceSpec
from roofline.imbalance import imbalance, max_normal_quantiles
from roofline.ops import expected_imbalance, expert_popularity
from roofline.pipeline import pipelined_cost
from roofline.step import step_cost

KV_Q = 32
TOK_Q = 64
PREFIX_Q = 256
MIXED_KV_Q = 128  # a mixed step's decode KV length grid: its prefill chunk dominates the step


def seq_grid(seqs: int) -> int:
    """Decode batch of a mixed step on a grid of 8 points per doubling (exact below 16): the
    decode share of a step that also prefills is priced within 1/16 of its batch."""
    w = 1 << max(seqs.bit_length() - 4, 0)
    return max(1, round(seqs / w) * w)


class StepTimer:
    def __init__(
        self, inst: InstanceSpec, rng: np.random.Generator, noise: bool = True, offload_bytes: float = 0.0
    ) -> None:
        self.inst = inst
        self.rng = rng
        self.offload = offload_bytes
        self.calls = 0
        ep = inst.parallel.ep
        self.noise = noise and ep > 1 and inst.runtime.ep_imbalance is None and inst.model.moe is not None
        self._decode: dict[tuple[int, int, int], tuple[float, float, float, float]] = {}
        self._mixed: dict[tuple[int, int, int, int, int], float] = {}
        self._both: dict[tuple[int, int, int, int, int, int], tuple[float, float, float, float]] = {}
        self._scales: dict[tuple[float, float], np.ndarray] = {}  # (pairs, expected) -> each draw's MoE scale
        moe = inst.model.moe
        self._k = moe.top_k if moe else 0
        self._pop = expert_popularity(inst) if self.noise else 0.0
        self._z = [max(v, 0.0) for v in max_normal_quantiles(ep)] if self.noise else [0.0]  # clipped as drawn

    def _cost(self, batch: StepBatch, pipeline: bool = True) -> tuple[float, float]:
        """A step's time and its expert-GEMM share. Decode and mixed steps run as pp micro-batches
        in flight (`roofline.pipeline`, as the estimator prices them); a prefill-only step is one
        batch through the stages in turn, as the estimator's prefill step."""
        self.calls += 1
        c = pipelined_cost(self.inst, batch, self.offload) if pipeline else step_cost(self.inst, batch, self.offload)
        moe = sum(o.time_s for o in c.ops if o.name == "moe.experts") * (self.inst.parallel.pp if pipeline else 1)
        return c.time_s, moe

    def _decode_hit(self, seqs: int, kv_sum: float, drafts: int) -> tuple[float, float, float, float]:
        bucket = int(kv_sum / seqs) // KV_Q
        key = (seqs, bucket, drafts)
        hit = self._decode.get(key)
        if hit is None:
            t, moe = self._cost(StepBatch.decode(seqs, (bucket + 0.5) * KV_Q, drafts))
            pairs = seqs * (1 + drafts) * self._k / self.inst.parallel.ep / self.inst.parallel.pp
            hit = self._decode[key] = (t, moe, pairs, expected_imbalance(self.inst, pairs))
        return hit

    def decode(self, seqs: int, kv_sum: float, drafts: int) -> float:
        return self._noisy(self._decode_hit(seqs, kv_sum, drafts))

    def decode_run(self, seqs: int, kv_sums: np.ndarray, drafts: int) -> np.ndarray:
        """`decode` for consecutive steps of one batch (KV sums `kv_sums`, never falling), the same
        times draw for draw: the noise indices come from the stream in one call (numpy draws them as
        one at a time would), and the batch's pairs per rank, hence each draw's imbalance, are those of
        every step; the arithmetic is `decode`'s, element by element."""
        buckets = (kv_sums / seqs).astype(np.int64) // KV_Q
        first = np.flatnonzero(np.diff(buckets, prepend=buckets[0] - 1))  # each KV bucket's first step
        hits = [self._decode_hit(seqs, float(kv_sums[j]), drafts) for j in first]
        which = np.repeat(np.arange(len(first)), np.diff(first, append=len(buckets)))
        t = np.array([h[0] for h in hits])[which]
        if not self.noise:
            return t
        moe = np.array([h[1] for h in hits])[which]
        noisy = moe > 0
        if not noisy.any():
            return t
        _, _, pairs, expected = hits[0]
        scale = self._scales.get((pairs, expected))
        if scale is None:
            z = self._z
            scale = self._scales[pairs, expected] = np.array([imbalance(self._pop, pairs, v) / expected - 1 for v in z])
        t[noisy] += moe[noisy] * scale[self.rng.integers(len(self._z), size=int(noisy.sum()))]
        return t

    def _noisy(self, hit: tuple[float, float, float, float]) -> float:
        t, moe, pairs, expected = hit
        if self.noise and moe > 0:
            drawn = imbalance(self._pop, pairs, self._z[self.rng.integers(len(self._z))])
            t += moe * (drawn / expected - 1)
        return t

    def prefill(self, chunks: list[tuple[int, int]], ranks: list[int] | None = None) -> float:
        """A prefill step over `chunks` of (new tokens, cached prefix), chunk i on attention-DP rank
        `ranks[i]` (None: each on a rank of its own). Ranks step together, so the step is timed as if
        every rank carried the busiest rank's chunks (`_spread`)."""
        n, new_q, prefix_q = self._spread(chunks, ranks)
        key = (n, new_q, prefix_q, 0, 0)
        hit = self._mixed.get(key)
        if hit is None:
            per_new = max(1, round((key[1] + 0.5) * TOK_Q / n))
            per_prefix = round(key[2] * PREFIX_Q / n)
            hit, _ = self._cost(StepBatch.prefill([(per_new, per_prefix)] * n), pipeline=False)
            self._mixed[key] = hit
        return hit

    def _spread(self, chunks: list[tuple[int, int]], ranks: list[int] | None) -> tuple[int, int, int]:
        """The step as dp copies of its busiest rank's chunks (most new tokens): their count times dp,
        their new tokens times dp, and the cached prefix at which that many equal chunks carry their
        causal attention work (a chunk of k new tokens behind p attends k p + k (k + 1) / 2 keys), so a
        prompt's last piece behind its long prefix beside a fresh prompt keeps its work, which the mean
        prefix would overstate. Without `ranks` each chunk sits on a rank of its own."""
        dp = self.inst.parallel.dp_attention
        busiest = chunks
        if ranks is not None and dp > 1:
            per_rank: dict[int, list[tuple[int, int]]] = {}
            for c, r in zip(chunks, ranks, strict=True):
                per_rank.setdefault(r, []).append(c)
            busiest = max(per_rank.values(), key=lambda cs: sum(k for k, _ in cs))
            copies = float(dp)
        else:
            copies = math.ceil(len(chunks) / dp) * dp / len(chunks)  # their count up to a multiple of dp
        new = sum(c[0] for c in busiest)
        pairs = sum(k * p + k * (k + 1) / 2 for k, p in busiest)
        prefix = max(pairs / new - (new / len(busiest) + 1) / 2, 0.0)  # per chunk
        n = round(len(busiest) * copies)
        return n, int(new * copies // TOK_Q), int(prefix * n // PREFIX_Q)

    def mixed(
        self, seqs: int, kv_sum: float, chunks: list[tuple[int, int]], drafts: int, ranks: list[int] | None = None
    ) -> float:
        """One step of `seqs` decodes (KV lengths summing to `kv_sum`) and prefill `chunks`
        together; the chunks are spread over attention-DP ranks as in `prefill`, and the
        step's expert load draws its imbalance from all its tokens."""
        if not seqs and self.inst.parallel.pp == 1:
            return self.prefill(chunks, ranks)
        bucket = int(kv_sum / seqs) // MIXED_KV_Q if seqs else 0
        n, new_q, prefix_q = self._spread(chunks, ranks)
        key = (seq_grid(seqs) if seqs else 0, bucket, drafts, n, new_q, prefix_q)
        hit = self._both.get(key)
        if hit is None:
            per_new = max(1, round((new_q + 0.5) * TOK_Q / n))
            per_prefix = round(prefix_q * PREFIX_Q / n)
            kv = (bucket + 0.5) * MIXED_KV_Q
            batch = StepBatch(key[0], key[0] * kv, ((per_new, per_prefix),) * n, drafts)
            t, moe = self._cost(batch)
            pairs = batch.tokens * self._k / self.inst.parallel.ep / self.inst.parallel.pp  # one micro-batch's
            hit = self._both[key] = (t, moe, pairs, expected_imbalance(self.inst, pairs))
        return self._noisy(hit)

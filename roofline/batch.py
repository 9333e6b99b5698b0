"""What one forward step of one instance processes.

Decode sequences are summarised by their count and the sum of their KV lengths (attention cost is
linear in both); prefill chunks are kept as (new tokens, cached prefix) pairs because causal
attention is quadratic in the chunk. Counts are for the whole instance, not per GPU.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StepBatch:
    decode_seqs: int = 0
    decode_kv_sum: float = 0.0  # sum over decode sequences of their KV length
    prefill_chunks: tuple[tuple[int, int], ...] = ()  # (new tokens, cached prefix tokens)
    draft_tokens: int = 0  # MTP drafts verified per decode sequence (0 = no MTP)

    def __post_init__(self) -> None:
        if self.decode_seqs < 0 or self.decode_kv_sum < 0 or self.draft_tokens < 0:
            raise ValueError("batch counts must be non-negative")
        if any(n <= 0 or p < 0 for n, p in self.prefill_chunks):
            raise ValueError("prefill chunks need new > 0 and prefix >= 0 tokens")

    @staticmethod
    def decode(seqs: int, kv_len: float, draft_tokens: int = 0) -> StepBatch:
        return StepBatch(decode_seqs=seqs, decode_kv_sum=seqs * kv_len, draft_tokens=draft_tokens)

    @staticmethod
    def prefill(chunks: list[tuple[int, int]] | tuple[tuple[int, int], ...]) -> StepBatch:
        return StepBatch(prefill_chunks=tuple(chunks))

    @property
    def prefill_tokens(self) -> int:
        return sum(n for n, _ in self.prefill_chunks)

    @property
    def prefill_seqs(self) -> int:
        return len(self.prefill_chunks)

    @property
    def decode_tokens(self) -> int:
        """Tokens the main model runs for decode: each sequence verifies its drafts too."""
        return self.decode_seqs * (1 + self.draft_tokens)

    @property
    def tokens(self) -> int:
        return self.decode_tokens + self.prefill_tokens

    @property
    def decode_kv_mean(self) -> float:
        return self.decode_kv_sum / self.decode_seqs if self.decode_seqs else 0.0

    def causal_pairs(self, cap: int | None = None) -> float:
        """Sum over prefill tokens of the keys each attends to (itself included), optionally
        capped at `cap` keys per query (DSA top-k, sliding windows)."""
        total = 0.0
        for n, p in self.prefill_chunks:
            if cap is None or p + n <= cap:
                total += n * p + n * (n + 1) / 2
            elif p >= cap:
                total += n * cap
            else:
                below = cap - p  # queries whose causal span is still under the cap
                total += below * p + below * (below + 1) / 2 + (n - below) * cap
        return total

    def prefix_sum(self) -> int:
        return sum(p for _, p in self.prefill_chunks)

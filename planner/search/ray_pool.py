"""Stage-1 scoring on a Ray cluster (`planner plan --ray ADDRESS`; install the `ray` extra).

Chunks of candidates that share a decode pool go to one task each, so a worker's step-cost
caches serve the whole chunk. Results come back in candidate order."""

from __future__ import annotations

import socket
from typing import Any

from planner.inputs.question import Question
from planner.search.score import Scored, score_many
from planner.search.space import Candidate
from roofline.errors import PlannerError

CONNECT_TIMEOUT_S = 5.0


def _check_reachable(address: str) -> None:
    """Fail in seconds, with a clear message, when nothing listens at a host:port address (Ray's
    own client retries for minutes). `auto` and `ray://` addresses are left to Ray."""
    target = address.removeprefix("ray://") if address.startswith("ray://") else address
    if address == "auto" or ":" not in target:
        return
    host, _, port = target.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
            return
    except (OSError, ValueError) as exc:
        raise PlannerError(
            f"--ray {address}: no Ray cluster answers there within {CONNECT_TIMEOUT_S:g} s ({exc}); "
            "start one with `ray start --head` or use --ray local"
        ) from exc


def score_on_ray(q: Question, chunks: list[list[Candidate]], address: str) -> list[Scored]:
    try:
        import ray  # noqa: PLC0415  (optional extra, imported only when asked for)
    except ImportError as exc:
        raise PlannerError("--ray needs Ray: pip install 'moe-capacity-planner[ray]'") from exc
    started = not ray.is_initialized()
    if started and address != "local":
        _check_reachable(address)
    if started:
        ray.init(
            address=None if address == "local" else address,
            ignore_reinit_error=True,
            include_dashboard=False,
            log_to_driver=False,
        )
    try:
        task: Any = ray.remote(score_many)
        refs = [task.remote(q, chunk) for chunk in chunks]
        return [s for part in ray.get(refs) for s in part]
    finally:
        if started:
            ray.shutdown()

"""How a plan spends its simulations (planner.search.verify.verify_ranked): the CPU budget once one row
meets, the verification limit even when none does, bisection between a batch that met and one that
missed, and the first wave run side by side in worker processes. Verification is stubbed: these
tests are about the order and number of simulations, not their figures."""

from __future__ import annotations

from dataclasses import dataclass


def test_the_cpu_budget_never_stops_a_plan_with_no_verified_answer(monkeypatch):
    """With the CPU-time budget spent and every simulated deployment missing its SLO, the plan goes on
    simulating the deployments and lower operating points that meet by estimate (up to MAX_SIMULATED)
    rather than answering 'none meets in simulation' with one left untried; once one meets, it stops."""
    from types import SimpleNamespace

    from planner.search import plan as plan_mod
    from planner.search import verify as verify_mod

    verdict = {"a": False, "b": False, "c": False, "d": True, "a-low": True}
    tried: list[str] = []

    def fake_verify(q, p):
        tried.append(p.name)
        return SimpleNamespace(name=p.name)

    def point(name):
        return SimpleNamespace(name=name, batch=1, deployment=SimpleNamespace(describe=lambda: name))

    recs = [plan_mod.Recommendation(None, point(n), fallbacks=[point(n + "-low")]) for n in "abcd"]  # type: ignore[arg-type]
    monkeypatch.setattr(verify_mod, "verify", fake_verify)
    monkeypatch.setattr(verify_mod, "meets_slo", lambda q, m: (verdict.get(m.name, False), {"tpot_ms": 1.0}))
    clock = iter(range(0, 10_000, 6))  # each reading 6 CPU-s later: the budget is spent at once, the limit is not
    monkeypatch.setattr(verify_mod.time, "process_time", lambda: next(clock))
    q = SimpleNamespace(verify_top=1)
    n = verify_mod.verify_ranked(q, recs, lambda _m: None)  # type: ignore[arg-type]
    assert tried == ["a", "b", "c", "d"]
    assert n == 4
    assert [r.meets for r in recs] == [False, False, False, True]


def test_a_plan_bisects_between_the_swept_batch_that_met_and_the_one_that_missed(monkeypatch):
    """Where the best swept batch (256) misses in simulation and the next one down (128) meets, the plan
    simulates batches between (192 meets, then 224 misses) and keeps the highest that met; with a rate
    stated the batch is the traffic's, so nothing is bisected."""
    from types import SimpleNamespace

    from planner.search import plan as plan_mod
    from planner.search import verify as verify_mod

    tried: list[int] = []

    def point(batch):
        return SimpleNamespace(batch=batch, deployment=SimpleNamespace(describe=lambda: "d"))

    def fake_verify(q, p):
        tried.append(p.batch)
        return SimpleNamespace(batch=p.batch)

    monkeypatch.setattr(verify_mod, "verify", fake_verify)
    monkeypatch.setattr(verify_mod, "meets_slo", lambda q, m: (m.batch <= 200, {"tpot_ms": 1.0}))
    monkeypatch.setattr(verify_mod, "point_at", lambda q, c, b: SimpleNamespace(meets=True, **vars(point(b))))
    for rate, want_tried, want_batch in ((None, [256, 128, 192, 224], 192), (3.0, [256, 128], 128)):
        tried.clear()
        r = plan_mod.Recommendation(None, point(256), fallbacks=[point(128)])  # type: ignore[arg-type]
        q = SimpleNamespace(verify_top=1, rate=rate, concurrency=None)
        verify_mod.verify_ranked(q, [r], lambda _m: None)  # type: ignore[arg-type]
        assert tried == want_tried
        assert r.meets
        assert r.point.batch == want_batch


@dataclass(frozen=True)
class _Dep:  # picklable stand-ins: the first wave's points travel to worker processes
    name: str

    def describe(self) -> str:
        return self.name

    def label(self, batch: int) -> str:
        return f"{self.name} at batch {batch}"


@dataclass(frozen=True)
class _Pt:
    deployment: _Dep
    batch: int = 1

    @property
    def label(self) -> str:  # as Point.label: the deployment's label at the point's batch
        return self.deployment.label(self.batch)


def _fake_verify(q, p):
    import os
    from types import SimpleNamespace

    from roofline.errors import PlannerError

    if p.deployment.name == "broken":
        raise PlannerError("KV pool too small")
    return SimpleNamespace(name=p.deployment.name, pid=os.getpid())


def test_the_first_wave_runs_side_by_side_with_the_same_outcome(monkeypatch):
    """With workers > 1 the first `verify_top` simulations run in forked processes: the same recommendations
    meet, the same count is simulated, and a point the simulator cannot build is reported as before."""
    from types import SimpleNamespace

    from planner.search import plan as plan_mod
    from planner.search import verify as verify_mod

    monkeypatch.setattr(verify_mod, "verify", _fake_verify)
    monkeypatch.setattr(verify_mod, "meets_slo", lambda q, m: (m.name in {"a", "c"}, {"tpot_ms": 1.0}))
    import os

    outcomes = []
    for workers in (1, 2):
        recs = [plan_mod.Recommendation(None, _Pt(_Dep(n))) for n in ("a", "broken", "c", "d")]  # type: ignore[arg-type]
        said: list[str] = []
        failed: list[str] = []
        q = SimpleNamespace(verify_top=3, rate=None, concurrency=None)
        n = verify_mod.verify_ranked(q, recs, said.append, failed, workers)  # type: ignore[arg-type]
        outcomes.append((n, [r.meets for r in recs], failed))
        assert any("side by side" in s for s in said) == (workers > 1)
        here = [r.simulated.pid == os.getpid() for r in recs if r.simulated is not None]  # a, c, d
        assert here == ([True, True, True] if workers == 1 else [False, False, True])  # d: after the first wave
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] == 3
    assert outcomes[0][2] == ["not simulated, broken at batch 1: KV pool too small"]


def test_the_verification_limit_stops_even_a_plan_with_no_verified_answer_and_says_so(monkeypatch):
    """New-user trial (fourteenth session): gpt-oss-120b on 72 GB200 GPUs simulated 22 deployments of
    ~10 s each (3.5 minutes) looking for a verified answer. Past VERIFY_LIMIT_S CPU seconds no further
    simulation starts, and the plan's notes say so."""
    from types import SimpleNamespace

    from planner.search import plan as plan_mod
    from planner.search import verify as verify_mod

    tried: list[str] = []

    def fake_verify(q, p):
        tried.append(p.name)
        return SimpleNamespace(name=p.name)

    def point(name):
        return SimpleNamespace(name=name, batch=1, deployment=SimpleNamespace(describe=lambda: name), label=name)

    recs = [plan_mod.Recommendation(None, point(n), fallbacks=[point(n + "-low")]) for n in "abcd"]  # type: ignore[arg-type]
    monkeypatch.setattr(verify_mod, "verify", fake_verify)
    monkeypatch.setattr(verify_mod, "meets_slo", lambda q, m: (False, {"tpot_ms": 0.5}))
    clock = iter(range(0, 10_000, 15))  # each reading 15 CPU-s later
    monkeypatch.setattr(verify_mod.time, "process_time", lambda: next(clock))
    failed: list[str] = []
    n = verify_mod.verify_ranked(SimpleNamespace(verify_top=1), recs, lambda _m: None, failed)  # type: ignore[arg-type]
    assert n == len(tried)
    assert 1 <= n < 8  # 4 deployments and 4 lower points to try: the limit stopped it before all 8
    assert tried[0] == "a"
    assert any(f.startswith(f"verification stopped after {n} simulations") for f in failed)


def test_a_lower_batch_of_a_row_that_missed_goes_before_a_row_promising_much_less(monkeypatch):
    """New-user trial (sixteenth session): DeepSeek-V3 on 8 RTX PRO 6000 ranked first a deployment at 9.9
    tok/s/GPU. Its nvfp4 row missed TPOT at batch 32 (est. 83 tok/s/GPU) and met at batch 16 (52 simulated),
    but the plan simulated the next rows' best points first and stopped on the CPU budget before trying
    batch 16. Best-first: the waiting point of the highest estimate is simulated next."""
    from types import SimpleNamespace

    from planner.search import plan as plan_mod
    from planner.search import verify as verify_mod

    tried: list[str] = []

    def point(name, value, batch=1):
        return SimpleNamespace(name=name, value=value, batch=batch, deployment=SimpleNamespace(describe=lambda: name))

    def fake_verify(q, p):
        tried.append(p.name)
        return SimpleNamespace(name=p.name)

    monkeypatch.setattr(verify_mod, "verify", fake_verify)
    monkeypatch.setattr(verify_mod, "meets_slo", lambda q, m: (m.name != "fast-32", {"tpot_ms": 1.0}))
    fast = plan_mod.Recommendation(None, point("fast-32", 83.0, 32), fallbacks=[point("fast-16", 52.0, 16)])  # type: ignore[arg-type]
    slow = [plan_mod.Recommendation(None, point(f"slow-{i}", 10.0 - i)) for i in range(3)]  # type: ignore[arg-type]
    q = SimpleNamespace(verify_top=1, rate=1.0, concurrency=None)
    verify_mod.verify_ranked(q, [fast, *slow], lambda _m: None, value=lambda p: p.value)  # type: ignore[arg-type]
    assert tried == ["fast-32", "fast-16"]
    assert fast.meets
    assert fast.point.name == "fast-16"
    # without a value, rank order: every best point before any lower one
    tried.clear()
    fast = plan_mod.Recommendation(None, point("fast-32", 83.0, 32), fallbacks=[point("fast-16", 52.0, 16)])  # type: ignore[arg-type]
    q = SimpleNamespace(verify_top=4, rate=1.0, concurrency=None)
    verify_mod.verify_ranked(q, [fast, *slow[:1]], lambda _m: None)  # type: ignore[arg-type]
    assert tried == ["fast-32", "slow-0", "fast-16"]

"""The deployment part of a scenario file: pools by role (`prefill`, `decode`, `aggregated`), each
`instances` copies of a tp x dp_attention x pp instance with experts over `ep` ranks, any field
`unknown`, and the layout rules that need no catalog lookup. Re-exported by `planner.inputs.scenario`;
rules that need the model (ep <= experts, pp <= layers) are checked by `planner.model.defaults.resolve`."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from simulator.config import InputModel

Unknown = Literal["unknown"]

MAX_INSTANCES = 10_000  # per pool; the simulator runs one process per instance
MAX_GPUS_PER_INSTANCE = 4096  # 7x the largest NVLink domain announced (NVL576)
MAX_GPUS = 100_000  # a deployment: the largest published training clusters are ~100k GPUs

LAYOUT_FIELDS = ("instances", "gpus_per_instance", "tp", "dp_attention", "ep", "pp")
PosInt = Annotated[int, Field(gt=0)]


class PoolSpec(InputModel):
    """One pool: `instances` copies of an instance of `gpus_per_instance` GPUs laid out as
    tp x dp_attention x pp, with experts over `ep` ranks of each pipeline stage. Any field may be
    `unknown` (the planner then searches it, `planner.search.unknowns`)."""

    instances: Annotated[int, Field(gt=0, le=MAX_INSTANCES)] | Unknown = 1
    gpus_per_instance: Annotated[int, Field(gt=0, le=MAX_GPUS_PER_INSTANCE)] | Unknown = "unknown"
    tp: PosInt | Unknown = 1
    dp_attention: PosInt | Unknown = 1
    ep: PosInt | Unknown = 1
    pp: PosInt | Unknown = 1

    @model_validator(mode="after")
    def _fill_left_out(self) -> PoolSpec:
        """tp, dp_attention and pp left out default to 1 only where that fits `gpus_per_instance`: else
        the one left out is what the others leave (`gpus_per_instance: 8, dp_attention: 8` gives tp 1,
        `gpus_per_instance: 8` alone searches tp x dp_attention x pp), as a left-out field is unknown."""
        g = self.gpus_per_instance
        axes = ("tp", "dp_attention", "pp")
        left_out = [f for f in axes if f not in self.model_fields_set]
        if not isinstance(g, int) or not left_out:
            return self
        given = [getattr(self, f) for f in axes if f not in left_out]
        if not all(isinstance(v, int) for v in given):
            return self
        product = 1
        for v in given:
            product *= v
        if product == g:
            return self
        if len(left_out) == 1 and g % product == 0:
            object.__setattr__(self, left_out[0], g // product)
        elif product < g:
            for f in left_out:
                object.__setattr__(self, f, "unknown")
        return self

    @property
    def known(self) -> bool:
        return all(isinstance(getattr(self, f), int) for f in LAYOUT_FIELDS)

    def stated(self) -> dict[str, int]:
        return {f: v for f in LAYOUT_FIELDS if isinstance(v := getattr(self, f), int)}

    @property
    def gpus(self) -> int:
        assert isinstance(self.instances, int)
        assert isinstance(self.gpus_per_instance, int)
        return self.instances * self.gpus_per_instance

    def layout_error(self) -> str | None:
        """Why the stated tp x dp_attention x pp and ep do not fit gpus_per_instance, or None."""
        tp, dp, pp, ep, g = self.tp, self.dp_attention, self.pp, self.ep, self.gpus_per_instance
        if not all(isinstance(v, int) for v in (tp, dp, pp, g)):
            return None
        assert isinstance(tp, int) and isinstance(dp, int) and isinstance(pp, int) and isinstance(g, int)  # noqa: PT018
        if tp * dp * pp != g:
            return f"tp x dp_attention x pp = {tp}x{dp}x{pp} must equal gpus_per_instance = {g}"
        stage = g // pp
        if isinstance(ep, int) and stage % ep:
            return f"ep = {ep} must divide the {stage} GPUs of a pipeline stage"
        return None


class DeploymentSpec(InputModel):
    """Pools by role; a role may list several pools of different instance sizes, or be `unknown`
    (present, layout not stated). No pools at all means the whole deployment is unknown; `gpus`
    states the total GPU count when the layout is not stated."""

    prefill: PoolSpec | list[PoolSpec] | Unknown | None = None
    decode: PoolSpec | list[PoolSpec] | Unknown | None = None
    aggregated: PoolSpec | list[PoolSpec] | Unknown | None = None
    gpus: Annotated[int, Field(gt=0, le=MAX_GPUS)] | None = None

    def groups(self, role: str) -> list[PoolSpec]:
        v = getattr(self, role)
        if v is None or v == "unknown":
            return []
        return v if isinstance(v, list) else [v]

    def present(self, role: str) -> bool:
        return getattr(self, role) is not None

    @property
    def known(self) -> bool:
        roles = [r for r in ("prefill", "decode", "aggregated") if self.present(r)]
        return (
            bool(roles)
            and all(getattr(self, r) != "unknown" for r in roles)
            and all(p.known for r in roles for p in self.groups(r))
        )

    @model_validator(mode="after")
    def _check(self) -> DeploymentSpec:
        if self.present("aggregated") and (self.present("prefill") or self.present("decode")):
            raise ValueError("give either `aggregated` or `prefill`/`decode` pools, not both")
        for role in ("prefill", "decode", "aggregated"):
            groups = self.groups(role)
            for k, pool in enumerate(groups):
                why = pool.layout_error()
                if why:
                    raise ValueError(f"deployment.{role}{f'[{k}]' if len(groups) > 1 else ''}: {why}")
        total = self.total_gpus
        if total is not None and total > MAX_GPUS:
            raise ValueError(f"{total:,} GPUs in all; at most {MAX_GPUS:,}")
        if self.known and self.gpus is not None and total != self.gpus:  # 16 were used for gpus: 8, unsaid
            raise ValueError(
                f"deployment.gpus is {self.gpus:,} but the pools stated hold {total:,} GPUs: "
                "give one, or make them agree"
            )
        return self

    @property
    def total_gpus(self) -> int | None:
        """GPUs of the deployment if stated (every pool known, or `gpus`)."""
        if self.known:
            return sum(p.gpus for role in ("prefill", "decode", "aggregated") for p in self.groups(role))
        return self.gpus

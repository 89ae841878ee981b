"""Hybrid-parallel training plans as a coevo problem: maximise simulated samples/s, minimise device memory.

A point is a training configuration for a model on a cluster at a fixed global batch:
pipeline degree ``pp`` (the data-parallel degree is ``devices / pp``), microbatch size,
partitioner (the three block-wise baselines: skips relayed, skips sent directly, byte-aware
cuts; or PULSE skip-aware: :mod:`sim.pipeline.partition`), schedule (GPipe, 1F1B, wave),
balance tolerance of the partitioner (slack traded for fewer bytes sent; only the
byte-aware ones take it) and activation recomputation. The wave schedule is 1F1B run over
a skip-aware plan's V-shaped stages, so ``1f1b`` and ``wave`` name one schedule: points are
kept canonical (:func:`canonical`: ``1f1b`` on block-wise plans, ``wave`` on skip-aware
ones, balance 0 on the compute-balanced baselines), and the space holds each distinct
configuration once. Objectives:

* ``samples_per_s`` (maximised, expensive): one training step simulated by
  :mod:`sim.pipeline.simulate` with every data-parallel replica and each stage's ring
  all-reduce starting when its last backward ends, sharing the nodes' NICs with the
  pipelines' transfers (:func:`sim.pipeline.tune.hybrid_step_s`); it stands for a measured step.
* ``memory_gb`` (minimised, cheap): the most memory any device must hold under the
  schedule rule (:func:`sim.pipeline.simulate.memory_bound`), computed without simulating.

A configuration that cannot run (the global batch does not divide into ``dp x microbatch``,
more pipeline stages than blocks or skip pairs, or memory over the device's) evaluates to
0 samples/s; :meth:`PipelineProblem.infeasible` says why. The space is small enough to
enumerate, so the exact front (:meth:`reference`) is known; it is computed on first use.
"""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, cast

import numpy as np
import optuna

from coevo.search.errors import UserInputError
from coevo.search.metrics import FrontReference
from coevo.search.niches import Niche
from coevo.search.problem import Evolvable, Objective, Problem, ProblemOptions, config_field, read_key_values
from coevo.search.space_cache import cached_space
from coevo.search.work_progress import report
from coevo.sim.pipeline.cluster import Cluster, get_cluster
from coevo.sim.pipeline.config import PipelineConfig
from coevo.sim.pipeline.partition import PARTITIONERS as PARTITION_METHODS
from coevo.sim.pipeline.partition import TOLERANT, Plan, partition, units
from coevo.sim.pipeline.simulate import memory_bound, simulate
from coevo.sim.pipeline.tune import hybrid_step_s

if TYPE_CHECKING:  # sim.pipeline.profile imports torch and networkx: loaded when a model is first profiled
    from coevo.sim.pipeline.profile import ModelProfile

MICROBATCHES = (1, 2, 4, 8, 16)
PARTITIONERS = tuple(PARTITION_METHODS)
SCHEDULES = ("gpipe", "1f1b", "wave")
BALANCES = (0.0, 0.1, 0.2)
RECOMPUTE = ("off", "on")
FLOOR = 1e-6
"""Samples/s floor of the useful region: only configurations that run count."""


class Config(NamedTuple):
    """One hybrid-parallel training configuration (a point of the ``pipeline`` problem)."""

    pp: int
    microbatch: int
    partitioner: str
    schedule: str
    balance: float
    recompute: str


def canonical(c: Config) -> Config:
    """``c`` with its schedule named as the plan runs it (``wave`` on skip-aware plans, ``1f1b`` on block-wise ones) and
    balance 0 on partitioners that take no tolerance.

    Example:
        >>> canonical(Config(2, 1, "skip-aware", "1f1b", 0.0, "off")).schedule
        'wave'
        >>> canonical(Config(2, 1, "blockwise", "wave", 0.0, "off")).schedule
        '1f1b'
        >>> canonical(Config(2, 1, "blockwise-direct", "1f1b", 0.2, "off")).balance
        0.0
    """
    if c.partitioner not in TOLERANT and c.partitioner in PARTITION_METHODS:
        c = c._replace(balance=0.0)
    if c.schedule == "gpipe":
        return c
    return c._replace(schedule="wave" if c.partitioner == "skip-aware" else "1f1b")


@functools.lru_cache(maxsize=64)
def _profile(model: str, resolution: int, microbatch: int) -> ModelProfile:
    from coevo.sim.pipeline.profile import profile

    return profile(model, resolution=resolution, microbatch=microbatch)


def degree_niches() -> tuple[Niche, ...]:
    """Hybrid-parallel configurations by pipeline degree: from pure data parallelism to deep pipelines.

    Deep pipelines move less gradient traffic but more activations and bubbles; shallow
    ones hold more of the model per device, so each band has its own memory/throughput trade-off.
    """

    def pp(point: Any) -> int:
        return int(point[0])

    return (
        Niche("pp1", "no pipeline: pure data parallelism, the whole model on every device", lambda c: pp(c) == 1),
        Niche("pp2-3", "shallow pipelines of 2-3 stages", lambda c: 2 <= pp(c) <= 3),
        Niche("pp4-7", "pipelines of 4-7 stages", lambda c: 4 <= pp(c) <= 7),
        Niche("pp8-15", "deep pipelines of 8-15 stages", lambda c: 8 <= pp(c) <= 15),
        Niche("pp16+", "pipelines of 16 or more stages", lambda c: pp(c) >= 16),
    )


class PipelineOptions(ProblemOptions):
    """Options of the ``pipeline`` problem."""

    model: str = config_field(
        PipelineConfig,
        "model",
        description="model preset (unet-sd, unet-small, unet-tiny, uvit-h, uvit-small, uvit-tiny) or path/to/file.py:function",
    )
    cluster: str = config_field(
        PipelineConfig, "cluster", description="cluster preset (v100x16-ib10, v100x16-ib300, v100x8-pcie) or a JSON file"
    )
    global_batch: int = config_field(PipelineConfig, "global_batch")
    resolution: int = config_field(PipelineConfig, "resolution", description="latent height/width")


class PipelineProblem(Problem, Evolvable):
    """Hybrid-parallel configurations of one model on one cluster (module doc).

    Example:
        >>> p = PipelineProblem(model="unet-tiny", cluster="v100x8-pcie", global_batch=16, resolution=8)
        >>> c = p.parse_design("pp=2 microbatch=2 partitioner=skip-aware schedule=wave balance=0 recompute=off")
        >>> p.describe(c)
        'pp=2 dp=4 microbatch=2 partitioner=skip-aware schedule=wave balance=0 recompute=off'
        >>> sorted(p.evaluate(c))
        ['memory_gb', 'samples_per_s']
    """

    name = "pipeline"
    Options = PipelineOptions
    run_group = "cluster"
    example_options: ClassVar[Mapping[str, Any]] = {"model": "unet-tiny", "cluster": "v100x8-pcie", "global_batch": 16, "resolution": 8}
    design_label = "config"
    objectives = (
        Objective("samples_per_s", "maximize", "samples/s", "expensive", bounds=(0.0, None)),
        Objective("memory_gb", "minimize", "GB", "cheap", bounds=(0.0, None)),
    )

    def __init__(self, options: PipelineOptions | None = None, /, **values: Any) -> None:
        super().__init__(options, **values)
        self.model: str = self.options.model
        self.cluster_name: str = self.options.cluster
        self.cluster: Cluster = get_cluster(self.cluster_name)
        self.global_batch: int = self.options.global_batch
        self.resolution: int = self.options.resolution
        base = _profile(self.model, self.resolution, 1)  # validates the model and resolution early
        self.blocks = len(base.blocks)
        self.pairs = len(units(base)) if base.skip_edges else 0
        self.degrees = tuple(d for d in range(1, self.cluster.devices + 1) if self.cluster.devices % d == 0)
        self.design_format = (
            "key=value pairs: pp=P (one of " + ", ".join(map(str, self.degrees)) + f"; dp = {self.cluster.devices}/pp) "
            f"microbatch=M ({', '.join(map(str, MICROBATCHES))}) partitioner=({'|'.join(PARTITIONERS)}) "
            f"schedule=({'|'.join(SCHEDULES)}) balance=({'|'.join(f'{b:g}' for b in BALANCES)}) recompute=(off|on)"
        )
        self._reference: FrontReference | None = None
        self._cache: dict[Config, dict[str, float]] = {}

    # ---- identity and encoding

    def niches(self) -> tuple[Niche, ...]:
        return degree_niches()

    def distributions(self) -> dict[str, optuna.distributions.BaseDistribution]:
        cat = optuna.distributions.CategoricalDistribution
        return {
            "pp": cat(self.degrees),
            "microbatch": cat(MICROBATCHES),
            "partitioner": cat(PARTITIONERS),
            "schedule": cat(SCHEDULES),
            "balance": cat(BALANCES),
            "recompute": cat(RECOMPUTE),
        }

    def from_params(self, params: Mapping[str, Any]) -> Config:
        try:
            point = Config(
                int(params["pp"]),
                int(params["microbatch"]),
                str(params["partitioner"]),
                str(params["schedule"]),
                float(params["balance"]),
                str(params["recompute"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise UserInputError(f"pipeline params need {', '.join(self.distributions())}; got {dict(params)!r}") from exc
        self._check(point)
        return canonical(point)

    def _check(self, c: Config) -> None:
        for value, choices, label in (
            (c.pp, self.degrees, "pp"),
            (c.microbatch, MICROBATCHES, "microbatch"),
            (c.partitioner, PARTITIONERS, "partitioner"),
            (c.schedule, SCHEDULES, "schedule"),
            (c.balance, BALANCES, "balance"),
            (c.recompute, RECOMPUTE, "recompute"),
        ):
            if value not in choices:
                raise UserInputError(f"{label}={value} is outside the space; choose from {', '.join(map(str, choices))}")

    def to_params(self, point: Any) -> dict[str, Any]:
        return dict(canonical(Config(*point))._asdict())

    def point_id(self, point: Any) -> str:
        c = canonical(Config(*point))
        return f"pp{c.pp}-mb{c.microbatch}-{c.partitioner}-{c.schedule}-b{c.balance:g}-rc{c.recompute}"

    def describe(self, point: Any) -> str:
        c = canonical(Config(*point))
        return (
            f"pp={c.pp} dp={self.cluster.devices // c.pp} microbatch={c.microbatch} partitioner={c.partitioner} "
            f"schedule={c.schedule} balance={c.balance:g} recompute={c.recompute}"
        )

    def parse_design(self, text: str) -> Config:
        """Read ``key=value`` pairs as :meth:`describe` writes them (``dp`` is optional and checked)."""
        read, pairs = read_key_values(self, text, "a configuration")
        point = cast(Config, read)  # from_params returns a Config
        if "dp" in pairs and pairs["dp"] != str(self.cluster.devices // point.pp):
            raise UserInputError(f"dp={pairs['dp']} does not match pp={point.pp} on {self.cluster.devices} devices")
        return point

    # ---- evaluation

    def _plan(self, c: Config) -> tuple[ModelProfile, Plan]:
        p = _profile(self.model, self.resolution, c.microbatch)
        return p, partition(p, c.partitioner, c.pp, **self.cluster.rates, balance_tolerance=c.balance)

    def _cannot_partition(self, c: Config) -> str | None:
        """Why no plan exists for ``c`` (None when one does)."""
        dp = self.cluster.devices // c.pp
        if self.global_batch % (dp * c.microbatch):
            return f"global batch {self.global_batch} is not a multiple of dp x microbatch = {dp * c.microbatch}"
        if c.pp > self.blocks:
            return f"{c.pp} stages but the model has {self.blocks} blocks"
        if c.partitioner == "skip-aware" and c.pp > self.pairs:
            return f"skip-aware partitioning places at most {self.pairs} stages (encoder/decoder pairs), got pp={c.pp}"
        return None

    def _too_big(self, memory_gb: float) -> str | None:
        if memory_gb > self.cluster.memory_gb:
            return f"needs {memory_gb:.1f} GB on a device with {self.cluster.memory_gb:g} GB"
        return None

    def infeasible(self, point: Any) -> str | None:
        """Why a configuration cannot run (None when it can)."""
        c = canonical(Config(*point))
        return self._cannot_partition(c) or self._too_big(self._memory_gb(c))

    def _microbatches(self, c: Config) -> int:
        return self.global_batch // (self.cluster.devices // c.pp * c.microbatch)

    def _bound_gb(self, c: Config, p: ModelProfile, plan: Plan) -> float:
        bound = memory_bound(p, plan, schedule=c.schedule, microbatches=self._microbatches(c), recompute=c.recompute == "on")
        return max(bound) / 1e9

    def _memory_gb(self, c: Config) -> float:
        # no plan at all: report the whole device (the point runs at 0 samples/s anyway)
        return float(self.cluster.memory_gb) if self._cannot_partition(c) else self._bound_gb(c, *self._plan(c))

    def evaluate(self, point: Any) -> dict[str, float]:
        c = canonical(Config(*point))
        if c in self._cache:
            return dict(self._cache[c])
        values = {"samples_per_s": 0.0, "memory_gb": float(self.cluster.memory_gb)}
        if self._cannot_partition(c) is None:
            p, plan = self._plan(c)
            values["memory_gb"] = self._bound_gb(c, p, plan)
            if self._too_big(values["memory_gb"]) is None:
                dp = self.cluster.devices // c.pp
                step = simulate(
                    p,
                    plan,
                    self.cluster,
                    schedule=c.schedule,
                    microbatches=self._microbatches(c),
                    recompute=c.recompute == "on",
                    data_parallel=dp,
                )
                values["samples_per_s"] = self.global_batch / hybrid_step_s(self.cluster, plan, step, dp)
        self._cache[c] = values
        return dict(values)

    def all_points(self) -> list[Config]:
        """Every configuration of the space."""
        return list(dict.fromkeys(canonical(Config(*v)) for v in itertools.product(*self._choices())))

    def acquisition_bounds(self) -> tuple[float, float]:
        return FLOOR, float(self.cluster.memory_gb)

    def reference(self) -> FrontReference:
        if self._reference is None:
            space = cached_space(self.name, self.spec(), self._feasible_space)
            if len(space["ids"]) == 0:
                raise UserInputError(f"no configuration of {self.model} runs on {self.cluster_name} at global batch {self.global_batch}")
            self._reference = FrontReference.from_space(space["samples_per_s"], space["memory_gb"], FLOOR, ids=list(space["ids"]))
        return self._reference

    def _feasible_space(self) -> dict[str, np.ndarray]:
        """Every feasible configuration's objectives and point id (the infeasible ones run at 0 samples/s)."""
        points = self.all_points()
        what = f"scoring all {len(points):,} configurations of {self.model} on {self.cluster_name} for the exact front (once: then cached)"
        evaluated = []
        for i, c in enumerate(points):
            if i % 100 == 0:
                report(what, i / len(points))
            evaluated.append((c, self.evaluate(c)))
        report(what, 1.0)
        feasible = [(c, v) for c, v in evaluated if v["samples_per_s"] > 0]
        return {
            "samples_per_s": np.array([v["samples_per_s"] for _, v in feasible], dtype=float),
            "memory_gb": np.array([v["memory_gb"] for _, v in feasible], dtype=float),
            "ids": np.array([self.point_id(c) for c, _ in feasible], dtype=str),
        }

    # ---- operators for the co-evolution engine (Evolvable)

    def neighbours(self, point: Any) -> list[Config]:
        c = canonical(Config(*point))
        out = []
        for field, choices in zip(Config._fields, self._choices(), strict=True):
            for value in choices:
                if value != getattr(c, field):
                    out.append(canonical(c._replace(**{field: value})))
        return [n for n in dict.fromkeys(out) if n != c]

    def _choices(self) -> tuple[tuple[Any, ...], ...]:
        return (self.degrees, MICROBATCHES, PARTITIONERS, SCHEDULES, BALANCES, RECOMPUTE)

    def crossover(self, a: Any, b: Any, rng: random.Random) -> Config:
        return canonical(Config(*(x if rng.random() < 0.5 else y for x, y in zip(a, b, strict=True))))

    def random_point(self, rng: random.Random) -> Config:
        return canonical(Config(*(rng.choice(choices) for choices in self._choices())))

    def features(self, points: Sequence[Any]) -> np.ndarray:
        """log2 pp, log2 microbatch, log2 microbatches per pipeline, balance, recompute, one-hot partitioner and schedule."""
        rows = []
        for point in points:
            c = canonical(Config(*point))
            n_micro = max(self.global_batch / (self.cluster.devices // c.pp * c.microbatch), 0.5)
            rows.append(
                [np.log2(c.pp), np.log2(c.microbatch), np.log2(n_micro), c.balance, float(c.recompute == "on")]
                + [float(c.partitioner == x) for x in PARTITIONERS]
                + [float(c.schedule == x) for x in SCHEDULES]
            )
        return np.asarray(rows, dtype=float).reshape(len(rows), 5 + len(PARTITIONERS) + len(SCHEDULES))

    def cheap_values(self, points: Sequence[Any]) -> dict[str, np.ndarray]:
        return {"memory_gb": np.array([self._memory_gb(Config(*p)) for p in points], dtype=float)}

"""Schedulers of a batch of sequences on the accelerator, the schedule checker, and the metrics.

Methods (:data:`METHODS`), all run by the same list scheduler (:func:`list_schedule`) so that
they differ only in what they give it:

* ``padding``: the batch is one group padded to its longest sequence, in lockstep.
* ``bucketing``: the batch sorted by length and cut into ``buckets`` groups of (nearly) equal
  count, each padded to its own longest; groups may overlap on the engines.
* ``length-aware``: one group per sequence (no padding); tasks are prioritised by their
  upward rank (HEFT's rank: the longest path from the task to the end of the DAG, in cycles),
  so a free engine takes the ready task of whichever sequence has the most work left behind it,
  and slots left by one sequence's dependencies are filled by another's tasks.
* ``fifo``: the length-aware groups without the rank (sequences in arrival order, then task
  order): the ablation of the rank.
* ``realloc``: the length-aware groups and rank on a PE split re-allocated for this batch's
  length mix: the splits of the same PE budget and cores with the least lower bound for the batch
  (:func:`sim.fpga.alloc.candidates`, :data:`REALLOC_CANDIDATES` of them, and the design's own) are
  list-scheduled and the shortest kept. ``length-aware`` is its fixed-split ablation.

:func:`list_schedule` is a non-delay list scheduler: whenever a core of an engine is idle and a
task of that engine is ready, it starts the ready task of highest priority there.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from coevo.sim.errors import CoevoError, UserInputError, unknown_name
from coevo.sim.fpga.alloc import candidates
from coevo.sim.fpga.dag import Task, build_tasks, check_lengths, useful_ops_total
from coevo.sim.fpga.model import ENGINES, Accelerator, AttentionConfig, TransformerShape

Method = Literal["padding", "bucketing", "length-aware", "fifo", "realloc"]
METHODS: tuple[str, ...] = ("padding", "bucketing", "length-aware", "fifo", "realloc")
REALLOC_CANDIDATES = 5
"""Splits ``realloc`` list-schedules per batch: the least bound first, then the next by bound (and the design's own)."""


class InvalidScheduleError(CoevoError):
    """A schedule breaks a dependency or an engine's capacity (the message says where)."""


@dataclass(frozen=True)
class Schedule:
    """Tasks with their start cycle and core.

    Attributes:
        tasks: the DAG.
        start: start cycle per task id.
        core: core index (within the task's engine) per task id.
        method: how it was made.
        split: the PE split (matmul, attention, softmax) the task cycles were computed on, when the
            scheduler chose it (``realloc``); empty when it is the accelerator's own.
    """

    tasks: tuple[Task, ...]
    start: tuple[int, ...]
    core: tuple[int, ...]
    method: str
    split: tuple[int, ...] = ()

    @property
    def makespan(self) -> int:
        """Cycles from the first start to the last end."""
        return max((s + t.cycles for s, t in zip(self.start, self.tasks, strict=True)), default=0)


@dataclass(frozen=True)
class Metrics:
    """What a schedule achieves.

    Attributes:
        makespan_cycles: cycles of the batch.
        makespan_ms: at the device clock.
        pe_utilization: useful lane operations / (all lanes x makespan), in [0, 1].
        padding_waste: share of the executed lane operations spent on padding tokens.
        engine_busy: per engine, share of its core-cycles busy.
        tasks: number of tasks.
        split: the PE split (matmul, attention, softmax) the schedule ran on.
    """

    makespan_cycles: int
    makespan_ms: float
    pe_utilization: float
    padding_waste: float
    engine_busy: dict[str, float]
    tasks: int
    split: tuple[int, ...] = ()


def upward_ranks(tasks: Sequence[Task]) -> list[int]:
    """HEFT upward rank: ``rank(t) = cycles(t) + max(rank(s) for s in successors(t))`` (0 for none)."""
    succs: list[list[int]] = [[] for _ in tasks]
    for t in tasks:
        for p in t.preds:
            succs[p].append(t.id)
    rank = [0] * len(tasks)
    for t in reversed(tasks):  # ids are topological
        rank[t.id] = t.cycles + max((rank[s] for s in succs[t.id]), default=0)
    return rank


def list_schedule(tasks: Sequence[Task], accel: Accelerator, priority: Sequence[float], method: str = "list") -> Schedule:
    """Non-delay list scheduling: an idle core starts the ready task of its engine with the highest ``priority``.

    Ties go to the lower task id. Runs in O(n log n) for n tasks.
    """
    n = len(tasks)
    succs: list[list[int]] = [[] for _ in range(n)]
    missing = [len(t.preds) for t in tasks]
    for t in tasks:
        for p in t.preds:
            succs[p].append(t.id)
    ready: dict[str, list[tuple[float, int]]] = {e: [] for e in ENGINES}
    free: dict[str, list[int]] = {e: list(range(accel.capacity(e))) for e in ENGINES}
    for t in tasks:
        if not t.preds:
            heapq.heappush(ready[t.engine], (-priority[t.id], t.id))
    start, core = [0] * n, [0] * n
    running: list[tuple[int, int]] = []  # (end cycle, task id)
    now, done = 0, 0
    while done < n:
        for e in ENGINES:
            while ready[e] and free[e]:
                _, tid = heapq.heappop(ready[e])
                c = free[e].pop(0)
                start[tid], core[tid] = now, c
                heapq.heappush(running, (now + tasks[tid].cycles, tid))
        if not running:
            raise InvalidScheduleError("the task graph has a cycle or an unknown engine: nothing is ready and nothing runs")
        now = running[0][0]
        while running and running[0][0] == now:
            _, tid = heapq.heappop(running)
            done += 1
            free[tasks[tid].engine].append(core[tid])
            free[tasks[tid].engine].sort()
            for s in succs[tid]:
                missing[s] -= 1
                if missing[s] == 0:
                    heapq.heappush(ready[tasks[s].engine], (-priority[s], s))
    return Schedule(tuple(tasks), tuple(start), tuple(core), method)


def groups_for(lengths: Sequence[int], method: str, buckets: int = 4) -> list[list[int]]:
    """How ``method`` groups the batch (module doc)."""
    lengths = check_lengths(lengths)
    if method == "padding":
        return [list(lengths)]
    if method == "bucketing":
        if buckets < 1:
            raise UserInputError(f"buckets must be >= 1; got {buckets}")
        order = sorted(lengths)
        return [list(map(int, part)) for part in np.array_split(np.array(order), min(buckets, len(order)))]
    if method in ("length-aware", "fifo", "realloc"):
        return [[x] for x in lengths]
    raise unknown_name("scheduler", method, METHODS)


def schedule_batch(
    lengths: Sequence[int], accel: Accelerator, shape: TransformerShape, attn: AttentionConfig, method: str, buckets: int = 4
) -> Schedule:
    """Schedule one batch with ``method`` (:data:`METHODS`).

    ``realloc`` re-allocates ``accel``'s PEs for this batch (same budget and cores; module doc); the
    schedule records the split it ran on (:attr:`Schedule.split`), and :func:`check_schedule` checks
    it against ``accel``'s budget. It is never longer than ``length-aware``'s (the design's own split
    is a candidate).
    """
    groups = groups_for(lengths, method, buckets)
    if method == "realloc":
        best: Schedule | None = None
        for option in candidates(groups, accel, shape, attn, REALLOC_CANDIDATES):
            tasks = build_tasks(groups, accel.with_split(option.split), shape, attn)
            s = dataclasses.replace(list_schedule(tasks, accel, upward_ranks(tasks), method), split=option.split)
            if best is None or s.makespan < best.makespan:  # ties: the earlier candidate (the least bound)
                best = s
        assert best is not None  # candidates() returns at least the design's own split
        return best
    tasks = build_tasks(groups, accel, shape, attn)
    if method == "fifo":
        priority: Sequence[float] = [-float(t.id) for t in tasks]  # arrival order: earlier sequence, earlier task first
    else:
        priority = upward_ranks(tasks)
    return list_schedule(tasks, accel, priority, method)


def check_schedule(schedule: Schedule, accel: Accelerator) -> None:
    """Raise :class:`InvalidScheduleError` unless every dependency and every core's exclusivity holds.

    Checks: a re-allocated split (:attr:`Schedule.split`) spends exactly ``accel``'s PE budget and
    gives every core of every engine at least one PE; one start per task, starts >= 0; each task
    starts after all its predecessors end; each core index exists on its engine; no two tasks
    overlap on one core; at no time does an engine run more tasks than its cores (a sweep over
    start/end events).
    """
    tasks, start, core = schedule.tasks, schedule.start, schedule.core
    if schedule.split:
        split = schedule.split
        if len(split) != 3 or sum(split) != accel.pes or any(p < accel.capacity(e) for p, e in zip(split, ENGINES, strict=True)):
            raise InvalidScheduleError(
                f"the re-allocated split {split} must give the {len(ENGINES)} engines {accel.pes} PEs in all and each core at least "
                f"one (cores {accel.cores})"
            )
    if not (len(tasks) == len(start) == len(core)):
        raise InvalidScheduleError(f"{len(tasks)} tasks but {len(start)} starts and {len(core)} core assignments")
    for t in tasks:
        if start[t.id] < 0:
            raise InvalidScheduleError(f"task {t.id} ({t.kind}) starts at {start[t.id]} < 0")
        for p in t.preds:
            if start[p] + tasks[p].cycles > start[t.id]:
                raise InvalidScheduleError(
                    f"task {t.id} ({t.kind}, group {t.group}, layer {t.layer}) starts at {start[t.id]} before its predecessor "
                    f"{p} ({tasks[p].kind}) ends at {start[p] + tasks[p].cycles}"
                )
        if not 0 <= core[t.id] < accel.capacity(t.engine):
            raise InvalidScheduleError(f"task {t.id} is on core {core[t.id]}; the {t.engine} engine has {accel.capacity(t.engine)}")
    by_core: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
    events: dict[str, list[tuple[int, int]]] = {e: [] for e in ENGINES}
    for t in tasks:
        if t.cycles == 0:
            continue
        by_core.setdefault((t.engine, core[t.id]), []).append((start[t.id], start[t.id] + t.cycles, t.id))
        events[t.engine] += [(start[t.id], 1), (start[t.id] + t.cycles, -1)]
    for (engine, c), spans in by_core.items():
        spans.sort()
        for (_, e0, a), (s1, _, b) in itertools.pairwise(spans):
            if s1 < e0:
                raise InvalidScheduleError(f"tasks {a} and {b} overlap on {engine} core {c} ({s1} < {e0})")
    for engine, evs in events.items():
        level = 0
        for at, delta in sorted(evs):  # ends (-1) sort before starts (+1) at the same cycle
            level += delta
            if level > accel.capacity(engine):
                raise InvalidScheduleError(
                    f"{level} tasks run at once on the {engine} engine at cycle {at}; it has {accel.capacity(engine)} cores"
                )


def metrics(schedule: Schedule, accel: Accelerator, lengths: Sequence[int], shape: TransformerShape, attn: AttentionConfig) -> Metrics:
    """Makespan, PE utilisation, padding waste and engine busy shares of a schedule of ``lengths``."""
    span = schedule.makespan
    executed = sum(t.executed_ops for t in schedule.tasks)
    useful = useful_ops_total(lengths, shape, attn)
    lanes = accel.pes * accel.lanes
    busy = {}
    for e in ENGINES:
        cycles = sum(t.cycles for t in schedule.tasks if t.engine == e)
        busy[e] = cycles / (span * accel.capacity(e)) if span else 0.0
    return Metrics(
        makespan_cycles=span,
        makespan_ms=accel.cycles_to_ms(span),
        pe_utilization=useful / (lanes * span) if span else 0.0,
        padding_waste=max(0.0, 1.0 - useful / executed) if executed else 0.0,
        engine_busy=busy,
        tasks=len(schedule.tasks),
        split=schedule.split or accel.split,
    )


def lower_bound(tasks: Sequence[Task], accel: Accelerator) -> int:
    """A makespan no schedule beats: the longer of the critical path and the busiest engine's work over its cores."""
    if not tasks:
        return 0
    path = max(upward_ranks(tasks))
    load = max(sum(t.cycles for t in tasks if t.engine == e) / accel.capacity(e) for e in ENGINES)
    return max(path, int(np.ceil(load)))


def compare_methods(
    batches: Sequence[Sequence[int]],
    accel: Accelerator,
    shape: TransformerShape,
    attn: AttentionConfig,
    methods: Sequence[str] = METHODS,
    buckets: int = 4,
    check: bool = True,
) -> dict[str, list[Metrics]]:
    """Every method on every batch (the same batches for all), each schedule checked unless ``check`` is False."""
    out: dict[str, list[Metrics]] = {}
    for method in methods:
        rows = []
        for batch in batches:
            s = schedule_batch(batch, accel, shape, attn, method, buckets)
            if check:
                check_schedule(s, accel)
            rows.append(metrics(s, accel, batch, shape, attn))
        out[method] = rows
    return out

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
  list-scheduled and the shortest kept. ``length-aware`` is its fixed-split ablation. A batch on
  another split than the batch before it (the first batch: the design's own split) first pays
  :attr:`~sim.fpga.model.Accelerator.reconfig_cycles`; so a change is made only when the shorter
  schedule saves more than that, and the previous split is a candidate too. That per-batch rule is
  ``myopic`` (the default :attr:`~sim.fpga.model.Accelerator.change_rule`); ``amortized`` changes split by
  the ski-rental break-even rule over the batches since the last change (:func:`realloc_stream`,
  :mod:`sim.fpga.switch`, which also gives the hindsight optimum).

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
from coevo.sim.fpga.switch import BreakEven

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
        reconfig_cycles: cycles spent re-configuring the PE split before the first task (``realloc``, when
            the split differs from the previous batch's); every task starts after them.
    """

    tasks: tuple[Task, ...]
    start: tuple[int, ...]
    core: tuple[int, ...]
    method: str
    split: tuple[int, ...] = ()
    reconfig_cycles: int = 0

    @property
    def makespan(self) -> int:
        """Cycles from cycle 0 (the reconfiguration, if any, then the first task) to the last end."""
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
        reconfig_cycles: cycles of the makespan spent changing the PE split before the batch.
    """

    makespan_cycles: int
    makespan_ms: float
    pe_utilization: float
    padding_waste: float
    engine_busy: dict[str, float]
    tasks: int
    split: tuple[int, ...] = ()
    reconfig_cycles: int = 0


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
    lengths: Sequence[int],
    accel: Accelerator,
    shape: TransformerShape,
    attn: AttentionConfig,
    method: str,
    buckets: int = 4,
    previous: tuple[int, ...] | None = None,
) -> Schedule:
    """Schedule one batch with ``method`` (:data:`METHODS`).

    ``realloc`` re-allocates ``accel``'s PEs for this batch (same budget and cores; module doc); the
    schedule records the split it ran on (:attr:`Schedule.split`), and :func:`check_schedule` checks
    it against ``accel``'s budget. ``previous`` is the split the array holds from the batch before
    (None: the design's own, ``accel.split``); running on another one first costs
    ``accel.reconfig_cycles`` (:attr:`Schedule.reconfig_cycles`, every start shifted by it), so a
    candidate wins only when its makespan plus that cost is strictly shorter, and with a cost the
    previous split is a candidate too. Without a cost the choice is the shortest candidate's, whatever
    ``previous``. It is never longer than ``length-aware``'s when ``previous`` is the design's split. This per-batch
    choice is the ``myopic`` change rule; a stream under ``accel.change_rule`` runs through :func:`realloc_stream`.

    Raises:
        UserInputError: bad lengths, or a ``previous`` split that is not one of ``accel``'s PE budget and cores.
    """
    groups = groups_for(lengths, method, buckets)
    if method == "realloc":
        return _realloc(groups, accel, shape, attn, accel.split if previous is None else _check_previous(previous, accel))
    tasks = build_tasks(groups, accel, shape, attn)
    if method == "fifo":
        priority: Sequence[float] = [-float(t.id) for t in tasks]  # arrival order: earlier sequence, earlier task first
    else:
        priority = upward_ranks(tasks)
    return list_schedule(tasks, accel, priority, method)


def _is_split(split: Sequence[int], accel: Accelerator) -> bool:
    """Whether ``split`` gives the engines ``accel``'s whole PE budget and every core of every engine one PE at least."""
    enough = all(p >= accel.capacity(e) for p, e in zip(split, ENGINES, strict=True)) if len(split) == len(ENGINES) else False
    return enough and sum(split) == accel.pes


def _check_previous(previous: Sequence[int], accel: Accelerator) -> tuple[int, int, int]:
    """``previous`` as a split of ``accel``'s budget, or UserInputError saying what it must be."""
    if not _is_split(previous, accel):
        raise UserInputError(
            f"previous split {tuple(previous)} must give the 3 engines {accel.pes} PEs in all and each core one at least "
            f"(cores {accel.cores})"
        )
    return (int(previous[0]), int(previous[1]), int(previous[2]))


def _realloc(
    groups: list[list[int]], accel: Accelerator, shape: TransformerShape, attn: AttentionConfig, previous: tuple[int, int, int]
) -> Schedule:
    """``realloc``'s schedule of ``groups`` when the array holds ``previous`` (:func:`schedule_batch`)."""
    cost = accel.reconfig_cycles
    splits = [option.split for option in candidates(groups, accel, shape, attn, REALLOC_CANDIDATES)]
    if cost > 0:  # staying costs nothing: the previous split first, so that it wins ties
        splits = [previous] + [s for s in splits if s != previous]
    best: Schedule | None = None
    best_total = 0
    for split in splits:
        s = _on_split(groups, accel, shape, attn, split)
        pay = cost if split != previous else 0
        if best is None or s.makespan + pay < best_total:  # ties: the earlier (the previous split, then the least bound)
            best, best_total = s, s.makespan + pay
    assert best is not None  # candidates() returns at least the design's own split
    return reconfigured(best, cost if best.split != previous else 0)


def _on_split(
    groups: list[list[int]], accel: Accelerator, shape: TransformerShape, attn: AttentionConfig, split: tuple[int, int, int]
) -> Schedule:
    """``realloc``'s list schedule of ``groups`` on ``split`` (upward rank), before any reconfiguration."""
    tasks = build_tasks(groups, accel.with_split(split), shape, attn)
    return dataclasses.replace(list_schedule(tasks, accel, upward_ranks(tasks), "realloc"), split=split)


def reconfigured(schedule: Schedule, pay: int) -> Schedule:
    """``schedule`` after a reconfiguration of ``pay`` cycles (0: none): every task starts that much later."""
    if not pay:
        return schedule
    return dataclasses.replace(schedule, reconfig_cycles=pay, start=tuple(x + pay for x in schedule.start))


def split_makespans(
    lengths: Sequence[int], accel: Accelerator, shape: TransformerShape, attn: AttentionConfig, splits: Sequence[tuple[int, int, int]]
) -> dict[tuple[int, int, int], int]:
    """``realloc``'s makespan of the batch on each of ``splits`` (no reconfiguration): a row of :mod:`sim.fpga.switch`'s tables."""
    groups = groups_for(lengths, "realloc")
    return {split: _on_split(groups, accel, shape, attn, _check_previous(split, accel)).makespan for split in splits}


def split_schedule(
    lengths: Sequence[int], accel: Accelerator, shape: TransformerShape, attn: AttentionConfig, split: tuple[int, int, int], pay: int = 0
) -> Schedule:
    """``realloc``'s schedule of the batch on ``split`` after a reconfiguration of ``pay`` cycles (0: the split is held).

    Raises:
        UserInputError: ``split`` is not one of ``accel``'s PE budget and cores.
    """
    return reconfigured(_on_split(groups_for(lengths, "realloc"), accel, shape, attn, _check_previous(split, accel)), pay)


def realloc_candidates(
    lengths: Sequence[int], accel: Accelerator, shape: TransformerShape, attn: AttentionConfig
) -> list[tuple[int, int, int]]:
    """The splits ``realloc`` list-schedules for the batch besides the held one (:func:`sim.fpga.alloc.candidates`)."""
    return [option.split for option in candidates(groups_for(lengths, "realloc"), accel, shape, attn, REALLOC_CANDIDATES)]


def realloc_stream(batches: Sequence[Sequence[int]], accel: Accelerator, shape: TransformerShape, attn: AttentionConfig) -> list[Schedule]:
    """``realloc`` over ``batches`` in order, from ``accel.split``, changing split by ``accel.change_rule`` (:mod:`sim.fpga.switch`).

    ``myopic``: :func:`schedule_batch` per batch, carrying the split. ``amortized``: the break-even rule
    (:class:`~sim.fpga.switch.BreakEven`) watching the start split and every batch's candidates so far; each batch is
    list-scheduled on every watched split, and a batch on another split than the one before pays ``accel.reconfig_cycles``.
    """
    if accel.change_rule == "myopic":
        out, previous = [], None
        for lengths in batches:
            out.append(schedule_batch(lengths, accel, shape, attn, "realloc", previous=previous))
            previous = out[-1].split
        return out
    rule, held, out = BreakEven(accel.split, accel.reconfig_cycles), accel.split, []
    for lengths in batches:
        groups = groups_for(lengths, "realloc")
        watched = rule.offer(realloc_candidates(lengths, accel, shape, attn))
        made = {split: _on_split(groups, accel, shape, attn, split) for split in watched}
        chosen = rule.step({split: s.makespan for split, s in made.items()})
        out.append(reconfigured(made[chosen], accel.reconfig_cycles if chosen != held else 0))
        held = chosen
    return out


def check_schedule(schedule: Schedule, accel: Accelerator) -> None:
    """Raise :class:`InvalidScheduleError` unless every dependency and every core's exclusivity holds.

    Checks: a re-allocated split (:attr:`Schedule.split`) spends exactly ``accel``'s PE budget and
    gives every core of every engine at least one PE; a reconfiguration (:attr:`Schedule.reconfig_cycles`)
    is not negative, is only charged on a re-allocated split, and no task starts during it; one start per task, starts >= 0; each task
    starts after all its predecessors end; each core index exists on its engine; no two tasks
    overlap on one core; at no time does an engine run more tasks than its cores (a sweep over
    start/end events).
    """
    tasks, start, core = schedule.tasks, schedule.start, schedule.core
    if schedule.split:
        split = schedule.split
        if not _is_split(split, accel):
            raise InvalidScheduleError(
                f"the re-allocated split {split} must give the {len(ENGINES)} engines {accel.pes} PEs in all and each core at least "
                f"one (cores {accel.cores})"
            )
    if schedule.reconfig_cycles < 0 or (schedule.reconfig_cycles and not schedule.split):
        raise InvalidScheduleError(
            f"a reconfiguration of {schedule.reconfig_cycles} cycles must be >= 0 and only precede a re-allocated split "
            f"(split {schedule.split or 'not re-allocated'})"
        )
    early = [t.id for t in tasks if start[t.id] < schedule.reconfig_cycles] if len(start) == len(tasks) else []
    if early:
        raise InvalidScheduleError(
            f"task {early[0]} starts at {start[early[0]]}, during the {schedule.reconfig_cycles}-cycle reconfiguration of the PE split"
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
        reconfig_cycles=schedule.reconfig_cycles,
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
    """Every method on every batch (the same batches for all), each schedule checked unless ``check`` is False.

    The batches run in order: ``realloc`` starts on the design's split and carries each batch's split to
    the next, paying ``accel.reconfig_cycles`` on every change, under ``accel.change_rule`` (:func:`realloc_stream`).
    """
    out: dict[str, list[Metrics]] = {}
    for method in methods:
        if method == "realloc":
            made = realloc_stream(batches, accel, shape, attn)
        else:
            made = [schedule_batch(batch, accel, shape, attn, method, buckets) for batch in batches]
        if check:
            for s in made:
                check_schedule(s, accel)
        out[method] = [metrics(s, accel, batch, shape, attn) for s, batch in zip(made, batches, strict=True)]
    return out

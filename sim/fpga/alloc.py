"""Length-aware PE re-allocation: per batch, the PE split between the engines that balances the batch's length mix.

The paper's scheduler re-allocates hardware resources to the pipeline stages by sequence length so
that no stage idles while another is the bottleneck. Here the stages are the three engines
(:data:`~coevo.sim.fpga.model.ENGINES`): the matmul engine's work grows linearly with a sequence's
length, the attention and softmax engines' work (dense or the top-k pre-score) quadratically, so
the split that balances a batch of short sentences starves the attention engine on a batch with a
long one, and the other way round.

:func:`reallocate` keeps the PE budget (``accel.pes``) and the cores per engine, and chooses the
split that minimises the schedule's lower bound for the batch's groups::

    bound(split) = max(critical path, max over engines of ceil(engine work / its cores))

Every engine's costs depend on its own PEs only (its buffer and DDR shares are its PEs over the
fixed total, :func:`~coevo.sim.fpga.model.engine_core`), so each engine's work and each group's
chain are tabulated once per PE count, and every split ``(m, a, s)`` with ``m + a + s = pes`` is
then scored from the tables: the minimiser is exact for the bound, not a heuristic search. Ties go
to the smaller total engine work, then to the given split. A split whose GEMM tiles do not fit an
engine's buffer share is never chosen. The list scheduler then runs on the chosen split
(:func:`sim.fpga.sched.schedule_batch` with ``realloc``).

What the model does not charge: reconfiguring the PE array between batches (the paper switches
its pipeline configuration per batch too; its cost is left out here, as a one-off per batch).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from coevo.sim.errors import UserInputError
from coevo.sim.fpga.dag import check_lengths, group_cycles
from coevo.sim.fpga.model import ENGINES, Accelerator, AttentionConfig, Core, TransformerShape, engine_core, tile_bytes

MAX_STEPS = 96
"""Up to this many PEs every split is scored; above, matmul and attention PEs move in steps of ``ceil(pes / MAX_STEPS)``."""


@dataclass(frozen=True)
class Allocation:
    """A re-allocation's answer.

    Attributes:
        split: PEs per engine (matmul, attention, softmax), summing to the budget.
        bound_cycles: the lower bound of the batch on that split (module doc).
        given_bound_cycles: the same bound on the split the accelerator was given.
    """

    split: tuple[int, int, int]
    bound_cycles: int
    given_bound_cycles: int


def _tables(
    groups: Sequence[Sequence[int]], accel: Accelerator, shape: TransformerShape, attn: AttentionConfig, counts: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Per engine and PE count ``p`` in ``counts``: its work over the batch, and each distinct group's chain share.

    Returns ``load[e, p]`` (cycles on one core x cores, i.e. all of the engine's task cycles; ``inf`` where
    its tiles do not fit) and ``chain[e, g, p]`` (cycles the critical path of group kind ``g`` spends on
    engine ``e``).
    """
    kinds = Counter((len(g), max(g)) for g in (check_lengths(g) for g in groups))
    total, cores = accel.pes, accel.cores
    need = tile_bytes(accel.tile_m, accel.tile_n, accel.tile_k)
    load = np.full((3, total + 1), np.inf)  # counts not tabulated stay inf: never chosen
    chain = np.full((3, len(kinds), total + 1), np.inf)
    heads = np.array([1.0, shape.n_heads, shape.n_heads])
    for p in counts:
        made = [engine_core(accel.device, e, p, c, total, accel.lanes) if p >= c else None for e, c in zip(ENGINES, cores, strict=True)]
        valid = [c is not None and (c.engine == "softmax" or need <= c.buffer_bytes) for c in made]
        filler = next((c for c in made if c is not None), None)
        if filler is None or not any(valid):
            continue
        trio: tuple[Core, Core, Core] = (made[0] or filler, made[1] or filler, made[2] or filler)  # a filler's costs are not kept
        work = np.zeros(3)
        for g, ((n, padded), count) in enumerate(kinds.items()):
            linear, attention = group_cycles(n, padded, trio, accel, shape, attn)
            part = np.zeros(3)
            part[0] = sum(linear.values())
            for engine, cycles in attention.values():
                part[ENGINES.index(engine)] += cycles
            work += count * part * heads * shape.n_layers
            for e in range(3):
                if valid[e]:
                    chain[e, g, p] = part[e] * shape.n_layers
        for e in range(3):
            if valid[e]:
                load[e, p] = work[e]
    return load, chain


def _bound(load: np.ndarray, chain: np.ndarray, cores: Sequence[int], split: Sequence[int]) -> float:
    loads = max(np.ceil(load[e, split[e]] / cores[e]) for e in range(3))
    path = float(np.max(sum(chain[e, :, split[e]] for e in range(3))))
    return max(float(loads), path)


def reallocate(groups: Sequence[Sequence[int]], accel: Accelerator, shape: TransformerShape, attn: AttentionConfig) -> Allocation:
    """The PE split of ``accel.pes`` that minimises the lower bound of ``groups`` (module doc).

    Args:
        groups: the batch as the scheduler groups it (one group per sequence for ``realloc``).
        accel: the design: its PE budget, cores, tiles and device are kept; its split is the fallback on ties.
        shape: the transformer.
        attn: the attention method.

    Raises:
        UserInputError: no group, an empty group or a length that is not a positive integer.
    """
    if len(groups) == 0:
        raise UserInputError("no sequences to allocate PEs for: the length mix is empty; give at least one positive length")
    total, cores = accel.pes, accel.cores
    step = max(1, -(-total // MAX_STEPS))
    grid = np.arange(step, total + 1, step)  # matmul and attention PEs; softmax takes the rest
    rest = total - grid
    counts = sorted({int(p) for p in (*grid, *rest[rest > 0], *accel.split)})
    load, chain = _tables(groups, accel, shape, attn, counts)
    best: tuple[float, float, int] = (np.inf, np.inf, 0)  # (bound, total work per core, distance to the given split)
    pick = (accel.split[0], accel.split[1])
    for m in grid:
        soft = total - m - grid
        ok = soft >= 1
        si = np.where(ok, soft, 0)
        with np.errstate(invalid="ignore"):
            per_core = (load[0, m] / cores[0], load[1, grid] / cores[1], load[2, si] / cores[2])
            loads = np.maximum(np.maximum(np.ceil(per_core[0]), np.ceil(per_core[1])), np.ceil(per_core[2]))
            path = np.max(chain[0, :, m][:, None] + chain[1][:, grid] + chain[2][:, si], axis=0)
            bound = np.where(ok, np.maximum(loads, path), np.inf)
            work = per_core[0] + per_core[1] + per_core[2]
        low = float(np.min(bound))
        if low > best[0]:
            continue
        for j in np.flatnonzero(bound == low):
            key = (low, float(work[j]), abs(int(m) - accel.split[0]) + abs(int(grid[j]) - accel.split[1]))
            if key < best:
                best, pick = key, (int(m), int(grid[j]))
    given = _bound(load, chain, cores, accel.split)
    if not np.isfinite(best[0]):
        raise UserInputError(
            f"no split of {total} PEs fits the tiles {accel.tile_m}x{accel.tile_n}x{accel.tile_k} in every engine's buffer share; "
            "use smaller tiles or more PEs"
        )
    if given <= best[0]:
        return Allocation((accel.split[0], accel.split[1], accel.split[2]), int(given), int(given))
    return Allocation((pick[0], pick[1], total - pick[0] - pick[1]), int(best[0]), int(given))


__all__ = ["Allocation", "reallocate"]

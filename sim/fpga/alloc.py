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
engine's buffer share is never chosen. The bound is a proxy for the list schedule's makespan, so
``realloc`` (:func:`sim.fpga.sched.schedule_batch`) list-schedules the :func:`candidates` (the few
splits of least bound and the design's own) and keeps the shortest schedule.

Changing the split between batches costs :attr:`~sim.fpga.model.Accelerator.reconfig_cycles`; the
bound here leaves it out (it is the same for every split but the previous one), and ``realloc``
charges it when it compares the candidates' list schedules, the previous split among them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from coevo.sim.errors import UserInputError
from coevo.sim.fpga.dag import attention_chain_by_pes, check_lengths
from coevo.sim.fpga.model import ENGINES, Accelerator, AttentionConfig, TransformerShape, engine_core, gemm_cycles_by_pes, tile_bytes

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
    engine ``e``). Every engine's cycles are computed over all counts at once (``*_by_pes``: the same integers
    as core by core, and the same floating-point sums in the same order); a count where an engine has no
    core or its tiles do not fit is never kept.
    """
    kinds = Counter((len(g), max(g)) for g in (check_lengths(g) for g in groups))
    total, cores = accel.pes, accel.cores
    need = tile_bytes(accel.tile_m, accel.tile_n, accel.tile_k)
    load = np.full((3, total + 1), np.inf)  # counts not tabulated stay inf: never chosen
    chain = np.full((3, len(kinds), total + 1), np.inf)
    heads = np.array([1.0, shape.n_heads, shape.n_heads])
    at = np.asarray(counts, dtype=np.int64)
    valid = np.zeros((3, len(at)), dtype=bool)
    per_engine = []
    for e, (engine, c) in enumerate(zip(ENGINES, cores, strict=True)):
        made = [engine_core(accel.device, engine, p, c, total, accel.lanes) if p >= c else None for p in counts]
        valid[e] = [m is not None and (engine == "softmax" or need <= m.buffer_bytes) for m in made]
        # a count without a core gets a 1-PE stand-in: its cycles are computed and never kept
        per_engine.append((np.array([m.pes if m else 1 for m in made]), np.array([m.ddr_bytes_per_cycle if m else 1.0 for m in made])))
    work = np.zeros((3, len(at)))
    for g, ((n, padded), count) in enumerate(kinds.items()):
        part = np.zeros((3, len(at)))
        part[0] = _linear_by_pes(n, padded, per_engine[0], accel, shape)
        for _, engine, cycles in attention_chain_by_pes(n, padded, per_engine[1], per_engine[2], accel, shape, attn):
            part[ENGINES.index(engine)] += cycles * shape.n_layers
        work += count * part * heads[:, None]
        chain[:, g, at] = np.where(valid, part, np.inf)
    load[:, at] = np.where(valid, work, np.inf)
    return load, chain


def _linear_by_pes(n: int, padded: int, matmul: tuple[np.ndarray, np.ndarray], accel: Accelerator, shape: TransformerShape) -> np.ndarray:
    """A group's linear cycles over all layers on matmul engines of the given (PEs, DDR bytes per cycle), one per PE count.

    The cycles :func:`sim.fpga.dag.linear_cycles` gives core by core, summed over the layers (layers differ only in
    compressed weights' bytes; :func:`~sim.fpga.model.gemm_cycles_by_pes`).
    """
    tm, tn, tk, ov, lanes = accel.tile_m, accel.tile_n, accel.tile_k, accel.overhead_cycles, accel.lanes
    d, f = shape.d_model, shape.d_ff
    rows = n * padded
    work = np.zeros(len(matmul[0]), dtype=np.int64)
    for layer in range(shape.n_layers) if shape.weight_bits else range(1):
        wb = shape.linear_bits(layer)
        for kk, nn, kind in ((d, 3 * d, "qkv"), (d, d, "out"), (d, f, "ffn1"), (f, d, "ffn2")):
            work += gemm_cycles_by_pes(rows, kk, nn, *matmul, lanes, tm, tn, tk, ov, b_bits=wb[kind])
    return work if shape.weight_bits else work * shape.n_layers


def _scores(
    groups: Sequence[Sequence[int]], accel: Accelerator, shape: TransformerShape, attn: AttentionConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Every split's bound and total work per core for ``groups``.

    Returns ``grid`` (the PE counts matmul and attention may take), ``bound[i, j]`` and ``work[i, j]``
    for the split ``(grid[i], grid[j], pes - grid[i] - grid[j])`` (``inf`` where it is not a design), and
    the bound on ``accel``'s own split.
    """
    if len(groups) == 0:
        raise UserInputError("no sequences to allocate PEs for: the length mix is empty; give at least one positive length")
    total, cores = accel.pes, accel.cores
    step = max(1, -(-total // MAX_STEPS))
    grid = np.arange(step, total + 1, step)  # matmul and attention PEs; softmax takes the rest
    rest = total - grid
    counts = sorted({int(p) for p in (*grid, *rest[rest > 0], *accel.split)})
    load, chain = _tables(groups, accel, shape, attn, counts)
    bound = np.full((len(grid), len(grid)), np.inf)
    work = np.full((len(grid), len(grid)), np.inf)
    for i, m in enumerate(grid):
        soft = total - m - grid
        ok = soft >= 1
        si = np.where(ok, soft, 0)
        with np.errstate(invalid="ignore"):
            per_core = (load[0, m] / cores[0], load[1, grid] / cores[1], load[2, si] / cores[2])
            loads = np.maximum(np.maximum(np.ceil(per_core[0]), np.ceil(per_core[1])), np.ceil(per_core[2]))
            path = np.max(chain[0, :, m][:, None] + chain[1][:, grid] + chain[2][:, si], axis=0)
            bound[i] = np.where(ok, np.maximum(loads, path), np.inf)
            work[i] = np.where(ok, per_core[0] + per_core[1] + per_core[2], np.inf)
    gm, ga, gs = accel.split
    given_loads = max(float(np.ceil(load[e, p] / cores[e])) for e, p in enumerate(accel.split))
    given = max(given_loads, float(np.max(chain[0, :, gm] + chain[1, :, ga] + chain[2, :, gs])))
    return grid, bound, work, given


def _pick(grid: np.ndarray, bound: np.ndarray, work: np.ndarray, accel: Accelerator, given: float, what: str) -> Allocation:
    """The least ``bound`` (ties: least work, then nearest ``accel.split``); ``accel.split`` itself when it is as good."""
    best = float(np.min(bound))
    if not np.isfinite(best):
        raise UserInputError(
            f"no split of {accel.pes} PEs fits the tiles {accel.tile_m}x{accel.tile_n}x{accel.tile_k} in every engine's buffer "
            f"share for {what}; use smaller tiles or more PEs"
        )
    split = accel.split
    if given <= best:
        return Allocation((split[0], split[1], split[2]), int(given), int(given))
    ties = np.argwhere(bound == best)
    i, j = min(ties, key=lambda ij: (work[ij[0], ij[1]], abs(int(grid[ij[0]]) - split[0]) + abs(int(grid[ij[1]]) - split[1])))
    m, a = int(grid[i]), int(grid[j])
    return Allocation((m, a, accel.pes - m - a), int(best), int(given))


def candidates(
    groups: Sequence[Sequence[int]], accel: Accelerator, shape: TransformerShape, attn: AttentionConfig, count: int = 5
) -> list[Allocation]:
    """:func:`reallocate`'s split first, then the next ``count - 1`` splits by (bound, total work), then ``accel.split`` if not among them.

    The bound is a proxy: the list schedule of the second-best split is sometimes the shorter one,
    so ``realloc`` list-schedules these and keeps the shortest (:func:`sim.fpga.sched.schedule_batch`).
    """
    grid, bound, work, given = _scores(groups, accel, shape, attn)
    first = _pick(grid, bound, work, accel, given, "this batch")
    out = [first]
    for idx in np.lexsort((work.ravel(), bound.ravel())):
        if len(out) >= count:
            break
        i, j = divmod(int(idx), len(grid))
        if not np.isfinite(bound[i, j]):
            break
        m, a = int(grid[i]), int(grid[j])
        split = (m, a, accel.pes - m - a)
        if split not in {c.split for c in out}:
            out.append(Allocation(split, int(bound[i, j]), int(given)))
    if accel.split not in {c.split for c in out}:
        out.append(Allocation((accel.split[0], accel.split[1], accel.split[2]), int(given), int(given)))
    return out


def reallocate(groups: Sequence[Sequence[int]], accel: Accelerator, shape: TransformerShape, attn: AttentionConfig) -> Allocation:
    """The PE split of ``accel.pes`` that minimises the lower bound of ``groups`` (module doc).

    Args:
        groups: the batch as the scheduler groups it (one group per sequence for ``realloc``).
        accel: the design: its PE budget, cores, tiles and device are kept; its split is kept on ties.
        shape: the transformer.
        attn: the attention method.

    Raises:
        UserInputError: no group, an empty group or a length that is not a positive integer.
    """
    grid, bound, work, given = _scores(groups, accel, shape, attn)
    return _pick(grid, bound, work, accel, given, "this batch")


def tune_static(
    batches: Sequence[Sequence[Sequence[int]]], accel: Accelerator, shape: TransformerShape, attn: AttentionConfig
) -> Allocation:
    """One split for all of ``batches`` (each grouped as the scheduler groups it): the least sum of their bounds.

    The design-time alternative to :func:`reallocate`: a split tuned once on a sample of the workload
    and then fixed. ``bound_cycles`` and ``given_bound_cycles`` are sums over the batches.

    Raises:
        UserInputError: no batch, or a batch :func:`reallocate` refuses.
    """
    if len(batches) == 0:
        raise UserInputError("no batches to tune a split on: give at least one batch of positive lengths")
    parts = [_scores(groups, accel, shape, attn) for groups in batches]
    grid = parts[0][0]
    bound = np.sum([p[1] for p in parts], axis=0)
    work = np.sum([p[2] for p in parts], axis=0)
    return _pick(grid, bound, work, accel, float(sum(p[3] for p in parts)), f"{len(batches)} batches")


__all__ = ["Allocation", "candidates", "reallocate", "tune_static"]

"""The task DAG of a batch: per layer, per group of sequences processed together, one task per operation.

A *group* is a set of sequences processed in lockstep, padded to the longest of them:
pad-to-batch-max makes one group of the whole batch, bucketing one group per bucket, and the
length-aware scheduler one group per sequence (no padding). Per layer a group has:

``qkv -> [per head: (prescore -> select ->) scores -> softmax -> av] -> out -> ffn1 -> ffn2 -> next layer's qkv``

``prescore`` (low-bit Q K^T over every key) and ``select`` (top-k) only appear with top-k
attention on sequences longer than ``top_k``. Linear layers of a group are one GEMM over all
its tokens (``n`` sequences x padded length rows: the weights are loaded once for the
group); attention tasks process the group's sequences one after another (each has its own keys).

Every task carries ``executed_ops`` (lane operations done, padding included; a low-bit
pre-score product counts ``1 / pack``) and ``useful_ops`` (the same at the true lengths):
padding waste and PE utilisation come from these.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from coevo.sim.errors import UserInputError
from coevo.sim.fpga.model import (
    SELECT_OPS,
    SOFTMAX_OPS,
    Accelerator,
    AttentionConfig,
    Core,
    Rows,
    TransformerShape,
    gemm_cycles,
    gemm_rows_cycles,
    gemm_rows_cycles_by_pes,
    vector_cycles,
    vector_cycles_by_pes,
)


@dataclass(frozen=True)
class Task:
    """One operation of one group on one engine.

    Attributes:
        id: index in the task list (tasks are listed in a topological order).
        group: index of the group of sequences.
        layer: transformer layer.
        kind: ``qkv``, ``prescore``, ``select``, ``scores``, ``softmax``, ``av``, ``out``, ``ffn1``, ``ffn2``.
        head: attention head (-1 for the linear layers).
        engine: the engine that runs it.
        cycles: duration on one core of that engine.
        preds: ids of the tasks that must finish first.
        executed_ops: lane operations performed (padding included).
        useful_ops: lane operations at the sequences' true lengths.
    """

    id: int
    group: int
    layer: int
    kind: str
    head: int
    engine: str
    cycles: int
    preds: tuple[int, ...]
    executed_ops: float
    useful_ops: float


def check_lengths(lengths: Sequence[int]) -> list[int]:
    """``lengths`` as ints, or UserInputError when empty or not all positive integers."""
    if len(lengths) == 0:
        raise UserInputError(
            "no sequence lengths given: lengths=[] holds 0 sequences and at least 1 is needed; pass positive lengths, or "
            "lengths='pydoc-sentences'"
        )
    bad = [x for x in lengths if isinstance(x, bool) or int(x) != x or int(x) < 1]
    if bad:
        raise UserInputError(f"sequence lengths must be positive integers (tokens); got {bad[:5]}: drop or fix them")
    return [int(x) for x in lengths]


def _op_counts(length: int, shape: TransformerShape, attn: AttentionConfig) -> dict[str, float]:
    """Lane operations of one sequence of ``length`` tokens, per kind (attention kinds per head)."""
    d, dh, f = shape.d_model, shape.d_head, shape.d_ff
    pairs = attn.pairs(length)
    pack = 8 // attn.key_bits
    ops = {
        "qkv": 3.0 * length * d * d,
        "scores": float(pairs * dh),
        "softmax": float(SOFTMAX_OPS * pairs),
        "av": float(pairs * dh),
        "out": float(length * d * d),
        "ffn1": float(length * d * f),
        "ffn2": float(length * f * d),
    }
    if attn.prescores(length):
        ops["prescore"] = attn.visible_pairs(length) * dh / pack
        ops["select"] = float(SELECT_OPS * attn.visible_pairs(length))
    return ops


def _rows(tiles: Iterable[tuple[int, int, int]]) -> Rows:
    """Row tiles ``(rows, depth, width)`` grouped into runs of equal ones: ``(count, rows, depth, width)``."""
    out: list[tuple[int, int, int, int]] = []
    for tile in tiles:
        if out and out[-1][1:] == tile:
            out[-1] = (out[-1][0] + 1, *tile)
        else:
            out.append((1, *tile))
    return tuple(out)


def build_tasks(groups: Sequence[Sequence[int]], accel: Accelerator, shape: TransformerShape, attn: AttentionConfig) -> list[Task]:
    """The task DAG of ``groups`` (each a list of true sequence lengths, processed padded to its longest).

    Raises:
        UserInputError: an empty group or a length that is not a positive integer.
    """
    tasks: list[Task] = []
    mm, at, sm = accel.core("matmul"), accel.core("attention"), accel.core("softmax")
    for g, group in enumerate(groups):
        lengths = check_lengths(group)
        n, lp = len(lengths), max(lengths)
        executed = _op_counts(lp, shape, attn)
        useful: dict[str, float] = {}
        for length in lengths:
            for kind, value in _op_counts(length, shape, attn).items():
                useful[kind] = useful.get(kind, 0.0) + value
        linear, attention = group_cycles(n, lp, (mm, at, sm), accel, shape, attn)
        ops = {kind: (executed[kind] * n, useful.get(kind, 0.0)) for kind in executed}
        last: tuple[int, ...] = ()
        for layer in range(shape.n_layers):
            if layer and shape.weight_bits:  # compressed layers differ in their weights' bytes (attention is the same)
                linear = linear_cycles(n, lp, mm, accel, shape, layer)
            qkv = _add(tasks, ops, g, layer, "qkv", -1, "matmul", linear["qkv"], last)
            ends = []
            for h in range(shape.n_heads):
                prev = (qkv,)
                for kind, (engine, cycles) in attention.items():
                    prev = (_add(tasks, ops, g, layer, kind, h, engine, cycles, prev),)
                ends.append(prev[0])
            out = _add(tasks, ops, g, layer, "out", -1, "matmul", linear["out"], tuple(ends))
            ffn1 = _add(tasks, ops, g, layer, "ffn1", -1, "matmul", linear["ffn1"], (out,))
            last = (_add(tasks, ops, g, layer, "ffn2", -1, "matmul", linear["ffn2"], (ffn1,)),)
    return tasks


def group_cycles(
    n: int,
    padded: int,
    cores: tuple[Core, Core, Core],
    accel: Accelerator,
    shape: TransformerShape,
    attn: AttentionConfig,
    layer: int = 0,
) -> tuple[dict[str, int], dict[str, tuple[str, int]]]:
    """Cycles of layer ``layer`` of a group of ``n`` sequences padded to ``padded`` tokens on ``cores`` (matmul, attention, softmax).

    Returns the linear tasks (``kind -> cycles`` on the matmul engine) and the per-head attention
    chain in order (``kind -> (engine, cycles)``). Only ``accel``'s tiles and launch overhead are
    read: the cores may be those of another PE split (:mod:`sim.fpga.alloc` tabulates them). Layers
    differ only where the shape gives them their own weight bits (:attr:`TransformerShape.weight_bits`).
    """
    mm, at, sm = cores
    linear = linear_cycles(n, padded, mm, accel, shape, layer)
    return linear, attention_chain(n, padded, at, sm, accel, shape, attn)


def attention_chain(
    n: int, padded: int, at: Core, sm: Core, accel: Accelerator, shape: TransformerShape, attn: AttentionConfig
) -> dict[str, tuple[str, int]]:
    """The per-head attention chain of a group (``kind -> (engine, cycles)``, in order) on attention core ``at`` and softmax core ``sm``.

    Independent of the weights' bits: the same for every layer and every compressed model.
    """
    return dict(_attention_chain(n, padded, at, sm, accel.tile_m, accel.tile_n, accel.tile_k, accel.overhead_cycles, shape.d_head, attn))


def attention_chain_by_pes(
    n: int,
    padded: int,
    at: tuple[np.ndarray, np.ndarray],
    sm: tuple[np.ndarray, np.ndarray],
    accel: Accelerator,
    shape: TransformerShape,
    attn: AttentionConfig,
) -> list[tuple[str, str, np.ndarray]]:
    """:func:`attention_chain` on many attention and softmax cores at once: ``(kind, engine, cycles per core)`` in order.

    ``at`` and ``sm``: (PEs, DDR bytes per cycle) of each attention and softmax core, one entry per PE count; the
    same integers as :func:`attention_chain` core by core (:mod:`sim.fpga.alloc` tabulates a batch with it).
    """
    tm, tn, tk, ov, lanes, dh = accel.tile_m, accel.tile_n, accel.tile_k, accel.overhead_cycles, accel.lanes, shape.d_head
    tiles_q = attn.row_tiles(padded, tm)
    pairs, visible = attn.pairs(padded), attn.visible_pairs(padded)
    out: list[tuple[str, str, np.ndarray]] = []
    if attn.prescores(padded):
        kb = attn.key_bits
        pre = gemm_rows_cycles_by_pes(_rows((r, dh, v) for r, _, v in tiles_q), *at, lanes, tn, tk, 0, a_bits=kb, b_bits=kb, pack=8 // kb)
        out.append(("prescore", "attention", n * pre + ov))
        out.append(("select", "softmax", n * vector_cycles_by_pes(visible, pairs, SELECT_OPS, sm[0], lanes, sm[1], 0) + ov))
    scores = gemm_rows_cycles_by_pes(_rows((r, dh, keys) for r, keys, _ in tiles_q), *at, lanes, tn, tk, 0)
    out.append(("scores", "attention", n * scores + ov))
    out.append(("softmax", "softmax", n * vector_cycles_by_pes(pairs, pairs, SOFTMAX_OPS, sm[0], lanes, sm[1], 0) + ov))
    av = gemm_rows_cycles_by_pes(_rows((r, keys, dh) for r, keys, _ in tiles_q), *at, lanes, tn, tk, 0)
    out.append(("av", "attention", n * av + ov))
    return out


@functools.lru_cache(maxsize=100_000)
def _attention_chain(
    n: int, padded: int, at: Core, sm: Core, tm: int, tn: int, tk: int, ov: int, dh: int, attn: AttentionConfig
) -> tuple[tuple[str, tuple[str, int]], ...]:
    """:func:`attention_chain`, cached on what it reads (a re-allocation asks for the same groups on the same cores per design)."""
    tiles_q = attn.row_tiles(padded, tm)
    pairs, visible = attn.pairs(padded), attn.visible_pairs(padded)
    attention: dict[str, tuple[str, int]] = {}
    if attn.prescores(padded):
        kb = attn.key_bits
        pre = gemm_rows_cycles(_rows((r, dh, v) for r, _, v in tiles_q), at, tn, tk, 0, a_bits=kb, b_bits=kb, pack=8 // kb)
        attention["prescore"] = ("attention", n * pre + ov)
        attention["select"] = ("softmax", n * vector_cycles(visible, pairs, SELECT_OPS, sm, 0) + ov)
    scores = gemm_rows_cycles(_rows((r, dh, keys) for r, keys, _ in tiles_q), at, tn, tk, 0)
    attention["scores"] = ("attention", n * scores + ov)
    attention["softmax"] = ("softmax", n * vector_cycles(pairs, pairs, SOFTMAX_OPS, sm, 0) + ov)
    attention["av"] = ("attention", n * gemm_rows_cycles(_rows((r, keys, dh) for r, keys, _ in tiles_q), at, tn, tk, 0) + ov)
    return tuple(attention.items())


def linear_cycles(n: int, padded: int, mm: Core, accel: Accelerator, shape: TransformerShape, layer: int = 0) -> dict[str, int]:
    """Cycles of layer ``layer``'s linear tasks (``kind -> cycles``), ``n`` sequences padded to ``padded`` tokens, on matmul core ``mm``."""
    tm, tn, tk, ov = accel.tile_m, accel.tile_n, accel.tile_k, accel.overhead_cycles
    d, f = shape.d_model, shape.d_ff
    rows = n * padded
    wb = shape.linear_bits(layer)
    return {
        "qkv": gemm_cycles(rows, d, 3 * d, mm, tm, tn, tk, ov, b_bits=wb["qkv"]),
        "out": gemm_cycles(rows, d, d, mm, tm, tn, tk, ov, b_bits=wb["out"]),
        "ffn1": gemm_cycles(rows, d, f, mm, tm, tn, tk, ov, b_bits=wb["ffn1"]),
        "ffn2": gemm_cycles(rows, f, d, mm, tm, tn, tk, ov, b_bits=wb["ffn2"]),
    }


def _add(
    tasks: list[Task], ops: dict[str, tuple[float, float]], group: int, layer: int, kind: str, head: int, engine: str, cycles: int,
    preds: tuple[int, ...],
) -> int:  # fmt: skip
    """Append a task (its executed and useful ops from ``ops[kind]``) and return its id."""
    tasks.append(Task(len(tasks), group, layer, kind, head, engine, cycles, preds, *ops[kind]))
    return len(tasks) - 1


def useful_ops_total(lengths: Sequence[int], shape: TransformerShape, attn: AttentionConfig) -> float:
    """Lane operations of the whole batch at its true lengths (the same whatever the grouping)."""
    per_head = {"prescore", "select", "scores", "softmax", "av"}
    total = 0.0
    for length in check_lengths(lengths):
        for kind, value in _op_counts(length, shape, attn).items():
            total += value * (shape.n_heads if kind in per_head else 1) * shape.n_layers
    return total

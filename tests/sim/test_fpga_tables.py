"""sim.fpga.alloc's tables computed over every PE count at once equal the per-core path they replaced (issue 32's speed fix).

The reference here is the code before the fix: each PE count's cores built one by one, every layer's linear
GEMMs through :func:`sim.fpga.model.gemm_cycles` (the cached per-core path) and the attention chain through
:func:`sim.fpga.dag.group_cycles`. The fast path must give the same integers, and so the same objectives.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import pytest

from coevo.search.deploy_lm.problem import DeployLmProblem
from coevo.sim.fpga import alloc
from coevo.sim.fpga.dag import check_lengths, group_cycles, linear_cycles
from coevo.sim.fpga.model import (
    ENGINES,
    Accelerator,
    AttentionConfig,
    Core,
    TransformerShape,
    device,
    engine_core,
    gemm_cycles,
    gemm_cycles_by_pes,
    tile_bytes,
)


def reference_tables(
    groups: Sequence[Sequence[int]], accel: Accelerator, shape: TransformerShape, attn: AttentionConfig, counts: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """``alloc._tables`` as it was before the fix (copied from commit 43e60c7), core by core."""
    kinds = Counter((len(g), max(g)) for g in (check_lengths(g) for g in groups))
    total, cores = accel.pes, accel.cores
    need = tile_bytes(accel.tile_m, accel.tile_n, accel.tile_k)
    load = np.full((3, total + 1), np.inf)
    chain = np.full((3, len(kinds), total + 1), np.inf)
    heads = np.array([1.0, shape.n_heads, shape.n_heads])
    for p in counts:
        made = [engine_core(accel.device, e, p, c, total, accel.lanes) if p >= c else None for e, c in zip(ENGINES, cores, strict=True)]
        valid = [c is not None and (c.engine == "softmax" or need <= c.buffer_bytes) for c in made]
        filler = next((c for c in made if c is not None), None)
        if filler is None or not any(valid):
            continue
        trio: tuple[Core, Core, Core] = (made[0] or filler, made[1] or filler, made[2] or filler)
        work = np.zeros(3)
        for g, ((n, padded), count) in enumerate(kinds.items()):
            linear, attention = group_cycles(n, padded, trio, accel, shape, attn)
            part = np.zeros(3)
            if shape.weight_bits:
                part[0] = sum(sum(linear_cycles(n, padded, trio[0], accel, shape, i).values()) for i in range(shape.n_layers))
            else:
                part[0] = sum(linear.values()) * shape.n_layers
            for engine, cycles in attention.values():
                part[ENGINES.index(engine)] += cycles * shape.n_layers
            work += count * part * heads
            for e in range(3):
                if valid[e]:
                    chain[e, g, p] = part[e]
        for e in range(3):
            if valid[e]:
                load[e, p] = work[e]
    return load, chain


COMPRESSED = TransformerShape(64, 2, 2, 256, weight_bits=((3.7, 8.0, 2.55, 6.125), (1.3, 4.0, 7.99, 0.5)))


@pytest.mark.parametrize("device_name", ["zcu102", "alveo-u280"])
def test_a_gemm_over_many_cores_equals_the_gemm_core_by_core(device_name: str) -> None:
    dev = device(device_name)
    pes = list(range(1, 97, 5))
    cs = [engine_core(dev, "matmul", p, 1, 96) for p in pes]
    for m, k, n in ((1, 64, 192), (37, 64, 256), (300, 256, 64), (33, 100, 129)):
        for b_bits in (8, 3.7, 0.5, 6.125):
            for tiles in ((32, 64, 64), (16, 128, 32)):
                fast = gemm_cycles_by_pes(
                    m, k, n, np.array([c.pes for c in cs]), np.array([c.ddr_bytes_per_cycle for c in cs]), 16, *tiles, 64, b_bits=b_bits
                )
                assert fast.tolist() == [gemm_cycles(m, k, n, c, *tiles, 64, b_bits=b_bits) for c in cs]
    assert gemm_cycles_by_pes(0, 64, 64, np.array([4]), np.array([1.0]), 16, 32, 64, 64, 64).tolist() == [0]


@pytest.mark.parametrize("shape", [TransformerShape(64, 2, 2, 256), COMPRESSED], ids=["int8", "compressed"])
@pytest.mark.parametrize("cores", [(1, 1, 1), (2, 2, 1)])
@pytest.mark.parametrize("attn", [AttentionConfig("dense"), AttentionConfig("topk", top_k=16, key_bits=2)], ids=["dense", "topk"])
def test_the_tables_equal_the_core_by_core_reference(shape: TransformerShape, cores: tuple[int, int, int], attn: AttentionConfig) -> None:
    accel = Accelerator(device("zcu102"), (40, 16, 8), cores=cores, tile_m=16, tile_n=128, tile_k=32)
    groups = [[x] for x in (7, 24, 24, 80, 131, 300)] + [[12, 40]]
    counts = list(range(1, 65))
    fast, ref = alloc._tables(groups, accel, shape, attn, counts), reference_tables(groups, accel, shape, attn, counts)
    assert np.array_equal(fast[0], ref[0]) and np.array_equal(fast[1], ref[1])


def test_deploy_lm_objectives_of_fixed_designs_equal_the_reference_path(monkeypatch: pytest.MonkeyPatch) -> None:
    def designs(problem: DeployLmProblem) -> list[tuple[object, ...]]:
        prune, bits = (problem.part(p).problem.distributions() for p in ("prune", "bits"))
        out = []
        fixed = (("realloc", "8:3:1"), ("realloc", "14:1:1"), ("length-aware", "4:3:1"), ("bucketing", "2:1:1"))
        for i, (sched, split) in enumerate(fixed):
            s = " ".join(f"{n}={(0, 0.25, 0.5, 0.75)[(i + j) % 4]:g}" for j, n in enumerate(prune))
            b = " ".join(f"{n}={(3, 4, 6, 8)[(i + 2 * j) % 4]}" for j, n in enumerate(bits))
            f = f"split={split} tile_m={(16, 32, 64, 128)[i]} tile_n=64 tile_k=32 top_k=16 key_bits=4 scheduler={sched}"
            out.append(problem.parse_design(f"prune: {s} ; bits: {b} ; fpga: {f}"))
        return out

    def cheap(problem: DeployLmProblem) -> list[dict[str, float]]:
        return [problem.values(p, problem.chain(p), cheap_only=True) for p in designs(problem)]

    fast = cheap(DeployLmProblem(batch=8, draws=2))
    monkeypatch.setattr(alloc, "_tables", reference_tables)
    ref = cheap(DeployLmProblem(batch=8, draws=2))  # a new problem: its own simulation cache
    assert fast == ref and len({v["latency_ms"] for v in fast}) == 4

"""sim.fpga: hand-derived cycle counts, the task DAG, the schedulers against hand schedules and CP-SAT, the checker, bad input."""

from __future__ import annotations

import dataclasses
import math

import pytest

from coevo.sim.errors import UserInputError
from coevo.sim.fpga import (
    DEVICES,
    MODELS,
    Accelerator,
    AttentionConfig,
    Core,
    InvalidScheduleError,
    Schedule,
    Task,
    TransformerShape,
    build_tasks,
    check_schedule,
    corpus_lengths,
    cpsat_schedule,
    device,
    draw_batches,
    gemm_cycles,
    gemm_rows_cycles,
    groups_for,
    list_schedule,
    lower_bound,
    metrics,
    pydoc_sentences,
    resolve_lengths,
    schedule_batch,
    split_pes,
    upward_ranks,
    vector_cycles,
)

TINY = TransformerShape(d_model=8, n_layers=1, n_heads=2, d_ff=16)
DENSE = AttentionConfig("dense")


def accel(pes: int = 64, **kw: object) -> Accelerator:
    return Accelerator(device("zcu102"), split_pes(pes, (4, 3, 1)), **kw)  # type: ignore[arg-type]


# ---- cost formulas, by hand


def test_gemm_cycles_compute_bound_by_hand() -> None:
    core = Core("matmul", 0, pes=4, lanes=2, buffer_bytes=10**6, ddr_bytes_per_cycle=8.0)
    # (3x5)@(5x2), tiles 2x2x4: output tiles 2x2 and 1x2; k steps of 4 then 1 (the last writes the output)
    # 2x2 tile: k=4 step max(ceil(4/4)*ceil(4/2)=2, ceil((64+64)/64)=2)=2; k=1 last step max(1, ceil((16+16+32)/64)=1)=1
    # 1x2 tile: k=4 step max(ceil(2/4)*2=2, ceil((32+64)/64)=2)=2; k=1 last step max(1, ceil((8+16+16)/64)=1)=1
    # fill: first operands ceil((2*4*8 + 4*2*8)/64) = 2; overhead 10 -> 2 + 3 + 3 + 10
    assert gemm_cycles(3, 5, 2, core, 2, 2, 4, 10) == 18


def test_gemm_cycles_memory_bound_by_hand() -> None:
    core = Core("matmul", 0, pes=4, lanes=2, buffer_bytes=10**6, ddr_bytes_per_cycle=1.0)
    # 1 byte/cycle: 2x2 tile steps 128/8=16 and 64/8=8; 1x2 tile steps 96/8=12 and 40/8=5; fill 16; overhead 10
    assert gemm_cycles(3, 5, 2, core, 2, 2, 4, 10) == 16 + 16 + 8 + 12 + 5 + 10


def _gemm_reference(m: int, k: int, n: int, core: Core, tm: int, tn: int, tk: int, overhead: int) -> int:
    """The same cost by walking every tile step (what the closed form groups)."""
    bw8, total = 8 * core.ddr_bytes_per_cycle, 0
    for i in range(0, m, tm):
        for j in range(0, n, tn):
            r, c = min(tm, m - i), min(tn, n - j)
            for kk0 in range(0, k, tk):
                kk, last = min(tk, k - kk0), kk0 + tk >= k
                compute = math.ceil(r * c / core.pes) * math.ceil(kk / core.lanes)
                memory = math.ceil((8 * r * kk + 8 * kk * c + (8 * r * c if last else 0)) / bw8)
                total += max(compute, memory)
    fill = math.ceil((8 * min(tm, m) * min(tk, k) + 8 * min(tk, k) * min(tn, n)) / bw8)
    return fill + total + overhead


@pytest.mark.parametrize(("m", "k", "n", "tm", "tn", "tk"), [(37, 64, 96, 16, 32, 32), (5, 300, 7, 8, 8, 64), (128, 13, 1, 32, 64, 8)])
@pytest.mark.parametrize("ddr", [0.7, 48.0])
def test_gemm_closed_form_matches_tile_by_tile_walk(m: int, k: int, n: int, tm: int, tn: int, tk: int, ddr: float) -> None:
    core = Core("matmul", 0, pes=12, lanes=16, buffer_bytes=10**6, ddr_bytes_per_cycle=ddr)
    assert gemm_cycles(m, k, n, core, tm, tn, tk, 7) == _gemm_reference(m, k, n, core, tm, tn, tk, 7)


def test_vector_cycles_by_hand() -> None:
    core = Core("softmax", 0, pes=4, lanes=2, buffer_bytes=0, ddr_bytes_per_cycle=8.0)
    assert vector_cycles(100, 50, 4, core, 3) == max(math.ceil(400 / 8), math.ceil(150 / 8)) + 3 == 53
    slow = dataclasses.replace(core, ddr_bytes_per_cycle=1.0)
    assert vector_cycles(100, 50, 4, slow, 3) == 150 + 3  # memory-bound


def test_low_bit_prescore_packs_products_per_lane() -> None:
    core = Core("attention", 0, pes=4, lanes=2, buffer_bytes=10**6, ddr_bytes_per_cycle=1000.0)
    full = gemm_cycles(8, 16, 8, core, 8, 8, 16, 0)
    four_bit = gemm_cycles(8, 16, 8, core, 8, 8, 16, 0, a_bits=4, b_bits=4, pack=2)
    # compute-bound: ceil(64/4) * ceil(16/2) = 128 vs ceil(64/4) * ceil(16/4) = 64 (+ 1 fill cycle each)
    assert (full, four_bit) == (128 + 1, 64 + 1)


# ---- the task DAG


def test_op_counts_and_padding_waste_by_hand() -> None:
    a = accel()
    one = build_tasks([[3]], a, TINY, DENSE)
    # d=8, 2 heads of 4, d_ff=16, L=3 causal (6 pairs): qkv 3*3*64=576, per head scores 6*4, softmax 4*6, av 6*4,
    # out 192, ffn1 384, ffn2 384
    assert sum(t.useful_ops for t in one) == sum(t.executed_ops for t in one) == 576 + 2 * 72 + 192 + 384 + 384 == 1680
    encoder = build_tasks([[3]], a, TINY, AttentionConfig("dense", causal=False))  # 9 pairs: 36 + 36 + 36 per head
    assert sum(t.useful_ops for t in encoder) == 576 + 2 * 108 + 192 + 384 + 384
    padded = build_tasks([[1, 3]], a, TINY, DENSE)
    ops_1 = 192 + 2 * 12 + 64 + 128 + 128  # L=1: qkv 192, per head 4 + 4 + 4, out 64, ffn 128 + 128
    assert sum(t.executed_ops for t in padded) == 2 * 1680
    assert sum(t.useful_ops for t in padded) == 1680 + ops_1
    m = metrics(schedule_batch([1, 3], a, TINY, DENSE, "padding"), a, [1, 3], TINY, DENSE)
    assert m.padding_waste == pytest.approx(1 - (1680 + ops_1) / 3360)
    assert metrics(schedule_batch([1, 3], a, TINY, DENSE, "length-aware"), a, [1, 3], TINY, DENSE).padding_waste == 0


def test_causal_keys_and_row_tiles_by_hand() -> None:
    assert DENSE.row_tiles(4, 2) == [(2, 2, 2), (2, 4, 4)]  # (rows, keys needed, visible keys) per query tile
    assert AttentionConfig("topk", top_k=1).row_tiles(4, 2) == [(2, 1, 2), (2, 1, 4)]
    lg = AttentionConfig("local-global", window=2, n_global=1)
    assert [lg.keys_per_query(4, i) for i in range(4)] == [1, 2, 3, 3] and lg.pairs(4) == 9  # query 2 sees 1-2 and global 0
    assert DENSE.pairs(5) == 15 and AttentionConfig("topk", top_k=2).pairs(5) == 1 + 2 + 2 + 2 + 2
    assert AttentionConfig("dense", causal=False).pairs(5) == 25
    core = Core("attention", 0, pes=4, lanes=2, buffer_bytes=10**6, ddr_bytes_per_cycle=1000.0)
    # causal Q K^T, L=4, d_head=2, 2x2 tiles: query tile 0 needs one 2x2 key tile, tile 1 two: 1 + 2 compute cycles + 1 fill
    assert gemm_rows_cycles(((1, 2, 2, 2), (1, 2, 2, 4)), core, 2, 64, 0) == 4
    assert gemm_cycles(4, 2, 4, core, 2, 2, 64, 0) == 5  # the full 4x4 score matrix: four tiles


def test_dag_shape_per_attention_method() -> None:
    a = accel()
    shape = TransformerShape(16, 2, 2, 64)
    kinds = [t.kind for t in build_tasks([[100]], a, shape, DENSE) if t.layer == 0]
    assert kinds == ["qkv", "scores", "softmax", "av", "scores", "softmax", "av", "out", "ffn1", "ffn2"]
    topk = AttentionConfig("topk", top_k=32, key_bits=4)
    assert len(build_tasks([[100]], a, shape, topk)) == 2 * (4 + 5 * 2)  # prescore and select per head
    assert len(build_tasks([[20]], a, shape, topk)) == 2 * (4 + 3 * 2)  # L <= top_k: every key kept, no pre-score
    tasks = build_tasks([[100], [7]], a, shape, DENSE)
    for t in tasks:
        assert all(p < t.id and tasks[p].group == t.group for p in t.preds)
    second_qkv = next(t for t in tasks if t.kind == "qkv" and t.layer == 1 and t.group == 0)
    assert [tasks[p].kind for p in second_qkv.preds] == ["ffn2"]


def test_sparse_attention_scales_linearly_dense_quadratically() -> None:
    a = accel(tile_m=32, tile_n=32, tile_k=32)
    shape = TransformerShape(64, 1, 1, 256)

    def cycles(method: str, length: int, kind: str) -> int:
        attn = AttentionConfig(method, top_k=32, window=28, n_global=4)  # type: ignore[arg-type]
        return sum(t.cycles for t in build_tasks([[length]], a, shape, attn) if t.kind == kind)

    for method in ("topk", "local-global"):
        assert cycles(method, 2048, "av") / cycles(method, 1024, "av") == pytest.approx(2, rel=0.02)
    assert cycles("dense", 2048, "av") / cycles("dense", 1024, "av") == pytest.approx(4, rel=0.02)
    assert cycles("topk", 2048, "prescore") / cycles("topk", 1024, "prescore") == pytest.approx(4, rel=0.02)  # still L^2, at low bits


# ---- schedulers


def _chain_tasks() -> list[Task]:
    # seq 0: a0 (matmul 3) -> b0 (attention 1); seq 1: a1 (matmul 2) -> b1 (attention 5)
    return [
        Task(0, 0, 0, "qkv", -1, "matmul", 3, (), 0, 0),
        Task(1, 0, 0, "scores", 0, "attention", 1, (0,), 0, 0),
        Task(2, 1, 0, "qkv", -1, "matmul", 2, (), 0, 0),
        Task(3, 1, 0, "scores", 0, "attention", 5, (2,), 0, 0),
    ]


def test_upward_rank_schedule_by_hand() -> None:
    a, tasks = accel(), _chain_tasks()
    assert upward_ranks(tasks) == [4, 1, 7, 5]
    ranked = list_schedule(tasks, a, upward_ranks(tasks))
    # a1 first (rank 7): a1 0-2, b1 2-7, a0 2-5, b0 waits for the attention engine: 7-8
    assert ranked.start == (2, 7, 0, 2) and ranked.makespan == 8 and lower_bound(tasks, a) == 7  # bound: a1 + b1
    fifo = list_schedule(tasks, a, [-float(t.id) for t in tasks])
    assert fifo.start == (0, 3, 3, 5) and fifo.makespan == 10  # a0 0-3, b0 3-4, a1 3-5, b1 5-10
    check_schedule(ranked, a)
    check_schedule(fifo, a)
    best = cpsat_schedule(tasks, a, time_limit_s=5)
    # a0 first ends at 10 (above); a1 first puts b0 after b1 or b1 after a0: 8 is optimal
    assert (best.schedule.makespan, best.status, best.bound_cycles, best.gap) == (8, "optimal", 8, 0.0)


def test_checker_catches_broken_schedules() -> None:
    a, tasks = accel(), _chain_tasks()
    good = list_schedule(tasks, a, upward_ranks(tasks))
    early = Schedule(good.tasks, (2, 4, 0, 2), good.core, "x")  # b0 at 4, a0 ends at 5
    with pytest.raises(InvalidScheduleError, match="before its predecessor"):
        check_schedule(early, a)
    overlap = Schedule(good.tasks, (0, 3, 1, 4), good.core, "x")  # a0 0-3 and a1 1-3 on one matmul core
    with pytest.raises(InvalidScheduleError, match="overlap on matmul core 0"):
        check_schedule(overlap, a)
    two = Accelerator(device("zcu102"), (32, 24, 8), cores=(2, 1, 1))
    crowded = Schedule(good.tasks, (0, 3, 1, 4), (0, 0, 1, 0), "x")  # fine on two matmul cores
    check_schedule(crowded, two)
    with pytest.raises(InvalidScheduleError, match="core 2"):
        check_schedule(Schedule(good.tasks, (0, 3, 1, 4), (0, 0, 2, 0), "x"), two)


@pytest.mark.parametrize("cores", [(1, 1, 1), (2, 2, 1)])
def test_every_method_gives_a_valid_schedule_on_real_lengths(cores: tuple[int, int, int]) -> None:
    a = Accelerator(device("zcu102"), split_pes(64, (4, 3, 1)), cores=cores)
    shape = MODELS["lm-pydoc-tiny"]
    batch = draw_batches(corpus_lengths(), 16, 1, seed=3)[0]
    spans = {}
    for method in ("padding", "bucketing", "length-aware", "fifo", "realloc"):
        for attn in (DENSE, AttentionConfig("topk", top_k=16, key_bits=2)):
            s = schedule_batch(batch, a, shape, attn, method)
            check_schedule(s, a)
            m = metrics(s, a, batch, shape, attn)
            assert m.makespan_cycles >= lower_bound(list(s.tasks), a)
            assert 0 < m.pe_utilization <= 1 and 0 <= m.padding_waste < 1
            assert all(0 < b <= 1 for b in m.engine_busy.values())
            spans[method, attn.method] = m.makespan_cycles
    # the same work with no padding cannot take longer than the padded lockstep batch on this draw
    assert spans["length-aware", "dense"] < spans["padding", "dense"]


def test_equal_lengths_waste_nothing_and_groups_are_as_documented() -> None:
    a = accel()
    for method in ("padding", "bucketing"):
        assert metrics(schedule_batch([50] * 8, a, TINY, DENSE, method), a, [50] * 8, TINY, DENSE).padding_waste == 0
    assert groups_for([5, 1, 4, 2, 3, 6], "bucketing", buckets=3) == [[1, 2], [3, 4], [5, 6]]
    assert groups_for([5, 1], "padding") == [[5, 1]] and groups_for([5, 1], "length-aware") == [[5], [1]]


@pytest.mark.slow
def test_cpsat_bounds_the_list_schedule_on_small_real_instances() -> None:
    a = Accelerator(device("zcu102"), split_pes(64, (2, 1, 1)), cores=(1, 2, 1))
    shape = TransformerShape(64, 1, 2, 256)
    for seed in range(2):
        batch = draw_batches(corpus_lengths(), 4, 1, seed=seed)[0]
        tasks = build_tasks(groups_for(batch, "length-aware"), a, shape, DENSE)
        heur = schedule_batch(batch, a, shape, DENSE, "length-aware")
        best = cpsat_schedule(tasks, a, time_limit_s=10)
        check_schedule(best.schedule, a)
        assert lower_bound(tasks, a) <= best.bound_cycles <= best.schedule.makespan <= heur.makespan


# ---- lengths and bad input


def test_pydoc_sentences_are_real_sentences_counted_in_bytes() -> None:
    sentences = pydoc_sentences()
    assert len(sentences) > 3000
    known = 'Assignments to "__debug__" are illegal.'
    assert known in sentences
    lengths = corpus_lengths()
    assert lengths[sentences.index(known)] == 39 and min(lengths) >= 1
    assert resolve_lengths("pydoc-sentences") == list(lengths)
    a, b = draw_batches(lengths, 8, 2, seed=5), draw_batches(lengths, 8, 3, seed=5)
    assert a == b[:2] and a[0] != a[1]


def test_zoo_shapes_match_the_zoo_recipes() -> None:
    from coevo.sim.zoo import RECIPES

    for name in ("lm-pydoc", "lm-pydoc-tiny"):
        arch = RECIPES[name]["arch"]
        assert (MODELS[name].d_model, MODELS[name].n_layers, MODELS[name].n_heads) == (arch["d"], arch["n_layers"], arch["n_heads"])
        assert MODELS[name].d_ff == 4 * arch["d"]  # sim.zoo.models.MLP: d -> 4d -> d


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: resolve_lengths([]), "no sequence lengths"),
        (lambda: resolve_lengths([3, 0, 5]), r"positive integers.*\[0\]"),
        (lambda: resolve_lengths([4, -2]), "positive integers"),
        (lambda: resolve_lengths("wiki"), "unknown length corpus 'wiki'"),
        (lambda: Accelerator(device("zcu102"), (100, 50, 10)), r"zcu102 has 2520 .*use pes <= 157 or a larger device \(alveo-u280\)"),
        (lambda: Accelerator(device("zu3eg"), split_pes(64, (4, 3, 1))), r"use pes <= 22"),
        (lambda: Accelerator(device("zu3eg"), (8, 6, 2), tile_m=512, tile_n=512, tile_k=256), "use smaller tiles"),
        (lambda: device("vu19p"), "unknown device 'vu19p'"),
        (lambda: split_pes(2, (1, 1, 1)), "pes >= 3"),
        (lambda: AttentionConfig("topk", key_bits=1), "key_bits must lie between 2 and 8"),
        (lambda: draw_batches([3, 4], 5, 1), "use batch <= 2"),
    ],
)
def test_bad_input_says_what_to_change(make: object, match: str) -> None:
    with pytest.raises(UserInputError, match=match):
        make()  # type: ignore[operator]


def test_device_presets_and_split() -> None:
    assert DEVICES["zcu102"].max_pes(16) == 157 and DEVICES["alveo-u280"].max_pes(16) == 564
    assert split_pes(64, (4, 3, 1)) == (32, 24, 8) and sum(split_pes(10, (1, 1, 1))) == 10
    assert split_pes(5, (100, 1, 1)) == (3, 1, 1)


def test_pair_counts_agree_with_sim_attention() -> None:
    flops = pytest.importorskip("coevo.sim.attention.flops", reason="needs branch i20-attn's sim.attention merged")
    for n in (1, 5, 33, 200):
        assert DENSE.pairs(n) == flops.causal_pairs(n) == DENSE.visible_pairs(n)
        assert AttentionConfig("topk", top_k=16).pairs(n) == flops.topk_pairs(n, 16)
        assert AttentionConfig("local-global", window=8, n_global=3).pairs(n) == flops.local_global_pairs(n, 8, 3)

"""sim.fpga.alloc: length-aware PE re-allocation against a brute force over every split, on skewed and uniform mixes, and its bad input."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import pytest

from coevo.agent.cli import main
from coevo.sim.errors import UserInputError
from coevo.sim.fpga import (
    Accelerator,
    AttentionConfig,
    InvalidScheduleError,
    TransformerShape,
    build_tasks,
    candidates,
    check_schedule,
    compare_methods,
    device,
    list_schedule,
    lower_bound,
    metrics,
    reallocate,
    schedule_batch,
    tune_static,
    upward_ranks,
)

SHAPE = TransformerShape(d_model=64, n_layers=2, n_heads=2, d_ff=256)  # lm-pydoc-tiny's shape
DENSE = AttentionConfig("dense")
TOPK = AttentionConfig("topk", top_k=16, key_bits=4)
PES = 12


def singles(lengths: list[int]) -> list[list[int]]:
    return [[x] for x in lengths]


def brute_force(lengths: list[int], base: Accelerator, attn: AttentionConfig) -> tuple[int, set[tuple[int, int, int]]]:
    """The least lower bound over every split of ``base.pes`` (DAG rebuilt per split: sched.lower_bound, not alloc's tables)."""
    best, where = -1, set()
    total = base.pes
    for m in range(1, total):
        for a in range(1, total - m):
            split = (m, a, total - m - a)
            try:
                acc = base.with_split(split)
            except UserInputError:  # a core without PEs, or tiles that do not fit its buffer share
                continue
            bound = lower_bound(build_tasks(singles(lengths), acc, SHAPE, attn), acc)
            if best < 0 or bound < best:
                best, where = bound, {split}
            elif bound == best:
                where.add(split)
    return best, where


@pytest.mark.parametrize("cores", [(1, 1, 1), (2, 2, 1)])
@pytest.mark.parametrize("attn", [DENSE, TOPK], ids=["dense", "topk"])
@pytest.mark.parametrize("lengths", [[20, 50, 90], [16] * 6, [16] * 5 + [300]], ids=["mixed", "uniform", "skewed"])
def test_the_chosen_split_has_the_least_bound_of_all_splits(cores: tuple[int, int, int], attn: AttentionConfig, lengths: list[int]) -> None:
    base = Accelerator(device("zcu102"), (8, 3, 1), cores=cores)
    best, where = brute_force(lengths, base, attn)
    alloc = reallocate(singles(lengths), base, SHAPE, attn)
    assert alloc.split in where and alloc.bound_cycles == best
    assert alloc.given_bound_cycles == lower_bound(build_tasks(singles(lengths), base, SHAPE, attn), base) >= best


def test_a_skewed_mix_moves_pes_to_attention_and_beats_the_fixed_split() -> None:
    base = Accelerator(device("zcu102"), (8, 3, 1))
    short = [24] * 8
    _, balanced = brute_force(short, base, DENSE)  # the split a design tuned for short sentences would fix
    fixed = base.with_split(min(balanced))
    skewed = [24] * 7 + [400]  # one long sentence: its attention work grows with the square of its length
    spans = {}
    for method in ("length-aware", "realloc"):
        s = schedule_batch(skewed, fixed, SHAPE, DENSE, method)
        check_schedule(s, fixed)
        spans[method] = metrics(s, fixed, skewed, SHAPE, DENSE)
    moved = spans["realloc"].split
    assert sum(moved) == PES and moved[1] + moved[2] > fixed.split[1] + fixed.split[2]
    assert spans["realloc"].makespan_cycles < spans["length-aware"].makespan_cycles


def test_a_uniform_mix_on_its_balanced_split_is_left_alone() -> None:
    base = Accelerator(device("zcu102"), (8, 3, 1))
    uniform = [24] * 8
    best, balanced = brute_force(uniform, base, DENSE)
    for split in balanced:
        fixed = base.with_split(split)
        alloc = reallocate(singles(uniform), fixed, SHAPE, DENSE)
        assert alloc.split == split and alloc.bound_cycles == alloc.given_bound_cycles == best  # nothing to move
        realloc = schedule_batch(uniform, fixed, SHAPE, DENSE, "realloc")
        check_schedule(realloc, fixed)
        assert realloc.makespan <= schedule_batch(uniform, fixed, SHAPE, DENSE, "length-aware").makespan


def test_realloc_list_schedules_its_candidates_and_keeps_the_shortest() -> None:
    base = Accelerator(device("zcu102"), (8, 3, 1), cores=(1, 2, 1), reconfig_cycles=0)  # free: no split is preferred
    for lengths in ([24] * 7 + [400], [20, 50, 90], [16] * 6):
        options = candidates(singles(lengths), base, SHAPE, TOPK)
        assert options[0] == reallocate(singles(lengths), base, SHAPE, TOPK) and base.split in {o.split for o in options}
        assert [o.bound_cycles for o in options[:-1]] == sorted(o.bound_cycles for o in options[:-1])
        spans = []
        for option in options:
            acc = base.with_split(option.split)
            tasks = build_tasks(singles(lengths), acc, SHAPE, TOPK)
            assert lower_bound(tasks, acc) == option.bound_cycles
            spans.append(list_schedule(tasks, acc, upward_ranks(tasks)).makespan)
        chosen = schedule_batch(lengths, base, SHAPE, TOPK, "realloc")
        assert chosen.makespan == min(spans) and chosen.split == options[spans.index(min(spans))].split


def test_the_checker_refuses_a_split_outside_the_budget() -> None:
    fixed = Accelerator(device("zcu102"), (8, 3, 1), cores=(1, 2, 1))
    good = schedule_batch([30, 60], fixed, SHAPE, DENSE, "realloc")
    check_schedule(good, fixed)
    for split in ((9, 3, 1), (10, 1, 1), (8, 3)):  # 13 PEs of 12; one PE for two attention cores; two engines
        with pytest.raises(InvalidScheduleError, match="re-allocated split"):
            check_schedule(dataclasses.replace(good, split=split), fixed)


def test_an_empty_length_mix_is_one_line_and_exit_2_writing_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(UserInputError, match="empty"):
        reallocate([], Accelerator(device("zcu102"), (8, 3, 1)), SHAPE, DENSE)
    monkeypatch.chdir(tmp_path)
    code = main(["tools", "run", "schedule.length_aware", "--args", json.dumps({"lengths": [], "model": "lm-pydoc-tiny"})])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "lengths=[] holds 0 sequences and at least 1 is needed" in err
    assert list(tmp_path.iterdir()) == []


def test_a_static_split_tuned_on_a_sample_minimises_the_summed_bound() -> None:
    base = Accelerator(device("zcu102"), (8, 3, 1))
    sample = [[24] * 8, [24] * 7 + [400], [60, 90, 10]]
    sums: dict[tuple[int, int, int], int] = {}
    for m in range(1, PES):
        for a in range(1, PES - m):
            acc = base.with_split((m, a, PES - m - a))
            sums[acc.split] = sum(lower_bound(build_tasks(singles(b), acc, SHAPE, DENSE), acc) for b in sample)
    tuned = tune_static([singles(b) for b in sample], base, SHAPE, DENSE)
    assert tuned.bound_cycles == min(sums.values()) == sums[tuned.split]
    assert tuned.given_bound_cycles == sums[base.split]
    with pytest.raises(UserInputError, match="no batches"):
        tune_static([], base, SHAPE, DENSE)


# ---- the reconfiguration cost of changing the split between batches (issue 31 item 6)

STREAM = [[24] * 7 + [400], [24] * 7 + [400], [24] * 8, [24] * 7 + [400]]
"""Skewed, the same again, short and uniform, skewed: realloc moves, stays, moves, moves back on the (8, 3, 1) design."""


def shortest_candidate(lengths: list[int], base: Accelerator, attn: AttentionConfig) -> tuple[tuple[int, int, int], int]:
    """The rule before the cost was charged, re-implemented: the shortest candidate's list schedule (ties: the earlier)."""
    best: tuple[tuple[int, int, int], int] | None = None
    for option in candidates(singles(lengths), base, SHAPE, attn):
        acc = base.with_split(option.split)
        tasks = build_tasks(singles(lengths), acc, SHAPE, attn)
        span = list_schedule(tasks, acc, upward_ranks(tasks)).makespan
        if best is None or span < best[1]:
            best = (option.split, span)
    assert best is not None
    return best


@pytest.mark.parametrize("attn", [DENSE, TOPK], ids=["dense", "topk"])
def test_a_free_reconfiguration_reproduces_the_memoryless_choice(attn: AttentionConfig) -> None:
    base = Accelerator(device("zcu102"), (8, 3, 1), cores=(1, 2, 1), reconfig_cycles=0)
    rows = compare_methods(STREAM, base, SHAPE, attn, ("realloc",))["realloc"]
    assert [(m.split, m.makespan_cycles) for m in rows] == [shortest_candidate(b, base, attn) for b in STREAM]
    assert all(m.reconfig_cycles == 0 for m in rows)


def test_each_change_of_split_is_charged_once_and_a_stay_is_free() -> None:
    cost = 1_000
    free = compare_methods(STREAM, Accelerator(device("zcu102"), (8, 3, 1), reconfig_cycles=0), SHAPE, DENSE, ("realloc",))["realloc"]
    paid = Accelerator(device("zcu102"), (8, 3, 1), reconfig_cycles=cost)
    rows = compare_methods(STREAM, paid, SHAPE, DENSE, ("realloc",))["realloc"]
    # by hand: (8, 3, 1) -> a skewed split (charged), the same batch again (free), the short batch's split (charged), back (charged)
    assert [m.split for m in rows] == [m.split for m in free]  # every saving here is far above 1,000 cycles
    splits = [(8, 3, 1)] + [m.split for m in rows]
    assert [m.reconfig_cycles for m in rows] == [cost, 0, cost, cost] == [cost * (a != b) for a, b in itertools.pairwise(splits)]
    assert [m.makespan_cycles for m in rows] == [f.makespan_cycles + m.reconfig_cycles for f, m in zip(free, rows, strict=True)]
    previous = None
    for lengths, m in zip(STREAM, rows, strict=True):  # every task waits for the reconfiguration, exactly once
        s = schedule_batch(lengths, paid, SHAPE, DENSE, "realloc", previous=previous)
        check_schedule(s, paid)
        assert min(s.start) == s.reconfig_cycles == m.reconfig_cycles
        previous = s.split
        with pytest.raises(InvalidScheduleError, match="reconfiguration"):
            check_schedule(dataclasses.replace(s, reconfig_cycles=s.reconfig_cycles + 1), paid)


@pytest.mark.parametrize("cores", [(1, 1, 1), (2, 2, 1)])
def test_a_prohibitive_cost_keeps_the_design_split_and_is_never_slower_than_the_fixed_split(cores: tuple[int, int, int]) -> None:
    base = Accelerator(device("zcu102"), (8, 3, 1), cores=cores, reconfig_cycles=10**12)
    rows = compare_methods(STREAM, base, SHAPE, TOPK, ("length-aware", "realloc"))
    assert {m.split for m in rows["realloc"]} == {base.split} and all(m.reconfig_cycles == 0 for m in rows["realloc"])
    assert [m.makespan_cycles for m in rows["realloc"]] == [m.makespan_cycles for m in rows["length-aware"]]


def test_a_change_within_the_cost_keeps_the_previous_split() -> None:
    free = Accelerator(device("zcu102"), (8, 3, 1), reconfig_cycles=0)
    moved, span = shortest_candidate(STREAM[0], free, DENSE)
    stay = schedule_batch(STREAM[0], free, SHAPE, DENSE, "length-aware").makespan
    saving = stay - span
    assert saving > 0 and moved != free.split
    for cost, expect in ((saving - 1, moved), (saving, free.split), (saving + 1, free.split)):  # a tie keeps the previous split
        s = schedule_batch(STREAM[0], dataclasses.replace(free, reconfig_cycles=cost), SHAPE, DENSE, "realloc")
        assert s.split == expect and s.makespan == min(stay, span + cost)


def test_a_negative_cost_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(UserInputError, match=r"reconfig_cycles=-1 must be an integer >= 0"):
        Accelerator(device("zcu102"), (8, 3, 1), reconfig_cycles=-1)
    with pytest.raises(UserInputError, match=r"previous split \(9, 3, 1\)"):
        schedule_batch([30], Accelerator(device("zcu102"), (8, 3, 1)), SHAPE, DENSE, "realloc", previous=(9, 3, 1))
    monkeypatch.chdir(tmp_path)
    code = main(["tools", "run", "schedule.length_aware", "--args", json.dumps({"lengths": [30, 60], "reconfig_cycles": -5})])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and list(tmp_path.iterdir()) == []
    assert len(err.strip().splitlines()) == 1 and "reconfig_cycles" in err and "greater than or equal to 0 (got -5)" in err

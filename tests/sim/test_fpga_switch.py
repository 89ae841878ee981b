"""sim.fpga.switch: realloc's change rules (myopic, ski-rental break-even) and the hindsight optimum, on hand-built
makespan tables, against a brute force over every split sequence, and on the scheduler's own streams."""

from __future__ import annotations

import dataclasses
import itertools
import json
import typing
from pathlib import Path

import numpy as np
import pytest

from coevo.agent.cli import main
from coevo.sim.errors import UserInputError
from coevo.sim.fpga import (
    CHANGE_RULE,
    CHANGE_RULES,
    Accelerator,
    AttentionConfig,
    BreakEven,
    TransformerShape,
    amortized_path,
    build_tasks,
    candidates,
    check_schedule,
    compare_methods,
    device,
    hindsight_path,
    list_schedule,
    myopic_path,
    path_cycles,
    realloc_candidates,
    realloc_stream,
    split_makespans,
    upward_ranks,
)
from coevo.sim.fpga.config import FpgaConfig
from coevo.tools import REGISTRY, ToolArgumentError, call_tool
from coevo.tools.fpga import LengthAwareArgs

A, B, C = (8, 3, 1), (6, 4, 2), (9, 2, 1)
SHAPE = TransformerShape(d_model=64, n_layers=2, n_heads=2, d_ff=256)  # lm-pydoc-tiny's shape
DENSE = AttentionConfig("dense")


def table(rows: list[tuple[int, ...]], splits: tuple[tuple[int, int, int], ...] = (A, B)) -> list[dict[tuple[int, int, int], int]]:
    return [dict(zip(splits, row, strict=True)) for row in rows]


def run_rule(rows: list[dict[tuple[int, int, int], int]], cost: int, start: tuple[int, int, int] = A) -> list[tuple[int, int, int]]:
    rule = BreakEven(start, cost)
    out = []
    for row in rows:
        rule.offer(list(row))
        out.append(rule.step(row))
    return out


# ---- the break-even rule on hand-built makespans: it changes exactly when the saving since the last change reaches the cost


@pytest.mark.parametrize(
    ("b_spans", "expect"),
    [
        ((96, 97, 98), [A, A, A]),  # savings 4, 4 + 3, 4 + 3 + 2 = 9 < 10: one cycle short, never due
        ((96, 97, 97), [A, A, B]),  # 4 + 3 + 3 = 10 = the cost: due at the third batch, which pays it
        ((96, 97, 99), [A, A, A]),  # 4 + 3 + 1 = 8: never due
        ((90, 100, 100), [B, B, B]),  # 10 on the first batch: due at once
        ((91, 100, 100), [A, A, A]),  # 9, then nothing saved
    ],
)
def test_break_even_changes_when_the_accumulated_saving_reaches_the_cost(b_spans: tuple[int, ...], expect: list[object]) -> None:
    rows = table([(100, b) for b in b_spans])
    saved = list(itertools.accumulate(100 - b for b in b_spans))
    first_due = next((i for i, s in enumerate(saved) if s >= 10), None)  # the break-even batch, counted by hand
    assert expect == [A if first_due is None or i < first_due else B for i in range(len(rows))]
    assert run_rule(rows, 10) == expect == amortized_path(rows, [[A, B]] * len(rows), A, 10)


def test_a_slower_batch_lowers_the_saving_but_never_below_zero() -> None:
    # B saves 5, loses 20 (the saving floors at 0, not -15), saves 8 (8 < 10), saves 2 more (10): due at the fourth batch
    rows = table([(100, 95), (100, 120), (100, 92), (100, 98)])
    assert run_rule(rows, 10) == [A, A, A, B]
    # the same batches with the loss last: 5 + 8 = 13 >= 10 at the second batch; B held (A saves nothing at the third);
    # at the fourth A saves 20 over B: back to A
    assert run_rule(table([(100, 95), (100, 92), (100, 98), (100, 120)]), 10) == [A, B, B, A]


def test_after_a_change_the_counters_restart_from_the_new_split() -> None:
    # A -> B at batch 1 (saving 12); back to A needs A's savings over B to reach 10 again: 6 (batch 2), 6 + 4 (batch 3)
    rows = table([(100, 88), (94, 100), (96, 100), (100, 100)])
    assert run_rule(rows, 10) == [B, B, A, A]


def test_the_due_split_with_the_largest_saving_wins_and_equal_makespans_never_change() -> None:
    rows = table([(100, 95, 97), (100, 95, 90)], (A, B, C))  # after batch 2: B saved 10, C saved 13
    assert run_rule(rows, 10) == [A, C]
    flat = table([(100, 100, 100)] * 4, (A, B, C))
    assert run_rule(flat, 0) == [A] * 4 == myopic_path(flat, [[A, B, C]] * 4, A, 0)[:1] + [A] * 3


def test_the_rule_needs_every_watched_split_and_only_sees_the_current_batch() -> None:
    rule = BreakEven(A, 10)
    rule.offer([A, B])
    with pytest.raises(ValueError, match="lack the watched splits"):
        rule.step({A: 100})
    # online: the choice at batch t is the same whatever comes after it
    rows = table([(100, 96), (100, 97), (100, 97), (100, 200), (50, 400)])
    full = amortized_path(rows, [[A, B]] * 5, A, 10)
    assert all(amortized_path(rows[:t], [[A, B]] * t, A, 10) == full[:t] for t in range(1, 6))


# ---- the hindsight optimum: dynamic programming against a brute force over every split sequence


def brute_force(rows: list[dict[tuple[int, int, int], int]], start: tuple[int, int, int], cost: int) -> int:
    """The least total over every sequence of splits, summed here without the module's path_cycles."""
    best = None
    for path in itertools.product(list(rows[0]), repeat=len(rows)):
        total, held = 0, start
        for row, split in zip(rows, path, strict=True):
            total += row[split] + (cost if split != held else 0)
            held = split
        best = total if best is None else min(best, total)
    assert best is not None
    return best


def random_tables(count: int) -> list[tuple[list[dict[tuple[int, int, int], int]], int]]:
    rng = np.random.default_rng(7)
    out = []
    for _ in range(count):
        batches = int(rng.integers(1, 6))
        out.append(
            (table([tuple(int(x) for x in rng.integers(50, 150, size=3)) for _ in range(batches)], (A, B, C)), int(rng.integers(0, 80)))
        )
    return out


@pytest.mark.parametrize(("rows", "cost"), random_tables(40))
def test_hindsight_equals_the_brute_force_and_no_online_rule_beats_it(rows: list[dict[tuple[int, int, int], int]], cost: int) -> None:
    least, path = hindsight_path(rows, A, cost)
    assert least == brute_force(rows, A, cost) == path_cycles(rows, path, A, cost)
    offered = [[B, C]] * len(rows)  # the held split is watched from the start; the batch offers the others
    for rule in (myopic_path, amortized_path):
        assert path_cycles(rows, rule(rows, offered, A, cost), A, cost) >= least


def test_hindsight_pays_a_change_that_repays_over_later_batches() -> None:
    rows = table([(100, 94)] * 3)  # each batch saves 6 on B; one change of 10 repays over two batches
    assert hindsight_path(rows, A, 10) == (94 * 3 + 10, [B, B, B])
    assert myopic_path(rows, [[A, B]] * 3, A, 10) == [A, A, A]  # 6 < 10 every time
    assert amortized_path(rows, [[A, B]] * 3, A, 10) == [A, B, B]  # 6 + 6 >= 10 at the second batch
    with pytest.raises(ValueError, match="no batches"):
        hindsight_path([], A, 10)
    with pytest.raises(ValueError, match="same splits"):
        hindsight_path([{A: 1, B: 2}, {A: 1}], A, 10)


# ---- zero cost: both rules take the best split they choose among, at every batch


@pytest.mark.parametrize(("rows", "cost"), random_tables(20))
def test_at_zero_cost_both_rules_follow_the_best_split(rows: list[dict[tuple[int, int, int], int]], cost: int) -> None:
    del cost
    offered = [[A, B, C]] * len(rows)  # every split offered every batch: both choose among the same splits
    best = [min(row, key=lambda s: row[s]) for row in rows]  # random tables: ties are rare, and then either is a best
    for rule in (myopic_path, amortized_path):
        path = rule(rows, offered, A, 0)
        assert [row[s] for row, s in zip(rows, path, strict=True)] == [row[s] for row, s in zip(rows, best, strict=True)]
        assert path_cycles(rows, path, A, 0) == hindsight_path(rows, A, 0)[0]
    # offered fewer splits, amortized still chooses among all it has seen, so it is never slower on a batch than myopic
    few = [[(A, B, C)[i % 3]] for i in range(len(rows))]
    for row, m, a in zip(rows, myopic_path(rows, few, A, 0), amortized_path(rows, few, A, 0), strict=True):
        assert row[a] <= row[m]


# ---- the scheduler's stream: realloc_stream, the tables and the checker

STREAM = [[24] * 7 + [400]] * 3
"""The same skewed batch three times: one change repays over two batches but not over one."""


def saving_of_one_batch(base: Accelerator) -> tuple[tuple[int, int, int], int, int]:
    """The shortest candidate's split and list-schedule makespan, and the design split's makespan, re-built here."""
    groups = [[x] for x in STREAM[0]]
    spans = {}
    for option in candidates(groups, base, SHAPE, DENSE):
        acc = base.with_split(option.split)
        tasks = build_tasks(groups, acc, SHAPE, DENSE)
        spans[option.split] = list_schedule(tasks, acc, upward_ranks(tasks)).makespan
    moved = min(spans, key=lambda s: spans[s])
    return moved, spans[moved], spans[base.split]


def test_realloc_stream_amortized_changes_at_the_break_even_batch_and_every_schedule_checks() -> None:
    free = Accelerator(device("zcu102"), (8, 3, 1), reconfig_cycles=0)
    moved, span, stay = saving_of_one_batch(free)
    saving = stay - span
    assert saving > 0 and moved != free.split
    cost = saving + saving // 2  # more than one batch saves, less than two
    paid = dataclasses.replace(free, reconfig_cycles=cost)
    myopic = realloc_stream(STREAM, paid, SHAPE, DENSE)
    amortized = realloc_stream(STREAM, dataclasses.replace(paid, change_rule="amortized"), SHAPE, DENSE)
    assert [s.split for s in myopic] == [free.split] * 3 and [s.makespan for s in myopic] == [stay] * 3
    assert [s.split for s in amortized] == [free.split, moved, moved]
    assert [s.makespan for s in amortized] == [stay, span + cost, span] and [s.reconfig_cycles for s in amortized] == [0, cost, 0]
    for s in myopic + amortized:
        check_schedule(s, paid)
    # the hindsight optimum over the same splits changes at once: 3 span + cost, below both
    offered = [realloc_candidates(b, paid, SHAPE, DENSE) for b in STREAM]
    splits = list(dict.fromkeys([free.split, *itertools.chain.from_iterable(offered)]))
    rows = [split_makespans(b, paid, SHAPE, DENSE, splits) for b in STREAM]
    least, path = hindsight_path(rows, free.split, cost)
    assert least == 3 * span + cost < sum(s.makespan for s in amortized) < sum(s.makespan for s in myopic)
    assert path == [moved] * 3
    assert amortized_path(rows, offered, free.split, cost) == [s.split for s in amortized]
    assert myopic_path(rows, offered, free.split, cost) == [s.split for s in myopic]
    # compare_methods runs the accelerator's rule
    via = compare_methods(STREAM, dataclasses.replace(paid, change_rule="amortized"), SHAPE, DENSE, ("realloc",))["realloc"]
    assert [m.makespan_cycles for m in via] == [s.makespan for s in amortized]


# ---- the setting: one default, the allowed set, one-line errors


def test_the_change_rule_is_declared_once_and_bad_values_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert CHANGE_RULE == "myopic" == Accelerator.change_rule == FpgaConfig.change_rule
    assert typing.get_args(LengthAwareArgs.model_fields["change_rule"].annotation) == CHANGE_RULES
    with pytest.raises(UserInputError, match=r"^change_rule='greedy' is not one of myopic, amortized$"):
        Accelerator(device("zcu102"), (8, 3, 1), change_rule="greedy")
    tool = REGISTRY.get("schedule.length_aware")
    with pytest.raises(ToolArgumentError, match=r"change_rule.*'myopic' or 'amortized'.*greedy"):
        call_tool(tool, {"lengths": [30, 60], "batch": 2, "model": "lm-pydoc-tiny", "change_rule": "greedy"})
    monkeypatch.chdir(tmp_path)
    code = main(["tools", "run", "schedule.length_aware", "--args", json.dumps({"lengths": [30, 60], "change_rule": "greedy"})])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and list(tmp_path.iterdir()) == []
    assert len(err.strip().splitlines()) == 1 and "change_rule" in err and "greedy" in err
    value = call_tool(tool, {"lengths": [30, 600, 30, 600], "batch": 2, "model": "lm-pydoc-tiny", "change_rule": "amortized"}).value
    assert value["change_rule"] == "amortized"

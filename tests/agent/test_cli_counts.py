"""What `coevo search` and `coevo runs` count say the same thing in the table, the JSON and the notes.

Zero-cost mode's budget counts evaluations on the proxies' estimate, none paid; a front
scored after the search (zero-cost, few-shot, ``--budget 0``) is the set of designs reported
under the estimate or prediction, and the front table keeps those of them non-dominated on
the truth.
"""

from __future__ import annotations

import json
import re

import pytest

from coevo.agent.cli import main

ZERO_COST = ["search", "--device", "eyeriss", "--mode", "zero-cost", "--proposer", "random", "--budget", "6"]


def _words(text: str) -> str:
    """``text`` with every run of whitespace (and the table borders rich wraps titles between) as one space."""
    return " ".join(re.sub(r"[│┃]", " ", text).split())


def _json(capsys: pytest.CaptureFixture[str], args: list[str]) -> dict:
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _reported_and_front(data: dict, front_of: str) -> tuple[int, int]:
    """(reported designs, front rows), checked against the notes that name them."""
    reported, front = data["reported"], len(data["front"])
    assert 0 < front <= reported
    notes = " | ".join(data["notes"])
    assert f"reported: the {reported} designs of the {front_of} front" in notes, notes
    predicted = sum(not row["paid"] for row in data["front"])
    assert f"front: {front} of the {reported} reported designs are non-dominated on the true objectives" in notes, notes
    unpaid = "estimated" if front_of == "estimated" else "predicted"  # zero-cost mode's proxies estimate; a predictor predicts
    assert f"({front - predicted} paid, {predicted} {unpaid})" in notes
    return reported, front


def test_zero_cost_pays_for_nothing_everywhere_it_is_counted(capsys: pytest.CaptureFixture[str], storage: str) -> None:
    data = _json(capsys, [*ZERO_COST, "--storage", storage])
    assert (data["evaluations"], data["budget_used"], data["failed"]) == (6, 6, 0)
    assert data["paid"] == data["expensive_queries"] == data["information"]["paid"] == 0
    assert not any(re.search(r"\d+ paid evaluations", n) for n in data["notes"]), data["notes"]  # the runner's notes say so too
    reported, front = _reported_and_front(data, "estimated")

    assert main([*ZERO_COST, "--storage", storage]) == 0  # resumed: the table of the same study
    said = capsys.readouterr()
    table = _words(said.out)
    assert "6 evaluations on estimated objectives, none paid" in table and "paid evaluations" not in table
    assert f"front: {front} of the {reported} reported designs, non-dominated on the true objectives (0 paid, {front} estimated" in table
    assert "already has the 6 evaluations of its budget" in _words(said.err)

    listed = _json(capsys, ["runs", "list", "--storage", storage])
    shown = _json(capsys, ["runs", "show", data["study"], "--storage", storage])
    for info in (listed, shown):
        assert (info["evaluations"], info["budget_used"], info["paid"], info["budget"]) == (6, 6, 0, 6)
    assert main(["runs", "list", "--storage", storage]) == 0
    assert "6/6 (0 paid: estimated)" in _words(capsys.readouterr().out)


def test_query_mode_pays_for_every_evaluation_of_its_budget(capsys: pytest.CaptureFixture[str], storage: str) -> None:
    data = _json(capsys, ["search", "--proposer", "random", "--budget", "5", "--storage", storage])
    assert data["evaluations"] == data["budget_used"] == data["paid"] == data["expensive_queries"] == data["information"]["paid"] == 5
    assert data["reported"] == 5  # the found set is every evaluation; the front table keeps its non-dominated ones
    assert not any(n.startswith("front: ") for n in data["notes"])
    listed = _json(capsys, ["runs", "list", "--storage", storage])
    assert (listed["budget_used"], listed["paid"]) == (5, 5)
    assert main(["runs", "list", "--storage", storage]) == 0
    assert "5/5" in (out := _words(capsys.readouterr().out)) and "estimated" not in out


def test_budget_zero_note_json_and_table_count_the_same_designs(capsys: pytest.CaptureFixture[str], storage: str) -> None:
    args = ["search", "--problem", "nb201", "--dataset", "cifar100", "--device", "pixel3", "--budget", "0", "--storage", storage]
    data = _json(capsys, args)
    assert data["paid"] == data["budget_used"] == 0
    reported, front = _reported_and_front(data, "predicted")
    assert main(args) == 0
    table = _words(capsys.readouterr().out)
    assert f"front: {front} of the {reported} reported designs, non-dominated on the true objectives (0 paid, {front} predicted" in table

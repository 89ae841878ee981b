"""Terminal tables: design strings are printed whole, whatever the width; records in cells read as key=value pairs."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from coevo.agent.tables import print_design_table

ARCH = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_1x1~1|nor_conv_3x3~2|"


@pytest.mark.parametrize("width", [60, 100, 200])
def test_designs_are_never_folded(width: int) -> None:
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None)
    designs = [ARCH, ARCH.replace("nor_conv_1x1", "avg_pool_3x3")]
    print_design_table(console, "front", ["latency_ms", "accuracy"], [["6.68", "94.37"], ["7.01", "94.20"]], designs, design_header="arch")
    lines = buf.getvalue().splitlines()
    for design in designs:
        assert sum(design in line for line in lines) == 1  # whole, on one line, once
    # a design longer than the terminal is one line the terminal wraps (no newline inside, so it copies whole)
    assert all(len(line) <= width for line in lines if not any(d in line for d in designs))
    inline = any(ARCH in line and "94.37" in line for line in lines)
    assert inline == (width >= 130)  # beside its row when the row fits (~125 characters), listed below otherwise


def test_a_flat_record_in_a_cell_reads_as_key_value_pairs_and_a_nested_one_stays_json() -> None:
    from coevo.agent.tables import render_value

    buf = io.StringIO()
    value = {"studies": [{"study": "s", "problem": {"problem": "nb201", "dataset": "cifar10", "bits": 4.5}, "deep": {"a": [1, 2]}}]}
    render_value(Console(file=buf, width=200, color_system=None), value)
    text = buf.getvalue()
    assert "problem=nb201, dataset=cifar10, bits=4.5" in text and '{"problem"' not in text
    assert '{"a": [1, 2]}' in text  # not flat: kept as JSON


def test_a_flag_in_a_record_reads_yes_or_no_as_the_search_table_writes_it() -> None:
    from coevo.agent.tables import render_value

    buf = io.StringIO()
    front = [{"point_id": "7", "paid": True}, {"point_id": "9", "paid": False}]
    render_value(Console(file=buf, width=200, color_system=None), {"front": front})
    rows = [line.split("│") for line in buf.getvalue().splitlines() if "│" in line]
    assert [[c.strip() for c in r if c.strip()] for r in rows] == [["7", "yes"], ["9", "no"]]

"""``python -m coevo.figures kb-joint``: the page rendered from saved rows (the paired differences and their interval)."""

from __future__ import annotations

from typing import Any

from coevo.figures.kb_joint import QUANT, render


def _row(arm: str, seed: int, hv: float) -> dict[str, Any]:
    return {
        "arm": arm,
        "seed": seed,
        "hv_ratio": hv,
        "transferred": "src: 100 paid evaluations seeded part cell",
        "command": f"coevo {arm}",
    }


def test_the_page_pairs_seeds_and_gives_the_t_interval_of_the_differences() -> None:
    rows = [_row("source", 0, 0.99)]
    for seed, (alone, seeded) in enumerate([(0.90, 0.92), (0.92, 0.95), (0.94, 0.98)]):
        rows += [_row("alone", seed, alone), _row("kb-from", seed, seeded)]
    page = render(rows)
    # differences 0.02, 0.03, 0.04: mean 0.03, sd 0.01, t(0.975, 2) = 4.3027 -> half-width 0.0248
    assert "**+0.0300 ± 0.0248** (the interval excludes 0)" in page
    assert "| 1 | 0.9200 | 0.9500 | +0.0300 |" in page
    assert "src: 100 paid evaluations seeded part cell" in page


def test_a_difference_that_changes_sign_is_said_to_include_zero() -> None:
    rows = [_row("source", 0, 0.99)]
    for seed, (alone, seeded) in enumerate([(0.90, 0.93), (0.92, 0.90), (0.94, 0.94)]):
        rows += [_row("alone", seed, alone), _row("kb-from", seed, seeded)]
    assert "(the interval includes 0)" in render(rows)


def test_the_quant_pair_gets_its_own_section_with_the_verdicts_of_the_imported_heuristics() -> None:
    rows = [_row("source", 0, 0.99)]
    for seed, (alone, seeded) in enumerate([(0.90, 0.92), (0.92, 0.95), (0.94, 0.98)]):
        rows += [_row("alone", seed, alone), _row("kb-from", seed, seeded)]
    quant = [{**_row("source", 0, 0.0), "pair": QUANT, "hv_ratio": "", "transferred": ""}]
    for seed, (alone, seeded) in enumerate([(0.95, 0.94), (0.93, 0.95), (0.96, 0.96)]):
        quant += [{**_row("alone", seed, alone), "pair": QUANT, "transferred": ""}]
        quant += [{**_row("kb-from", seed, seeded), "pair": QUANT, "transferred": "", "imported": f"9 imported: {seed} held"}]
    page = render(rows + quant)
    nb201, deploy = page.split(f"## {QUANT}")
    assert "**+0.0300 ± 0.0248**" in nb201 and "imported" not in nb201  # the first pair as before, rows without a pair
    # differences -0.01, +0.02, 0: mean +0.0033, sd 0.01528, t(0.975, 2) = 4.3027 -> half-width 0.0379
    assert "**+0.0033 ± 0.0379** (the interval includes 0)" in deploy and "(no exact front)" in deploy
    assert "its heuristics only (no evaluations)" in deploy and "seed 2: 9 imported: 2 held" in deploy

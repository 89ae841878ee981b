"""The noc-energy figure's scope table and MSB-occupancy reading, on hand-made rows (no training)."""

from __future__ import annotations

from pathlib import Path

from coevo.figures import noc_energy


def _wise(model: str, register: str, compute: list[float], vs_agnostic: list[float] | None = None) -> list[dict[str, str]]:
    # on-chip and total reductions a tenth and a hundredth of the compute one: dilution 10x and 100x
    agnostic = vs_agnostic if vs_agnostic is not None else [0.0] * len(compute)
    return [
        {
            "model": model,
            "register": register,
            "seed": str(i),
            "scheme": "layer-wise",
            "compute_reduction_vs_int8": str(c),
            "onchip_reduction_vs_int8": str(c / 10),
            "total_reduction_vs_int8": str(c / 100),
            "compute_reduction_vs_agnostic": str(g),
        }
        for i, (c, g) in enumerate(zip(compute, agnostic, strict=True))
    ]


def test_scope_table_names_every_scope_and_places_the_paper_against_the_interval() -> None:
    # [0.5, 0.7]: mean 0.6, t(0.975, 1) = 12.706, half-width 12.706 * 0.1414 / 1.414 = 1.27: 0.586 inside
    # [0.40, 0.42]: mean 0.41, half-width 12.706 * 0.01414 / 1.414 = 0.127: up to 0.537, the paper's 0.586 above it
    rows = _wise("a", "22 bits", [0.5, 0.7]) + _wise("b", "fitted", [0.40, 0.42])
    text = "\n".join(noc_energy._scope_table(rows, 2.0))
    assert "MAC / compute only | on-chip (compute + SRAM) | total with DRAM (compute + SRAM + DRAM)" in text
    assert "| a | 22 bits | 2 | 60.00 ± 127.06 | 6.00 ± 12.71 | 0.60 ± 1.27 | 70.0 | inside |" in text
    assert "| b | fitted | 2 | 41.00 ± 12.71 | 4.10 ± 1.27 | 0.41 ± 0.13 | 42.0 | above (mean -17.6 points) |" in text
    assert "save 10-10 times less in the on-chip scope and 100-100 times less in the total scope" in text


def test_layer_wise_against_layer_agnostic_gets_a_verdict_per_model_and_register() -> None:
    # [0.30, 0.40]: mean 0.35, half-width 12.706 * 0.0707 / 1.414 = 0.635, holds 0; [0.30, 0.31]: 0.305 ± 0.064, above 0
    rows = _wise("a", "22 bits", [0.5, 0.6], [0.30, 0.40]) + _wise("b", "22 bits", [0.5, 0.6], [0.30, 0.31])
    rows += _wise("c", "fitted", [0.5, 0.6], [-0.30, -0.31])
    text = "\n".join(noc_energy._against_agnostic(rows))
    assert "| a | 22 bits | 2 | 35.00 ± 63.53 | no measurable gain (the interval includes 0) |" in text
    assert "| b | 22 bits | 2 | 30.50 ± 6.35 | layer-wise saves more |" in text
    assert "| c | fitted | 2 | -30.50 ± 6.35 | layer-wise saves less |" in text


def test_occupancy_reading_counts_groups_by_register() -> None:
    def row(reg: str, layer: str, counts: list[int]) -> dict[str, str]:
        return {"model": "m", "seed": "0", "layer": layer, "rows": "16", "register": reg, **{f"n{g}": str(n) for g, n in enumerate(counts)}}

    keys = {
        ("m", "16", "22 bits"): [row("22 bits", "l1", [7, 0, 0, 0, 0, 0, 3]), row("22 bits", "l2", [8, 0, 0, 0, 0, 0, 2])],
        ("m", "16", "fitted"): [row("fitted", "l1", [2, 1, 1, 1, 1, 1, 3]), row("fitted", "l2", [5, 1, 0, 0, 0, 2, 2])],
    }
    text = noc_energy._occupancy_reading(keys)
    # 22 bits: no transition in d = 1-5; fitted: (5 + 3) of (10 + 10) = 40 %, all 7 groups in l1 only
    assert "22 bits: d = 1-5 hold 0.00 % (m, rows 16) to 0.00 % (m, rows 16) of the transitions; all 7 groups populated in 0 of 2" in text
    assert "fitted: d = 1-5 hold 40.00 % (m, rows 16) to 40.00 % (m, rows 16) of the transitions; all 7 groups populated in 1 of 2" in text


def test_the_header_names_the_runs_that_wrote_the_csvs_from_their_provenance(tmp_path: Path) -> None:
    import json

    assert "not recorded" in noc_energy._runs(tmp_path)[0]
    (tmp_path / "provenance.json").write_text(
        json.dumps(
            {
                "steps-a.csv": {"command": "python -m coevo.figures noc-energy --seeds 5", "git": "abc"},
                "choices-a.csv": {"command": "python -m coevo.figures noc-energy --seeds 5", "git": "abc"},
                "steps-a-psumfit.csv": {"command": "python -m coevo.figures noc-energy --psum-bits 0", "git": "def-dirty"},
                "energy.md": {"command": "ignored: not a CSV", "git": "x"},
            }
        )
    )
    assert noc_energy._runs(tmp_path) == [
        "* `python -m coevo.figures noc-energy --seeds 5` at abc: choices-a.csv, steps-a.csv",
        "* `python -m coevo.figures noc-energy --psum-bits 0` at def-dirty: steps-a-psumfit.csv",
    ]

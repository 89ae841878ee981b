"""The ``compress`` search problem: encoding, cheap energy estimate, niches, and a short co-evolution search."""

from __future__ import annotations

import json

import pytest

from coevo.agent.cli import main
from coevo.search.compress.problem import CompressProblem
from coevo.search.errors import UserInputError
from coevo.search.niches import niche_of
from coevo.search.problems import make_problem


def test_restrictions_round_trip_and_cost_less_energy_when_tighter() -> None:
    p = make_problem("compress", {})
    assert isinstance(p, CompressProblem)
    point = p.parse_design("conv1=256 conv2=8 conv3=32 fc1=64 fc2=256")
    assert point == (256, 8, 32, 64, 256) and p.parse_design(p.describe(point)) == point
    ratios = p.cheap_values([(256,) * 5, (256, 64, 256, 256, 256), (256, 8, 256, 256, 256)])["energy_ratio"]
    assert ratios[0] == pytest.approx(1.0) and ratios[0] > ratios[1] > ratios[2]
    compute = make_problem("compress", {"energy_scope": "compute"}).cheap_values([(256, 8, 256, 256, 256)])["energy_ratio"]
    on_chip = make_problem("compress", {"energy_scope": "on_chip"}).cheap_values([(256, 8, 256, 256, 256)])["energy_ratio"]
    # memory energy does not shrink with the weights: SRAM dilutes the on-chip ratio, SRAM + DRAM the total one more
    assert compute[0] < on_chip[0] < ratios[2]
    with pytest.raises(UserInputError, match="energy_scope"):
        make_problem("compress", {"energy_scope": "dram"})
    assert all(sum(a != b for a, b in zip(point, n, strict=True)) == 1 for n in p.neighbours(point))
    niches = p.niches()
    assert [niche_of(niches, x) for x in ((256,) * 5, (64, 64, 64, 256, 256), (4, 4, 4, 4, 4))] == ["light", "medium", "heavy"]
    with pytest.raises(UserInputError, match="conv2=5 outside the space"):
        p.parse_design("conv1=256 conv2=5 conv3=32 fc1=64 fc2=256")


@pytest.mark.slow  # each evaluation is a round of quantization-aware training: 6 of them, about 30 s on 2 busy cores
def test_pelnas_search_on_the_compress_problem(capsys: pytest.CaptureFixture[str], storage: str) -> None:
    assert main(["search", "--problem", "compress", "--proposer", "pelnas", "--budget", "6", "--storage", storage, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["evaluations"] == 6 and data["front"]
    assert all(0 < row["energy_ratio"] <= 1.0 + 1e-9 and 0 <= row["accuracy"] <= 100 for row in data["front"])
    assert max(row["accuracy"] for row in data["front"]) > 90  # the light end of the front keeps the task

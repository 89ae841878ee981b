"""Default study names: every scalar option in the name, so a sweep over one gets a study per value.

The conformance suite checks the same for every registered problem (``study_names`` in
coevo.testing.problems); these pin the format and run a sweep end to end.
"""

from __future__ import annotations

import pytest

from coevo.search.problems import make_problem
from coevo.search.runner import run_search
from coevo.search.study import default_study_name, option_name_part, spec_study_name


@pytest.mark.parametrize(
    ("value", "part"),
    [(0.05, "0.05"), (0.03, "0.03"), (12.8, "12.8"), (1.0, "1"), (3000.0, "3000"), (1e-05, "1e-05"), (0.1 + 0.2, "0.30000000000000004")],
)
def test_a_float_is_written_short_and_never_shared_by_another_value(value: float, part: str) -> None:
    assert option_name_part(value) == part


def test_strings_ints_and_bools_are_written_as_they_read_nested_settings_are_left_out() -> None:
    assert [option_name_part(v) for v in ("9:1", 8, 0, True, False)] == ["9:1", "8", "0", "true", "false"]
    assert option_name_part(None) is None and option_name_part({"a": 1}) is None and option_name_part([1, 2]) is None


def test_names_of_problems_without_float_options_are_the_names_they_always_had() -> None:
    # existing studies of these problems resume under their default names
    assert default_study_name(make_problem("nb201", {"dataset": "cifar10", "device": "fpga"}), "tpe", 0) == "nb201-cifar10-fpga-tpe-s0"
    spec = {"problem": "pipeline", "model": "unet-tiny", "cluster": "v100x8-pcie", "global_batch": 16, "resolution": 8}
    assert spec_study_name(spec, "pelnas", 0) == "pipeline-unet-tiny-v100x8-pcie-16-8-pelnas-s0"


def test_float_options_are_in_the_name_in_the_spec_order() -> None:
    noc = {"problem": "noc", "topology": "mesh", "k": 8, "traffic": "hotspot", "load": 0.5, "gt_share": 0.7}
    noc |= {"cycles": 3000, "traffic_seed": 0}
    assert spec_study_name(noc, "pelnas", 0) == "noc-mesh-8-hotspot-0.5-0.7-3000-0-pelnas-s0"
    reram = {"problem": "reram", "model": "mlp-digits", "fault_rate": 0.05, "sa0_sa1": "9:1", "fault_maps": 8}
    assert spec_study_name(reram, "pelnas", 0, "-kb") == "reram-mlp-digits-0.05-9:1-8-pelnas-kb-s0"


def test_a_sweep_over_a_float_option_runs_a_study_per_value_in_one_storage(storage: str) -> None:
    # before, both runs were named nb201-accel-cifar10-random-s0 and the second was refused:
    # "study ... already exists for problem {... 'dram_gbps': 12.8}"
    first = run_search(make_problem("nb201-accel", {"dram_gbps": 12.8}), "random", budget=2, storage=storage)
    second = run_search(make_problem("nb201-accel", {"dram_gbps": 25.6}), "random", budget=2, storage=storage)
    assert (first.study, second.study) == ("nb201-accel-cifar10-12.8-random-s0", "nb201-accel-cifar10-25.6-random-s0")
    assert first.evaluations == second.evaluations == 2

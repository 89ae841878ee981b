from __future__ import annotations

import csv

import numpy as np
import pytest

from coevo.search.errors import UserInputError
from coevo.search.nb201 import DATASETS, NB201Problem, load_table, parse_arch
from tests.conftest import IN_CI, SHARED

CSV = SHARED / "data" / "nb201" / "nb201_accuracy_latency.csv"


def test_columns_and_names() -> None:
    table = load_table()
    assert set(table.accuracy) == set(DATASETS)
    for device in ("fpga", "raspi4", "pixel3", "eyeriss", "titan_rtx_256", "gold_6226"):
        assert device in table.devices
    assert all(len(v) == 15625 for v in [*table.accuracy.values(), *table.latency.values()])


def test_shipped_table_equals_the_source_csv() -> None:
    """The shipped table is the source CSV in ../shared (beside the checkout).

    A plain clone has no ../shared and skips, saying so; CI (``CI=true``) puts shared/ beside
    the clone, so there a missing CSV fails: the check must not pass silently where it runs.
    """
    if not CSV.exists():
        where = f"source table {CSV} not present (it sits beside the checkout in ../shared)"
        if IN_CI:
            pytest.fail(f"{where}; CI must provide shared/ beside the clone")
        pytest.skip(where)
    table = load_table()
    with CSV.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 15625
    for col in rows[0]:
        if col.endswith("_test_acc"):
            got = table.accuracy[col.removesuffix("_test_acc")]
        elif col.startswith("lat_"):
            got = table.latency[col[4:-3]]
        else:
            continue
        assert np.array_equal(got, np.array([float(r[col]) for r in rows])), col
    for r in rows[::97]:
        assert table.index_of(parse_arch(r["arch"])) == int(r["index"])


def test_unknown_names_list_valid_ones() -> None:
    with pytest.raises(UserInputError, match=r"valid devices: .*fpga.*raspi4"):
        NB201Problem(dataset="cifar10", device="tpu")
    with pytest.raises(UserInputError, match=r"dataset: input should be 'cifar10', 'cifar100' or 'imagenet16_120', got 'mnist'"):
        NB201Problem(dataset="mnist")


@pytest.mark.parametrize("dataset", DATASETS)
def test_every_dataset_device_pair_is_a_problem(dataset: str) -> None:
    table = load_table()
    for device in table.devices:
        p = NB201Problem(dataset=dataset, device=device)
        ref = p.reference()
        assert ref.hv > 0 and len(ref.ids) >= 1

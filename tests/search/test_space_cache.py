"""The on-disk cache of a problem's whole space: computed once, read back equal, recomputed when corrupt or changed."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from coevo.search.space_cache import cache_path, cached_space


def _space() -> dict[str, np.ndarray]:
    return {"first": np.array([1.0, 2.5]), "second": np.array([3.0, 0.5]), "ids": np.array(["a", "b"], dtype=str)}


def test_a_space_is_computed_once_and_read_back_equal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COEVO_CACHE", str(tmp_path))
    calls: list[int] = []

    def compute() -> dict[str, np.ndarray]:
        calls.append(1)
        return _space()

    first = cached_space("p", {"model": "m"}, compute)
    again = cached_space("p", {"model": "m"}, compute)
    assert len(calls) == 1 and cache_path("p", {"model": "m"}).parent == tmp_path / "spaces"
    assert all(np.array_equal(first[k], again[k]) for k in first) and list(again["ids"]) == ["a", "b"]
    cached_space("p", {"model": "other"}, compute)  # another option: another key, computed
    assert len(calls) == 2


def test_a_corrupt_cache_file_is_computed_again_and_rewritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("COEVO_CACHE", str(tmp_path))
    path = cache_path("p", {})
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not an npz")
    with caplog.at_level(logging.WARNING):
        got = cached_space("p", {}, _space)
    assert list(got["ids"]) == ["a", "b"] and "could not be read" in caplog.text
    assert list(cached_space("p", {}, lambda: pytest.fail("read from the rewritten file"))["ids"]) == ["a", "b"]


def test_an_unwritable_cache_still_returns_the_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COEVO_CACHE", str(tmp_path / "a-file"))
    (tmp_path / "a-file").write_text("in the way of the cache folder")
    assert list(cached_space("p", {}, _space)["first"]) == [1.0, 2.5]


def test_an_empty_cache_file_is_computed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COEVO_CACHE", str(tmp_path))
    path = cache_path("p", {})
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")  # what a crash between creating and writing a file leaves
    assert list(cached_space("p", {}, _space)["ids"]) == ["a", "b"]
    assert not [p for p in path.parent.iterdir() if p != path]  # no temporary file left beside it


def test_a_file_the_spec_names_is_part_of_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COEVO_CACHE", str(tmp_path / "cache"))
    cluster = tmp_path / "my.json"
    cluster.write_text('{"device_tflops": 50}')
    spec = {"cluster": str(cluster), "model": f"{tmp_path / 'models.py'}:make", "split": "4:3:1"}
    first = cache_path("p", spec)
    cluster.write_text('{"device_tflops": 5}')  # the same path, another cluster: the space must be computed again
    assert cache_path("p", spec) != first
    (tmp_path / "models.py").write_text("def make(): ...")  # a model file that now exists counts too
    assert cache_path("p", spec) not in (first,)

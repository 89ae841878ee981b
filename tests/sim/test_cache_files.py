"""The caches' house rule: a damaged file is rebuilt with a one-line note in coevo's words, a failed write leaves no temporary file.

Each test has a cache of its own (a temporary ``COEVO_CACHE``) and stays fast: the zoo's training
is replaced by none (the seeded, untrained model is cached like a trained one), graphs and LinGCN
models are tiny.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from coevo.sim.zoo.cache_files import CacheNote, atomic_write
from tests.helpers import coevo_env


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh ``COEVO_CACHE`` for this test alone."""
    root = tmp_path / "cache"
    monkeypatch.setenv("COEVO_CACHE", str(root))
    return root


@pytest.fixture
def untrained_zoo(cache: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The zoo with no training: a model is its seeded initialisation, so a rebuild gives the same weights."""
    from coevo.sim.zoo import registry

    monkeypatch.setattr(registry, "_train", lambda *args, **kwargs: None)
    yield


def _notes(call: Callable[[], Any]) -> tuple[Any, list[str]]:
    """``call()``'s value and the texts of the :class:`CacheNote` warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = call()
    return value, [str(w.message) for w in caught if issubclass(w.category, CacheNote)]


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*.tmp*"))


# ---------------------------------------------------------------- zoo


@pytest.mark.usefixtures("untrained_zoo")
def test_a_zoo_weights_file_with_overwritten_bytes_is_rebuilt_with_a_note() -> None:
    from coevo.sim.zoo import load

    zm = load("mlp-digits")
    size = zm.path.stat().st_size
    with open(zm.path, "r+b") as f:  # inside the tensors' bytes: torch reads the file without a word
        f.seek(size // 2)
        f.write(b"\xff" * 8000)
    again, notes = _notes(lambda: load("mlp-digits"))
    assert again.note.startswith("rebuilt") and notes == [again.note]
    assert f"the cache file {zm.path} did not load (damaged: its weights hash to " in again.note
    assert again.fingerprint == zm.fingerprint  # rebuilt: the recipe's weights again, not the damaged ones
    assert json.loads(zm.path.with_suffix(".json").read_text())["weights"] == zm.fingerprint
    assert _notes(lambda: load("mlp-digits"))[0].note == "loaded"


@pytest.mark.usefixtures("untrained_zoo")
def test_the_sidecars_fingerprint_alone_catches_damage_and_an_old_sidecar_without_one_loads() -> None:
    from coevo.sim.zoo import load

    zm = load("mlp-digits")
    stored = torch.load(zm.path, weights_only=True)
    del stored["weights"]  # as a file written before the weights file recorded its own fingerprint
    stored["state_dict"]["fc1.bias"] += 1.0
    torch.save(stored, zm.path)
    again, notes = _notes(lambda: load("mlp-digits"))
    assert again.note.startswith("rebuilt") and "its sidecar records" in again.note and notes == [again.note]
    sidecar = zm.path.with_suffix(".json")
    info = json.loads(sidecar.read_text())
    del info["weights"]  # a sidecar that records no fingerprint: nothing to compare, the weights are used
    sidecar.write_text(json.dumps(info))
    loaded, notes = _notes(lambda: load("mlp-digits"))
    assert loaded.note == "loaded" and loaded.fingerprint == zm.fingerprint and notes == []


@pytest.mark.usefixtures("untrained_zoo")
def test_a_garbage_zoo_file_is_rebuilt_with_one_line_in_coevos_words() -> None:
    from coevo.sim.zoo import load

    zm = load("mlp-digits")
    zm.path.write_bytes(bytes(range(256)) * 12)
    again, notes = _notes(lambda: load("mlp-digits"))
    # the exception's class alone: torch's message runs to many lines and advises weights_only=False, which must not be followed
    assert notes == [again.note] == [f"rebuilt: the cache file {zm.path} did not load (UnpicklingError); trained again"]


def test_a_cache_note_prints_as_note_without_the_source_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)  # restored after the test
    from coevo.agent.cli import main
    from coevo.sim.zoo import cache_files

    assert main(["problems", "list", "--json"]) == 0  # the command installs the note format, importing the module does not
    assert warnings.formatwarning is cache_files._format
    text = "rebuilt: the cache file /x/y.pt did not load (UnpicklingError); trained again"
    assert warnings.formatwarning(text, CacheNote, "/src/registry.py", 274) == f"note: {text}\n"
    assert warnings.formatwarning("other", UserWarning, "/src/a.py", 3).startswith("/src/a.py:3: UserWarning: other")


def test_a_note_nobody_collects_reaches_stderr_as_one_note_line(tmp_path: Path) -> None:
    # the search path: no tool records the warnings, Python prints them
    script = textwrap.dedent(
        """
        from coevo.sim.zoo import load, registry
        from coevo.sim.zoo.cache_files import install_note_format

        install_note_format()  # as the coevo command does
        registry._train = lambda *args, **kwargs: None
        path = load("mlp-digits").path
        path.write_bytes(b"not a torch file")
        load("mlp-digits")
        """
    )
    env = {**coevo_env(), "COEVO_CACHE": str(tmp_path / "cache")}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300, check=True)
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("note: rebuilt: the cache file ") and lines[0].endswith("; trained again"), run.stderr


@pytest.mark.usefixtures("untrained_zoo")
def test_a_failed_zoo_write_leaves_no_temporary_file() -> None:
    from coevo.sim.zoo import load

    zm = load("mlp-digits")
    zm.path.unlink()
    zm.path.mkdir()  # the rename onto it fails (IsADirectoryError) after the whole file was written
    for _ in range(2):
        with pytest.raises(IsADirectoryError), warnings.catch_warnings():
            warnings.simplefilter("ignore", CacheNote)
            load("mlp-digits")
    assert _leftovers(zm.path.parent) == []
    zm.path.rmdir()
    sidecar = zm.path.with_suffix(".json")
    sidecar.unlink()
    sidecar.mkdir()
    with pytest.raises(IsADirectoryError):
        load("mlp-digits")
    assert _leftovers(zm.path.parent) == []


def test_atomic_write_keeps_the_old_file_when_the_write_fails(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    target.write_text("old")

    def half(tmp: Path) -> None:
        tmp.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, half)
    assert target.read_text() == "old" and _leftovers(tmp_path) == []


# ---------------------------------------------------------------- graphs


@pytest.mark.usefixtures("cache")
@pytest.mark.parametrize(
    ("damage", "why"),
    [
        ("sidecar-list", "its sidecar rmat-100k-s7-"),  # '[1]': crashed with AttributeError, every time until deleted
        ("sidecar-garbage", "did not load (JSONDecodeError)"),
        ("npz-cut", "not a readable CSR .npz"),
        ("npz-garbage", "not a readable CSR .npz"),
        ("sidecar-gone", "is missing"),
    ],
)
def test_a_damaged_graph_cache_entry_is_generated_again_with_a_note(damage: str, why: str) -> None:
    from coevo.sim.graph.generators import cache_dir, checksum, load_graph

    a = load_graph("rmat-100k@7")
    npz, side = (next(cache_dir().glob(f"rmat-100k-s7-*.{ext}")) for ext in ("npz", "json"))
    if damage == "sidecar-list":
        side.write_text("[1]\n")
    elif damage == "sidecar-garbage":
        side.write_text("{not json")
    elif damage == "npz-cut":
        npz.write_bytes(npz.read_bytes()[:1000])
    elif damage == "npz-garbage":
        npz.write_bytes(b"\x00garbage" * 100)
    else:
        side.unlink()
    again, notes = _notes(lambda: load_graph("rmat-100k@7"))
    assert checksum(again) == checksum(a)
    assert len(notes) == 1 and notes[0].startswith(f"rebuilt: the cache file {npz} did not load (") and why in notes[0]
    assert notes[0].endswith("; generated again") and "\n" not in notes[0]
    assert _notes(lambda: load_graph("rmat-100k@7"))[1] == []  # rebuilt: loads quietly after


def test_a_failed_graph_write_leaves_no_temporary_file(cache: Path) -> None:
    from coevo.sim.graph.generators import cache_dir, load_graph

    load_graph("rmat-100k@8")
    npz = next(cache_dir().glob("rmat-100k-s8-*.npz"))
    npz.unlink()
    npz.mkdir()
    with pytest.raises(IsADirectoryError), warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheNote)
        load_graph("rmat-100k@8")
    assert _leftovers(cache) == []


# ---------------------------------------------------------------- LinGCN (sim.he)


def _he_tiny() -> Any:
    from coevo.sim.he.model import Recipe

    return Recipe(dataset="digits-grid4", hidden=(1,), teacher_epochs=1, epochs=1)


def _he_files(cache: Path) -> tuple[Path, Path]:
    """The tiny recipe's (teacher, student) cache files."""
    he = cache / "he"
    return next(he.glob("teacher-*.pt")), next(he.glob("student-*.pt"))


def _same_model(a: Any, b: Any) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.model.state_dict().values(), b.model.state_dict().values(), strict=True))


@pytest.mark.parametrize(
    ("which", "damage", "why"),
    [
        ("student", "garbage", "did not load ("),  # gave 'he.gcn failed: UnpicklingError'
        ("teacher", "cut", "did not load ("),  # gave 'RuntimeError: PytorchStreamReader failed', every lingcn trial
        ("student", "bytes", "damaged: its weights hash to "),  # loaded without a word
        ("teacher", "bytes", "damaged: its weights hash to "),
    ],
)
def test_a_damaged_lingcn_cache_file_is_trained_again_with_a_note(cache: Path, which: str, damage: str, why: str) -> None:
    from coevo.sim.he.model import train

    first = train(_he_tiny())
    teacher, student = _he_files(cache)
    path = teacher if which == "teacher" else student
    if damage == "garbage":
        path.write_bytes(bytes(range(256)) * 12)
    elif damage == "cut":
        path.write_bytes(path.read_bytes()[:100])
    else:  # the tensors changed, the fingerprint the file records not
        blob = torch.load(path, weights_only=True)
        next(t for t in blob["state"].values() if t.is_floating_point() and t.numel()).add_(1.0)
        torch.save(blob, path)
    again, notes = _notes(lambda: train(_he_tiny()))
    assert len(notes) == 1 and notes[0].startswith(f"rebuilt: the cache file {path} did not load (") and why in notes[0]
    assert notes[0].endswith("; trained again") and "weights_only" not in notes[0] and "\n" not in notes[0]
    assert _same_model(again, first) and again.val_accuracy == first.val_accuracy
    assert _notes(lambda: train(_he_tiny()))[1] == []  # rebuilt: loads quietly after


def test_a_lingcn_student_file_is_never_unpickled_as_code(cache: Path, tmp_path: Path) -> None:
    from coevo.sim.he.model import train

    train(_he_tiny())
    _, student = _he_files(cache)
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
            return (Path.touch, (marker,))  # what a planted cache file could run on load

    torch.save({"state": Payload()}, student)
    _, notes = _notes(lambda: train(_he_tiny()))
    assert not marker.exists() and len(notes) == 1 and "did not load (UnpicklingError)" in notes[0]


def test_a_teacher_cached_before_fingerprints_loads_quietly(cache: Path) -> None:
    from coevo.sim.he.model import train

    first = train(_he_tiny())
    teacher, student = _he_files(cache)
    torch.save(torch.load(teacher, weights_only=True)["state"], teacher)  # the old format: a bare state dict
    student.unlink()
    again, notes = _notes(lambda: train(_he_tiny()))
    assert notes == [] and _same_model(again, first)


def test_a_failed_lingcn_write_leaves_no_temporary_file(cache: Path) -> None:
    from coevo.sim.he.model import train

    train(_he_tiny())
    _, student = _he_files(cache)
    student.unlink()
    student.mkdir()
    with pytest.raises(IsADirectoryError), warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheNote)
        train(_he_tiny())
    assert _leftovers(cache) == []


def test_a_damaged_op_cost_table_is_measured_again_with_a_note(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from coevo.sim.he import ckks

    monkeypatch.setattr(ckks, "op_costs", lambda params: {"mul": 1e-3, "add": 1e-5})  # no TenSEAL timing: the cache is tested
    path = cache / "he" / "op_costs.json"
    path.parent.mkdir(parents=True)
    params = ckks.HEParams(8192, (40, 30, 40))
    for damage in ("[1]", "{not json", '{"8192:40,30,40": {"mul": "fast"}}'):
        path.write_text(damage)
        costs, notes = _notes(lambda: ckks.cached_op_costs(params, path))
        assert costs == {"mul": 1e-3, "add": 1e-5} and len(notes) == 1 and notes[0].endswith("; measured again")
        assert notes[0].startswith(f"rebuilt: the cache file {path} did not load (")
    assert _notes(lambda: ckks.cached_op_costs(params, path)) == ({"mul": 1e-3, "add": 1e-5}, [])
    assert _leftovers(cache) == []


def test_he_gcn_refuses_a_bad_ring_dimension_before_training(cache: Path) -> None:
    from coevo.sim.errors import UserInputError
    from coevo.sim.he.ckks import HEParams
    from coevo.sim.he.run import he_gcn

    with pytest.raises(UserInputError, match=r"poly_modulus_degree must be one of \[1024, "):
        he_gcn(_he_tiny(), encrypted_samples=1, params=HEParams(1000, (30, 30)), predict=False)
    with pytest.raises(UserInputError, match="coeff_mod_bit_sizes needs at least 2 primes"):
        he_gcn(_he_tiny(), encrypted_samples=1, params=HEParams(8192, (70, 30)), predict=False)
    assert not (cache / "he").exists()  # no teacher or student was trained (and written) first

"""A user's own problem: a file or module loaded by reference, the Python API, broken classes, and studies older than the plug-in seam."""

from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path

import optuna
import pytest

import coevo
from coevo.agent.cli import main
from coevo.search.errors import UserInputError
from coevo.search.noc.problem import NocProblem
from coevo.search.problems import make_problem, problem_class, problem_from_spec, problem_names, problem_reference
from coevo.search.runner import run_search
from coevo.search.study import ATTR_PROBLEM_REF, ATTR_SPEC, load_search

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "tiled_matmul.py"
FAST = '{"size": 64, "repeats": 1}'


def test_the_docs_example_runs_from_the_command_line_and_a_worker_reloads_it(storage: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["search", "--problem", f"{EXAMPLE}:TiledMatmul", "--proposer", "pelnas", "--budget", "12", "--options", FAST]
    assert main([*args, "--storage", storage, "--study", "mm", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["evaluations"] == 12 and result["problem"] == {"problem": "tiled-matmul", "size": 64, "repeats": 1, "dtype": "float32"}
    assert result["hv_ratio"] is None and result["front"] and all(row["gflops"] > 0 for row in result["front"])
    study = optuna.load_study(study_name="mm", storage=storage)
    assert study.user_attrs[ATTR_PROBLEM_REF] == f"{EXAMPLE.resolve()}:TiledMatmul"  # a worker elsewhere loads the same file
    stored = load_search(storage, "mm")
    assert stored.problem.name == "tiled-matmul" and stored.problem.options.size == 64
    study.set_user_attr("coevo.budget", 16)
    assert main(["worker", "--storage", storage, "--study", "mm", "--json", "--heartbeat", "1", "--grace", "3"]) == 0  # no --problem
    assert json.loads(capsys.readouterr().out)["evaluated"] == 4
    assert main(["search", "--problem", f"{EXAMPLE}:TiledMatmul", "--options", '{"size": 100000}', "--storage", storage]) == 2
    assert "size: input should be less than or equal to 2048, got 100000" in capsys.readouterr().err


def test_the_python_api_searches_a_problem_built_in_code(storage: str) -> None:
    sys.path.insert(0, str(EXAMPLE.parent))
    try:
        from tiled_matmul import TiledMatmul  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(EXAMPLE.parent))
    result = coevo.optimize(TiledMatmul(size=64, repeats=1), proposer="random", budget=6, storage=storage, study="api")
    assert result.evaluations == 6 and result.problem["problem"] == "tiled-matmul"
    nb = coevo.optimize("nb201", options={"device": "raspi4"}, proposer="pelnas", budget=30, storage=storage)
    assert nb.evaluations == 30 and nb.reasoner == "offline (no LLM)" and 0 < nb.hv_ratio <= 1  # type: ignore[operator]
    with pytest.raises(UserInputError, match="takes no reasoner"):
        coevo.optimize("nb201", proposer="tpe", reasoner="offline", budget=3, storage=storage)
    with pytest.raises(UserInputError, match="device: unknown device 'tpu'"):
        coevo.optimize("nb201", options={"device": "tpu"}, budget=3, storage=storage)


def test_the_python_api_keeps_optunas_study_created_line_out_of_the_callers_log(storage: str) -> None:
    # at Optuna's default verbosity (INFO), every study coevo created printed "A new study created
    # in RDB with name: ..." into the caller's output; only that line goes, the caller's settings stay
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    handler = Keep()
    before = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.INFO)
    logging.getLogger("optuna").addHandler(handler)
    try:
        coevo.optimize("nb201", proposer="random", budget=2, storage=storage, study="quiet")
        optuna.create_study(storage=storage, study_name="the-callers-own")  # the caller's own studies still say so
        assert optuna.logging.get_verbosity() == optuna.logging.INFO
    finally:
        logging.getLogger("optuna").removeHandler(handler)
        optuna.logging.set_verbosity(before)
    created = [m for m in seen if m.startswith("A new study created")]
    assert len(created) == 1 and "the-callers-own" in created[0], seen


def test_an_importable_module_is_a_problem_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, storage: str) -> None:
    (tmp_path / "myspaces.py").write_text(EXAMPLE.read_text().replace('name = "tiled-matmul"', 'name = "my-matmul"'))
    monkeypatch.syspath_prepend(str(tmp_path))
    problem = make_problem("myspaces:TiledMatmul", {"size": 64, "repeats": 1})
    assert problem.name == "my-matmul"
    result = run_search(problem, "random", budget=4, storage=storage, study_name="mod")
    assert result.evaluations == 4
    assert optuna.load_study(study_name="mod", storage=storage).user_attrs[ATTR_PROBLEM_REF] == "myspaces:TiledMatmul"


BROKEN = {
    "syntax": ("def broken(:\n", r"failed to import \(line 1\): SyntaxError"),
    "raises": ("import coevo\nraise RuntimeError('no GPU here')\n", r"failed to import \(line 2\): RuntimeError: no GPU here"),
    "not-a-problem": ("class Space:\n    pass\n", "is not a subclass of coevo.Problem"),
    "abstract": (
        "import coevo\nclass Space(coevo.Problem):\n    name = 'x'\n    objectives = ()\n",
        "Space does not implement describe, distributions, evaluate, from_params, point_id, to_params",
    ),
    "objectives": (
        EXAMPLE.read_text().replace('"gflops", "maximize"', '"gflops", "minimize"').replace("class TiledMatmul(", "class Space("),
        "the first objective is maximised and the second minimised",
    ),
    "run-group": (
        EXAMPLE.read_text()
        .replace("    noisy = True", "    noisy = True\n    run_group = 'cores'")
        .replace("class TiledMatmul(", "class Space("),
        "run_group 'cores' is not an option",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_problem_file_is_one_line_and_exit_2(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, says = BROKEN[case]
    path = tmp_path / f"{case.replace('-', '_')}.py"
    path.write_text(source)
    assert main(["search", "--problem", f"{path}:Space", "--budget", "3"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("error: problem ")
    assert re.search(says, " ".join(err.split())), err
    assert not Path("runs").exists()  # nothing created


def test_missing_files_and_classes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "--problem", f"{tmp_path}/nope.py:Space"]) == 2
    assert "no file" in capsys.readouterr().err
    assert main(["search", "--problem", f"{EXAMPLE}:Nope"]) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert "has no 'Nope'" in said and not Path("runs").exists()
    # the names offered are what the file defines (TiledMatmul), not what it imports (Any, Field, ...)
    assert re.search(r"it defines: [^)]*TiledMatmul", said) and "Any" not in said and "Field" not in said
    assert main(["search", "--problem", "no_such_module_here:Space"]) == 2
    assert "no module 'no_such_module_here'" in capsys.readouterr().err


def test_a_study_recorded_before_the_plug_in_seam_still_opens(storage: str) -> None:
    noc = make_problem("noc", {"k": 4, "cycles": 600})
    run_search(noc, "random", budget=3, storage=storage, study_name="old-noc")
    study = optuna.load_study(study_name="old-noc", storage=storage)
    legacy = {k: v for k, v in study.user_attrs[ATTR_SPEC].items() if k != "traffic_seed"} | {"seed": 0}  # the option's old name
    study.set_user_attr(ATTR_SPEC, legacy)
    study.set_user_attr(ATTR_PROBLEM_REF, None)  # older studies record no reference
    assert load_search(storage, "old-noc").problem.spec() == noc.spec()
    assert run_search(noc, "random", budget=5, storage=storage, study_name="old-noc").evaluations == 5  # resumed, not refused
    other = make_problem("noc", {"k": 4, "cycles": 600, "traffic_seed": 7})
    with pytest.raises(UserInputError, match="already exists"):
        run_search(other, "random", budget=5, storage=storage, study_name="old-noc")


def test_problems_list_and_describe(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["problems", "list", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["name"] for r in rows] == problem_names()  # every registered problem, in the registry's order
    nb = next(r for r in rows if r["name"] == "nb201")
    assert [(o["name"], o["direction"], o["unit"], o["cost"]) for o in nb["objectives"]] == [
        ("accuracy", "maximize", "%", "expensive"),
        ("latency_ms", "minimize", "ms", "cheap"),
    ]
    assert "niches" not in nb and nb["exact_front"]  # listing builds no problem: the niches need an instance
    assert main(["problems", "describe", "nb201", "--json"]) == 0
    nb = json.loads(capsys.readouterr().out)
    assert [n["id"] for n in nb["niches"]] == ["conv0", "c1x1", "c3x3_1", "c3x3_2", "c3x3_3", "c3x3_4p"]
    assert main(["problems", "describe", "noc", "--json"]) == 0
    noc = json.loads(capsys.readouterr().out)
    k = next(o for o in noc["options"] if o["name"] == "k")
    assert k["default"] == 8 and k["bounds"] == {"ge": 2, "le": 16} and k["help"] and noc["run_group"] == "traffic"
    assert main(["problems", "describe", f"{EXAMPLE}:TiledMatmul"]) == 0
    assert "tiled-matmul" in capsys.readouterr().out


def test_search_help_shows_the_named_problems_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["search", "--problem", "noc", "--help"])
    text = capsys.readouterr().out
    assert "options of problem noc" in text and "--traffic-seed" in text and "--gt-share" in text and "--dataset" not in text


class WiderNoc(NocProblem):
    """A user's subclass of a registered problem: a problem of its own."""

    name = "wider-noc"


def test_a_subclass_of_a_registered_problem_is_stored_as_itself() -> None:
    problem_class("noc")  # loading NocProblem by name marks it with its registered reference
    problem = WiderNoc(k=4, cycles=600)
    assert problem_reference(problem) == f"{__name__}:WiderNoc"  # not "noc": a worker would rebuild the parent
    again = problem_from_spec(problem.spec(), reference=problem_reference(problem))
    assert type(again) is WiderNoc and again.spec() == problem.spec()


def test_references_stored_before_the_coevo_package_still_load() -> None:
    """Studies made before issue 27 store ``search.nb201.problem:NB201Problem``; it names the same class now."""
    from coevo.search.nb201.problem import NB201Problem
    from coevo.search.plugins import load_reference
    from coevo.search.problems import problem_class

    assert load_reference("search.nb201.problem:NB201Problem", what="problem") is NB201Problem
    assert problem_class("search.nb201.problem:NB201Problem") is NB201Problem
    with pytest.raises(UserInputError, match="no module"):
        load_reference("search.no_such_module:X", what="problem")

"""What a model's tool call may touch: writes confined to the workspace, user code only after a yes; the user's own calls unchanged."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar

import pytest

from coevo.tools import (
    REGISTRY,
    CallPolicy,
    OutsideWorkspaceError,
    Tool,
    ToolArgs,
    ToolArgumentError,
    ToolDeclinedError,
    ToolExecutionError,
    ToolResult,
    call_tool,
    workspace,
)
from coevo.tools._base import check_tool
from coevo.tools.adapters import to_langchain
from coevo.tools.search_jobs import JOBS_DIR, log_path

PLOT = {"topology": "benes", "n": 8, "routings": ["adaptive"], "loads": [0.1], "cycles": 200}
USER_MODEL = """
from pathlib import Path
from torch import nn
from coevo.sim.pipeline.blocks import Block, PipelineModel

Path(__file__).with_suffix(".imported").write_text("imported")  # proof that this file ran

def build():
    blocks = [
        Block("a", "encoder", [nn.Linear(8, 8)]),
        Block("m", "mid", [nn.Linear(8, 8)]),
        Block("d", "decoder", [nn.Linear(16, 8)], skip_from=0, cat_dim=-1),
    ]
    return PipelineModel("mini-unet", blocks, lambda mb, res: (mb, res, 8))
"""


class Asked:
    """A confirm callback that answers ``yes`` and remembers what it was asked."""

    def __init__(self, yes: bool) -> None:
        self.yes = yes
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, tool: Tool, args: dict[str, Any]) -> bool:
        self.calls.append((tool.name, args))
        return self.yes


def _model(ws: Path, yes: bool = True) -> tuple[CallPolicy, Asked]:
    asked = Asked(yes)
    return CallPolicy.model(ws, asked), asked


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    return folder


def test_workspace_is_the_configured_folder_else_the_storage_folder_else_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COEVO_WORKSPACE", raising=False)
    assert workspace() == (tmp_path / "runs").resolve()  # the default storage sqlite:///runs/coevo.sqlite3, from the cwd
    assert workspace(f"sqlite:///{tmp_path}/studies/s.sqlite3") == tmp_path / "studies"
    assert workspace("postgresql://u@db/coevo") == (tmp_path / "runs").resolve()
    monkeypatch.setenv("COEVO_WORKSPACE", str(tmp_path / "env"))
    assert workspace(f"sqlite:///{tmp_path}/studies/s.sqlite3") == tmp_path / "env"
    assert workspace(None, tmp_path / "flag") == tmp_path / "flag"  # the flag wins over the environment


def test_a_models_plot_outside_the_workspace_is_refused_before_anything_runs(ws: Path, tmp_path: Path) -> None:
    policy, asked = _model(ws)
    plot = REGISTRY.get("noc.plot")
    outside = tmp_path / "elsewhere" / "x.png"
    for out in (str(outside), str(ws / ".." / "escape.png"), "/coevo-root-dir/x.png"):
        with pytest.raises(OutsideWorkspaceError, match="may write only under the workspace") as err:
            call_tool(plot, {**PLOT, "out": out}, policy=policy)
        assert str(ws.resolve()) in str(err.value) and "\n" not in str(err.value)
    assert asked.calls == []  # refused before the user is even asked
    assert not outside.parent.exists() and not (tmp_path / "escape.png").exists() and not Path("/coevo-root-dir").exists()


def test_a_symlink_out_of_the_workspace_is_resolved_and_refused(ws: Path, tmp_path: Path) -> None:
    (tmp_path / "outside").mkdir()
    (ws / "link").symlink_to(tmp_path / "outside", target_is_directory=True)
    with pytest.raises(OutsideWorkspaceError, match="outside"):
        call_tool(REGISTRY.get("noc.plot"), {**PLOT, "out": str(ws / "link" / "x.png")}, policy=_model(ws)[0])
    assert list((tmp_path / "outside").iterdir()) == []


def test_a_models_plot_under_the_workspace_runs_after_a_yes_and_creates_its_folder(ws: Path) -> None:
    policy, asked = _model(ws)
    out = ws / "plots" / "deep" / "curve.png"
    result = call_tool(REGISTRY.get("noc.plot"), {**PLOT, "out": str(out)}, policy=policy)
    assert Path(result.value["png"]).resolve() == out.resolve() and out.read_bytes()[:4] == b"\x89PNG"
    assert [name for name, _ in asked.calls] == ["noc.plot"]  # long-running: asked first
    declined, _ = _model(ws, yes=False)
    with pytest.raises(ToolDeclinedError, match=r"noc\.plot did not run"):
        call_tool(REGISTRY.get("noc.plot"), {**PLOT, "out": str(ws / "other.png")}, policy=declined)
    assert not (ws / "other.png").exists()


def test_the_users_own_call_writes_anywhere_but_never_creates_a_missing_folder_outside(tmp_path: Path) -> None:
    plot = REGISTRY.get("noc.plot")
    anywhere = tmp_path / "mine"
    anywhere.mkdir()
    call_tool(plot, {**PLOT, "out": str(anywhere / "x.png")})  # no policy: `coevo tools run`
    assert (anywhere / "x.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ToolArgumentError, match="does not exist") as err:
        call_tool(plot, {**PLOT, "out": "/coevo-nonexistent/dir/x.png"})
    assert "\n" not in str(err.value) and not Path("/coevo-nonexistent").exists()
    call_tool(plot, {**PLOT, "out": "runs/plots/new/x.png"})  # missing folders under ./runs (the workspace) are made
    assert Path("runs/plots/new/x.png").is_file()


def test_a_plot_refused_for_its_other_arguments_creates_no_folder(ws: Path) -> None:
    plot = REGISTRY.get("noc.plot")
    for bad in ({"loads": [1.5]}, {"routings": ["bogus"]}, {"n": 7}):
        with pytest.raises((ToolArgumentError, ToolExecutionError)):
            call_tool(plot, {**PLOT, **bad, "out": str(ws / "plots" / "new" / "x.png")}, policy=_model(ws)[0])
    assert not (ws / "plots").exists()


def test_a_models_storage_outside_the_workspace_is_refused_and_not_created(ws: Path, tmp_path: Path) -> None:
    stray = tmp_path / "stray.sqlite3"
    with pytest.raises(OutsideWorkspaceError, match="storage="):
        call_tool(REGISTRY.get("studies.list"), {"storage": f"sqlite:///{stray}"}, policy=_model(ws)[0])
    assert not stray.exists()
    inside = call_tool(REGISTRY.get("studies.list"), {"storage": f"sqlite:///{ws / 'coevo.sqlite3'}"}, policy=_model(ws)[0])
    assert inside.value["studies"] == [] and not (ws / "coevo.sqlite3").exists()  # a reader creates nothing, even where it may
    in_memory = call_tool(REGISTRY.get("studies.list"), {"storage": "sqlite:///:memory:"}, policy=_model(ws)[0])  # no file at all
    assert in_memory.value["studies"] == []


def test_loading_user_code_asks_first_for_a_model_not_for_the_user(ws: Path, tmp_path: Path) -> None:
    source = tmp_path / "mine.py"
    source.write_text(USER_MODEL)
    marker = tmp_path / "mine.imported"
    args = {"model": f"{source}:build", "resolution": 4}
    profile = REGISTRY.get("pipeline.profile")
    no, asked = _model(ws, yes=False)
    with pytest.raises(ToolDeclinedError, match=r"loads your code .*mine.py:build"):
        call_tool(profile, args, policy=no)
    assert asked.calls == [("pipeline.profile", args)] and not marker.exists()  # asked, declined, never imported
    call_tool(profile, {"model": "unet-tiny", "resolution": 4}, policy=no)  # a preset is not user code: no question
    assert len(asked.calls) == 1
    yes, _ = _model(ws)
    assert call_tool(profile, args, policy=yes).value["blocks"] == 3 and marker.exists()
    marker.unlink()
    assert call_tool(profile, args).value["blocks"] == 3 and marker.exists()  # the user's own call (coevo tools run): no question


def test_user_code_hidden_in_a_plan_handle_asks_too(ws: Path, tmp_path: Path) -> None:
    source = tmp_path / "mine.py"
    source.write_text(USER_MODEL)
    handle = json.dumps({"model": f"{source}:build", "resolution": 4, "microbatch": 1, "method": "blockwise", "device_of": [0, 0, 1]})
    no, asked = _model(ws, yes=False)
    lc = to_langchain(REGISTRY.get("pipeline.simulate"), no)
    observation = lc.invoke({"plan": handle, "devices": 2, "cluster": "v100x8-pcie", "microbatches": 2})
    assert observation.startswith("the user declined to run pipeline_simulate") and len(asked.calls) == 1
    assert not (tmp_path / "mine.imported").exists()


def test_search_tools_ask_before_loading_a_problem_or_model_file(ws: Path) -> None:
    tool = REGISTRY.get("search.run")
    policy, asked = _model(ws, yes=False)
    with pytest.raises(ToolDeclinedError, match=r"loads your code pkg.problems:Mine"):
        call_tool(tool, {"problem": "pkg.problems:Mine", "budget": 1, "storage": "sqlite:///:memory:"}, policy=policy)
    assert asked.calls and asked.calls[0][0] == "search.run"


def test_every_tool_example_is_admitted_as_a_models_call_in_the_default_workspace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COEVO_WORKSPACE", raising=False)
    policy, _ = _model(workspace())
    for tool in REGISTRY:
        policy.admit(tool, tool.Args.model_validate(tool.example))  # the examples write under ./runs only


@pytest.mark.parametrize("tool", list(REGISTRY), ids=REGISTRY.names())
def test_arguments_that_name_storages_or_outputs_are_declared(tool: Tool) -> None:
    for name, field in tool.Args.model_fields.items():
        if name == "out":
            assert name in tool.writes, f"{tool.name}.{name} names something written; declare it in writes"
        if name == "storage":
            assert name in tool.storage_args(), f"{tool.name}.{name} names a storage; declare it in writes or reads"
        if ".py" in (field.description or ""):  # the description offers path/to/file.py:function
            assert name in tool.loads_code, f"{tool.name}.{name} may name user code; declare it in loads_code"


def test_declarations_must_name_arguments() -> None:
    class BadArgs(ToolArgs):
        out: str = "x.png"

    class Bad(Tool):
        name = "bad.tool"
        description = "a tool whose declarations name an argument it does not have"
        Args = BadArgs
        example: ClassVar[dict[str, Any]] = {}
        writes: ClassVar[dict[str, Any]] = {"outt": "file"}

        def run(self, args: Any) -> ToolResult:
            return ToolResult()

    with pytest.raises(TypeError, match="'outt', which is not an argument"):
        check_tool(Bad())


def test_background_job_logs_stay_in_the_jobs_folder_whatever_the_study_name() -> None:
    for study in ("../../../etc/evil", "/abs/olute", "a/b", "..", "nb201-cifar10-raspi4-random-s0"):
        path = log_path(study)
        assert path.parent == JOBS_DIR and os.sep not in path.name and not path.name.startswith(".")
    assert log_path("nb201-cifar10-raspi4-random-s0").name == "nb201-cifar10-raspi4-random-s0.log"

"""Every subcommand's bad-path cases: one actionable line on stderr, exit 2, never a traceback.

Each case runs the real ``coevo`` entry point in this process: an exception that escaped
``main`` (which is what prints a traceback) fails the test. A closed stdout is checked with
a real pipe.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from coevo.agent.cli import main
from tests.helpers import coevo_env

STUDY = "k"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a small pelnas study (and so a knowledge store) and a plain file in the way of paths."""
    folder = tmp_path_factory.mktemp("bad")
    cwd = Path.cwd()
    os.chdir(folder)
    try:
        assert main(["search", "--proposer", "pelnas", "--budget", "30", "--study", STUDY, "--json"]) == 0
    finally:
        os.chdir(cwd)
    (folder / "a-file").write_text("not a folder")
    return folder


CASES: list[tuple[str, str]] = [
    # (arguments, a piece of the message that says what to change)
    ("search --seed -5", "seed must be an integer from 0"),
    ("search --budget -3", "budget must be a number of evaluations, 0 or more"),
    ("search --workers 0", "--workers must be at least 1"),
    ("search --workers 5 --budget 3 --study w5", "pass --workers 3 or fewer"),
    ("search --problem nosuch", "valid problems"),
    ("search --device nosuch", "valid devices"),
    ("search --proposer nosuch", "valid proposers"),
    ("search --heartbeat 5 --grace 3", "--grace > --heartbeat"),
    ("search --proposer pelnas --round-size 0", "--round-size must be at least 1"),
    ("search --proposer pelnas --kb-from missing.jsonl", "no such file"),
    ("search --proposer pelnas --reasoner llm --llm-base-url= --llm-model=", "needs an endpoint and a model"),
    ("search --proposer pelnas --reasoner llm --llm-base-url http://127.0.0.1:9/v1 --llm-model m", "cannot reach the LLM endpoint"),
    ("search --problem pipeline --model nosuch", "presets"),
    ("search --problem noc --k 99", "k: input should be less than or equal to 16, got 99"),
    ('search --problem pipeline --options {"dataset":"cifar10"}', "no option 'dataset'"),
    ("search --problem docs/missing.py:Space", "no file"),
    ("search --options [1]", "--options is valid JSON but not a JSON object (an array)"),
    ("search --storage sqlite:///no/such/dir/x.db", "does not exist"),
    ("search --storage notadb://x", "cannot open storage"),
    ("search --storage sqlite:///:memory:", "cannot hold a search"),
    ("search --budget 5 --storage postgresql://nobody@127.0.0.1:9/x", "cannot open storage"),
    ("worker --study nosuch", "no study 'nosuch'"),
    ("worker --study nosuch --storage sqlite:///nofile.db", "no storage at"),
    ("worker --study k --llm-model other-model", "joins with the study's reasoner"),
    ("runs show nosuch", "no study 'nosuch'"),
    ("runs show k --storage sqlite:///nofile.db", "no storage at"),
    ("runs delete nosuch --yes", "no study 'nosuch'"),
    ("runs delete k", "pass --yes"),
    ("runs list --storage notadb://x", "cannot open storage"),
    ("bench --budget 0", "budget must be a positive"),
    ("bench --seeds 0", "--seeds must be at least 1"),
    ("bench --jobs 0", "--jobs must be at least 1"),
    ("bench --devices nosuch", "valid devices"),
    ("bench --proposers nosuch", "valid proposers"),
    ("bench --budget 5 --seeds 1 --out a-file", "--out a-file is a file, not a folder"),
    ("bench --budget 5 --seeds 1 --out a-file/sub", "a-file is a file, not a folder"),
    ("bench --budgets 5,10 --seeds 1 --out a-file", "--out a-file is a file, not a folder"),
    ("tools run nosuch", "valid tools"),
    ("tools run nb201.query --args {bad", "not valid JSON"),
    ('tools run nb201.query --args {"arch":"x"}', "nb201.query"),
    ("tools describe nosuch", "valid tools"),
    ("kb show H999 --study k", "no heuristic 'H999'"),
    ("kb show H1 --study nosuch", "--study NAME"),
    ("kb list --study nosuch", "--study NAME"),
    ("kb export --out /missing/dir/kb.jsonl --study k", "does not exist"),
    ("kb export --out a-file/kb.jsonl --study k", "does not exist"),
    ("kb report --out a-file/rep --study k", "a-file is a file"),
    ("kb report --study nosuch --out rep", "no study 'nosuch'"),
    ("kb import missing.jsonl", "no such file"),
    ("kb ablate H999 --study k", "no heuristic 'H999'"),
    ("kb list --storage sqlite:///nofile.db", "no knowledge store"),
    ("chat --session S999", "no chat session"),
    ("chat --workspace /no/such/folder --once /help", "--workspace /no/such/folder does not exist"),
    ("chat --workspace a-file", "--workspace a-file is a file"),
    ("proxies --cells 0", "--cells must be at least 3"),
    ("proxies --jobs 0", "--jobs must be at least 1"),
    ("proxies --cells 3 --out a-file", "--out a-file is a file, not a folder"),  # refused before the scoring
    ("proxies --cells 3 --out new/out --storage sqlite:///no/such/dir/x.db", "does not exist"),  # and no new/out left
    ("bench --budget 5 --seeds 1 --out new/out --storage sqlite:///no/such/dir/x.db", "does not exist"),
    ("chat --max-steps -1 --once /help", "--max-steps must be at least 1"),  # without an endpoint too
    ("chat --json", "use it with --once"),
]


@pytest.mark.parametrize(("command", "says"), CASES, ids=[c for c, _ in CASES])
def test_bad_input_is_one_line_and_exit_2(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str, says: str
) -> None:
    monkeypatch.chdir(workdir)
    for name in ("COEVO_LLM_BASE_URL", "COEVO_LLM_MODEL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # not a terminal: nothing may wait for an answer
    before = sorted(p.name for p in workdir.iterdir())
    code = main(command.split())  # an escaping exception (a traceback) fails the test here
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    error_at = next(i for i, line in enumerate(lines) if line.startswith("error:"))
    message = " ".join(lines[error_at:])  # one message (rich folds long lines at the terminal width)
    assert says in message and "Traceback" not in err
    assert sorted(p.name for p in workdir.iterdir()) == before  # nothing created (no file, no folder)


def test_a_bad_storage_is_said_before_the_reasoner_banner(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(workdir)
    for name in ("COEVO_LLM_BASE_URL", "COEVO_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    assert main(["search", "--proposer", "pelnas", "--storage", "sqlite:///no/such/dir/x.db"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "reasoner:" not in err, err


@pytest.mark.parametrize(
    ("command", "prog"),
    [
        ("kb list --status bogus", "coevo kb list"),
        ("search --budget many", "coevo search"),
        ("kb accept H1 --why", "coevo kb accept"),
        ("nosuch", "coevo"),
        ("search --dataset nosuch", "coevo search"),
        ("search --problem pipeline --dataset cifar10", "coevo search"),
        ("kb export --format jsonl", "coevo kb"),  # a flag of one choice that nothing read: gone
    ],
)
def test_argument_errors_are_one_line_and_a_hint(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str, prog: str
) -> None:
    """argparse's refusals: the error and where to read the arguments, not the 13-line usage block first."""
    monkeypatch.chdir(workdir)
    assert main(command.split()) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"{prog}: error: ") and lines[1] == f"run '{prog} --help' for its arguments"
    assert "usage:" not in captured.err and captured.out == ""


def _json_error(text: str) -> dict[str, object]:
    """The one JSON object a --json call printed, which must carry an error."""
    assert len(text.splitlines()) == 1, text
    record: dict[str, object] = json.loads(text)
    assert isinstance(record["error"], str) and record["exit_code"] == 2
    return record


@pytest.mark.parametrize(
    ("command", "says"),
    [
        ("search --budget -3 --json", "budget must be a number of evaluations, 0 or more"),
        ("search --budget many --json", "argument --budget: invalid int value: 'many'"),
        ("runs show nosuch --json", "no study 'nosuch'"),
        ("chat --once /frobnicate --json", "unknown command /frobnicate"),
        ("chat --workspace /no/such/folder --once /help --json", "--workspace /no/such/folder does not exist"),
    ],
)
def test_json_errors_are_one_json_object_on_stdout(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str, says: str
) -> None:
    """With --json an error is one JSON object, ``error`` and ``exit_code``, from a command and from chat --once alike."""
    monkeypatch.chdir(workdir)
    assert main(command.split()) == 2
    captured = capsys.readouterr()
    assert says in str(_json_error(captured.out)["error"])
    assert "error" in captured.err  # the line for people stays on stderr


@pytest.mark.parametrize(
    ("argv", "module", "resumes"),
    [
        (["models", "list"], "models", False),
        (["tools", "list"], "tools", False),
        (["search", "--budget", "5"], "search", True),
        (["worker", "--study", STUDY], "worker", True),
    ],
)
def test_ctrl_c_says_rerun_only_where_the_command_resumes(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str], module: str, resumes: bool
) -> None:
    import importlib

    def interrupted(*args: object, **kwargs: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.chdir(workdir)
    monkeypatch.setattr(importlib.import_module(f"coevo.agent.cli.{module}"), "run", interrupted)
    assert main(argv) == 130
    said = capsys.readouterr().err.strip()
    assert said == ("interrupted; rerun the same command to resume from storage" if resumes else "interrupted")


@pytest.mark.parametrize(
    "argv",
    [
        ["kb", "export", "--study", STUDY],  # printed with print()
        ["problems", "describe", "nb201"],  # printed through rich, whose own handling exited with status 1
        ["chat", "--once", "/tools"],  # a slash command, whose catch-all for bugs had kept the error (status 2)
    ],
    ids=["print", "rich", "chat-command"],
)
def test_a_closed_pipe_is_a_quiet_exit(workdir: Path, argv: list[str]) -> None:
    """`coevo kb export | head -1`: the reader closes; coevo stops quietly (status 141, nothing on stderr)."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written: every write fails with EPIPE
    proc = subprocess.run(
        [sys.executable, "-m", "coevo.agent.cli", *argv],
        cwd=workdir,
        env=coevo_env(),
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    os.close(write)
    assert proc.returncode == 141, proc.stderr
    assert proc.stderr == ""


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.startswith("coevo ")

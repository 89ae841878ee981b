"""The wheel installs one top-level package, ``coevo``, and works from outside the checkout.

The wheel is built from a copy of the checkout's source (``pip wheel --no-deps
--no-build-isolation``, so nothing is downloaded and the checkout gets no build/ folder),
installed with ``--no-deps`` into a throw-away venv, and imported by that venv's Python from a
folder outside the checkout, with ``PYTHONPATH`` unset. The dependencies come from the dev
venv through a plain path line in a ``.pth`` file: a path line puts that site-packages on
``sys.path`` without running the ``.pth`` files in it, so the editable install's finder stays
inactive and only the wheel's ``coevo`` can be imported.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GENERIC = ("agent", "tools", "knowledge", "search", "sim", "prompts")
"""The checkout's top-level folders: the wheel installs them as coevo.<name> only."""
DATA = {"coevo.search.nb201": ("data", "*.npz"), "coevo.prompts": ("", "*.yaml"), "coevo.sim.gnn": ("designs", "*.v")}
"""Package data the wheel must carry: package -> (folder inside it, file pattern)."""
NOT_SOURCE = {".git", ".venv", "runs", "bench-out", "build", "dist", "tests", "docs", "scripts", ".ci", ".whl", ".gl", "__pycache__"}
"""What the copy of the source leaves out (tests, docs, caches, build outputs): none of it is in the wheel."""

PROBE = """
import fnmatch, json, sys
from importlib.resources import files
import coevo
import coevo.search.problem
problem = coevo.search.problem
import coevo.testing.problems, coevo.testing.proposers, coevo.testing.tools  # the suites a plug-in runs
data = {}
for package, (sub, pattern) in json.loads(sys.argv[1]).items():
    folder = files(package).joinpath(sub) if sub else files(package)
    data[package] = sorted(p.name for p in folder.iterdir() if fnmatch.fnmatch(p.name, pattern))
# and the modules that read package data find it themselves (not only importlib.resources from here)
from coevo.prompts import load_prompt
from coevo.search.nb201.table import load_table
from coevo.sim.gnn.designs import get_design
loaded = [load_prompt(n).name for n in ("propose", "kb_update", "chat_system")]
loaded += [len(load_table().accuracy) > 0, "module" in get_design("adder8").verilog()]
editable = [m for m in sys.modules if "editable" in m]
suites = len(coevo.testing.tools.CHECKS) + len(coevo.testing.problems.CHECKS) + len(coevo.testing.proposers.CHECKS)
found = {"coevo": coevo.__file__, "problem": problem.__file__, "data": data, "editable": editable}
print(json.dumps({**found, "suites": suites, "pytest": "pytest" in sys.modules, "loaded": loaded}))
"""
"""Run by the installed Python: where coevo came from, and the package data it finds."""


def in_checkout(package: str, sub: str) -> Path:
    """The checkout's folder of ``package`` (``coevo.search.nb201`` is search/nb201) and ``sub`` in it."""
    return ROOT.joinpath(*package.split(".")[1:], sub)


def _copy_source(dest: Path) -> Path:
    def skip(folder: str, names: list[str]) -> list[str]:
        return [n for n in names if n in NOT_SOURCE or n.endswith(".egg-info")]

    return Path(shutil.copytree(ROOT, dest, symlinks=True, ignore=skip))  # symlinks kept: coevo/<name> -> ../<name>


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the wheel, the throw-away venv's Python) with the wheel installed there."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = _copy_source(tmp / "src")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp / "dist"), str(source)], check=True, timeout=600)
    (wheel,) = (tmp / "dist").glob("coevo-*.whl")
    env_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # with the checkout on it, pip finds coevo installed
    install = [*pip, "--python", str(python), "install", "--no-deps", "--no-index", "--no-compile", str(wheel)]
    subprocess.run(install, check=True, timeout=600, env=clean)
    site = _run(python, "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp).stdout.strip()
    (Path(site) / "coevo-dev-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # a path line: no import runs
    return wheel, python


def _run(python: Path, code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -c code`` in ``cwd`` without PYTHONPATH (the tests run with the checkout on it)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([str(python), "-c", code, *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=env)


def test_the_wheel_holds_only_coevo(installed: tuple[Path, Path]) -> None:
    wheel, _ = installed
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")]
        assert zf.read(top_level).decode().split() == ["coevo"]
    assert {n.split("/")[0] for n in names} == {"coevo", top_level.split("/")[0]}  # nothing else lands in site-packages
    for name in GENERIC:  # every top-level folder of the checkout is in the wheel, under coevo/
        assert f"coevo/{name}/__init__.py" in names


def test_the_installed_wheel_imports_from_outside_the_checkout(installed: tuple[Path, Path], tmp_path: Path) -> None:
    _, python = installed
    site = python.parents[1]
    probe = _run(python, PROBE, json.dumps(DATA), cwd=tmp_path)
    assert probe.returncode == 0, probe.stderr
    found = json.loads(probe.stdout)
    assert Path(found["coevo"]).is_relative_to(site) and Path(found["problem"]).is_relative_to(site)  # the wheel's, not the checkout's
    assert not found["editable"]  # the editable install's finder is not active
    assert found["suites"] > 0 and not found["pytest"]  # the conformance suites ship, and importing them needs no pytest
    assert found["loaded"] == ["propose", "kb_update", "chat_system", True, True]  # prompts, the NB201 table, Verilog designs
    for package, (sub, pattern) in DATA.items():
        shipped = sorted(p.name for p in in_checkout(package, sub).glob(pattern))
        assert shipped and found["data"][package] == shipped, package


@pytest.mark.parametrize("name", GENERIC)
def test_no_generic_top_level_module_is_installed(installed: tuple[Path, Path], tmp_path: Path, name: str) -> None:
    _, python = installed
    result = _run(python, f"import {name}", cwd=tmp_path)
    assert result.returncode == 1 and f"ModuleNotFoundError: No module named '{name}'" in result.stderr

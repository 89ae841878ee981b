"""Synthesis with Yosys to a gate-level netlist (simple gates), cached on disk.

The script is ``read_verilog -sv; chparam; synth -flatten -top; abc -g simple; opt_clean;
write_json``: the netlist holds Yosys's internal single-bit cells ($_AND_, $_OR_, $_XOR_,
$_MUX_, $_NOT_, flip-flops). The cache key is the Verilog text, the top, the parameters,
the script and Yosys's version string, so a new Yosys or an edited design re-synthesises;
each cached JSON has a SHA-256 sidecar, and a file that fails it (or fails to parse) is
synthesised again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from coevo.sim.errors import CoevoError, UserInputError
from coevo.sim.paths import cache_root
from coevo.sim.zoo.cache_files import atomic_write

ENV_YOSYS = "COEVO_YOSYS"
"""Environment variable naming the yosys executable (default: ``yosys`` on PATH)."""

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
"""A simple Verilog identifier (module and parameter names)."""

INSTALL_HINT = "install it with `apt-get install yosys` (Debian/Ubuntu package yosys, tested with 0.23)"


class YosysNotFoundError(CoevoError):
    """The yosys executable is missing; the message names the package to install."""


class SynthesisError(UserInputError):
    """Yosys rejected the design; the message quotes Yosys's error line."""


def yosys_path() -> str:
    """The yosys executable: ``$COEVO_YOSYS`` or ``yosys`` on PATH.

    Raises:
        YosysNotFoundError: when it cannot be found.
    """
    name = os.environ.get(ENV_YOSYS, "yosys")
    found = shutil.which(name)
    if found is None:
        raise YosysNotFoundError(f"Yosys is needed to synthesise circuit netlists but {name!r} was not found; {INSTALL_HINT}")
    return found


def yosys_version() -> str:
    """Yosys's version line (``Yosys 0.23 (git sha1 ...)``)."""
    out = subprocess.run([yosys_path(), "-V"], capture_output=True, text=True, timeout=60, check=False)
    return out.stdout.strip() or out.stderr.strip()


def cache_dir() -> Path:
    """``$COEVO_CACHE/netlists`` when ``COEVO_CACHE`` is set, else ``~/.cache/coevo/netlists``."""
    return cache_root() / "netlists"


def _script(source: Path, top: str, params: dict[str, int], out: Path) -> str:
    chparam = f"chparam {' '.join(f'-set {k} {int(v)}' for k, v in sorted(params.items()))} {top}; " if params else ""
    return f"read_verilog -sv {source}; {chparam}synth -flatten -top {top}; abc -g simple; opt_clean; write_json {out}"


def _error_line(log: str) -> str:
    """The first line of Yosys's output that says ERROR (else the last non-empty line)."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    for ln in lines:
        if re.search(r"\bERROR\b", ln):
            return ln
    return lines[-1] if lines else "(no output)"


def synthesize_text(
    verilog: str, top: str, params: dict[str, int] | None = None, *, name: str | None = None, source_name: str = "design.v"
) -> dict[str, Any]:
    """Synthesise Verilog text to Yosys's JSON netlist (the top module's dict), through the cache.

    Args:
        verilog: the Verilog source.
        top: the top module.
        params: parameters to set on the top (``chparam``).
        name: a readable prefix for the cache file.
        source_name: what Yosys's messages call the file (they quote a temporary copy).

    Raises:
        YosysNotFoundError: yosys is missing.
        SynthesisError: Yosys failed; the message quotes its ERROR line.
    """
    # top and parameter names go into a Yosys script: only plain identifiers, never script syntax
    for ident in (top, *(params or {})):
        if not IDENTIFIER.fullmatch(ident):
            raise UserInputError(f"{ident!r} is not a Verilog identifier (letters, digits, _ and $, not starting with a digit or $)")
    params = {k: int(v) for k, v in (params or {}).items()}
    version = yosys_version()
    key_src = json.dumps([verilog, top, sorted(params.items()), _script(Path("SRC"), top, params, Path("OUT")), version])
    key = hashlib.sha256(key_src.encode()).hexdigest()[:20]
    folder = cache_dir()
    path = folder / f"{name or top}-{key}.json"
    cached = _read_cached(path)
    if cached is not None:
        return _top_module(cached, top)
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="coevo-yosys-") as tmp:
        src, out = Path(tmp) / "design.v", Path(tmp) / "netlist.json"
        src.write_text(verilog)
        proc = subprocess.run(
            [yosys_path(), "-q", "-p", _script(src, top, params, out)], capture_output=True, text=True, timeout=1800, check=False
        )
        if proc.returncode != 0 or not out.exists():
            line = _error_line(proc.stderr + proc.stdout).replace(str(src), source_name)
            raise SynthesisError(f"Yosys could not synthesise {name or top!r}: {line}")
        data = out.read_bytes()
    _write_cached(path, data)
    return _top_module(json.loads(data), top)


def _read_cached(path: Path) -> dict[str, Any] | None:
    """The cached netlist when it and its checksum sidecar agree, else None (it will be rebuilt)."""
    sidecar = path.with_suffix(".sha256")
    try:
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != sidecar.read_text().strip():
            return None
        loaded = json.loads(data)
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


def _write_cached(path: Path, data: bytes) -> None:
    # both files written under temporary names, then renamed (the checksum last): a crash leaves no half-written pair
    # that checks out, and a failed write no temporary file
    for target, payload in ((path, data), (path.with_suffix(".sha256"), hashlib.sha256(data).hexdigest().encode())):
        atomic_write(target, functools.partial(Path.write_bytes, data=payload))


def _top_module(netlist: dict[str, Any], top: str) -> dict[str, Any]:
    modules = netlist.get("modules", {})
    if top not in modules:
        raise SynthesisError(f"Yosys's netlist has no module {top!r} (modules: {', '.join(modules) or 'none'}); check the top name")
    module: dict[str, Any] = modules[top]
    return module

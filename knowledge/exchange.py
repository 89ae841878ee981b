"""Moving heuristics between knowledge bases, machines and problems: JSON lines in and out.

An export is one JSON object per line, one line per heuristic (``"type": "heuristic"``),
carrying its current fields, its history and its evidence (see
:meth:`knowledge.store.KnowledgeStore.export`). An import reads every line first and
reports every bad line with its number; nothing is written unless all lines are good.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from coevo.knowledge.heuristics import STATUSES
from coevo.knowledge.store import ImportRecord, KnowledgeStore
from coevo.search.errors import UserInputError

MAX_ERRORS_SHOWN = 10

_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "key": str,
    "text": str,
    "scope": dict,
    "confidence": (int, float),
    "status": str,
    "author": str,
}


def to_jsonl(records: Iterable[dict[str, Any]]) -> str:
    """Records as JSON lines (one per heuristic), newline-terminated."""
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)


def parse_jsonl(text: str, *, source: str) -> list[ImportRecord]:
    """Parse and validate an export; every error names its line.

    Args:
        text: the file's content.
        source: what to call the file in messages (its path).

    Raises:
        UserInputError: any line is not a valid heuristic record (all errors listed, up to 10).
    """
    errors: list[str] = []
    records: list[ImportRecord] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append(f"line {number}: not JSON ({exc.msg} at column {exc.colno})")
            continue
        problems = _check(obj)
        if problems:
            errors.append(f"line {number}: {'; '.join(problems)}")
            continue
        if obj["key"] in seen:
            errors.append(f"line {number}: claim {obj['key']!r} appears again (first on line {seen[obj['key']]})")
            continue
        seen[obj["key"]] = number
        origin = f"{obj.get('kb', source)}:{obj.get('id', '?')}"
        records.append(
            ImportRecord(
                key=obj["key"],
                text=obj["text"],
                scope=obj["scope"],
                structured=obj.get("structured"),
                confidence=float(obj["confidence"]),
                status=obj["status"],
                author=obj["author"],
                origin=origin,
                evidence=tuple(obj.get("evidence", [])),
            )
        )
    if errors:
        shown = "\n  ".join(errors[:MAX_ERRORS_SHOWN])
        more = f"\n  ... and {len(errors) - MAX_ERRORS_SHOWN} more" if len(errors) > MAX_ERRORS_SHOWN else ""
        raise UserInputError(f"{source}: {len(errors)} bad line(s), nothing imported:\n  {shown}{more}")
    if not records:
        raise UserInputError(f"{source}: no heuristics in the file (expected one JSON object per line, as `coevo kb export` writes)")
    return records


def _check(obj: Any) -> list[str]:
    if not isinstance(obj, dict):
        return [f"expected a JSON object, got {type(obj).__name__}"]
    if obj.get("type", "heuristic") != "heuristic":
        return [f"type {obj.get('type')!r} is not 'heuristic'"]
    problems = _check_fields(obj)
    if obj.get("structured") is not None and not isinstance(obj.get("structured"), dict):
        problems.append("field 'structured' must be an object or null")
    bad = next((k for k, e in enumerate(obj.get("evidence") or []) if not _evidence_ok(e)), None)
    if bad is not None:  # the first bad entry only
        problems.append(
            f"evidence[{bad}] needs study (str), trial (int), kind support|refute, source reasoner|record, effect (number|null)"
        )
    return problems


def _check_fields(obj: dict[str, Any]) -> list[str]:
    """The required fields: present with their types, then their values (key and text not empty, confidence, status)."""
    problems = []
    for name, kind in _REQUIRED.items():
        if name not in obj:
            problems.append(f"missing field {name!r}")
        elif not isinstance(obj[name], kind) or isinstance(obj[name], bool):
            problems.append(f"field {name!r} has type {type(obj[name]).__name__}")
    if problems:
        return problems
    if not obj["key"].strip() or not obj["text"].strip():
        problems.append("empty key or text")
    if not 0.0 <= float(obj["confidence"]) <= 1.0:
        problems.append(f"confidence {obj['confidence']} is outside 0..1")
    if obj["status"] not in STATUSES:
        problems.append(f"status {obj['status']!r} is not one of {', '.join(STATUSES)}")
    return problems


def _evidence_ok(e: Any) -> bool:
    """Whether one evidence entry has a study, a trial number, a kind, a source and an effect (or null)."""
    return (
        isinstance(e, dict)
        and isinstance(e.get("study"), str)
        and isinstance(e.get("trial"), int)
        and e.get("kind") in ("support", "refute")
        and e.get("source") in ("reasoner", "record")
        and (e.get("effect") is None or isinstance(e.get("effect"), int | float))
    )


def read_file(path: Path) -> list[ImportRecord]:
    """Parse the export at ``path``."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UserInputError(f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserInputError(f"cannot read {path}: {exc}") from None
    return parse_jsonl(text, source=str(path))


def records_from(store: KnowledgeStore, source: str) -> list[ImportRecord]:
    """Heuristics from ``source``: an export file, or the name of a knowledge base (study) in ``store``.

    Raises:
        UserInputError: neither a readable file nor a knowledge base of that name.
    """
    path = Path(source)
    if path.is_file():
        return read_file(path)
    if store.exists(source):
        return parse_jsonl(to_jsonl(store.export(source)), source=source)
    raise UserInputError(
        f"--kb-from {source!r}: no such file, and no knowledge base (study) of that name in {store.url}; "
        "give an export file (`coevo kb export`) or a study name from `coevo kb list --all`"
    )

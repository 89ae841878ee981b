"""Moving heuristics between knowledge bases, machines and problems: JSON lines in and out.

An export is one JSON object per line, one line per heuristic (``"type": "heuristic"``),
carrying its current fields, its history and its evidence (see
:meth:`knowledge.store.KnowledgeStore.export`). An import reads every line first and
reports every bad line with its number; nothing is written unless all lines are good.

A file is read in bounded pieces, never whole, and within limits far above any export's
(:data:`MAX_FILE_BYTES`, :data:`MAX_LINE_BYTES`, :data:`MAX_DEPTH`): past one, the import stops
at once with one line naming the line and the limit, and nothing is imported. So a file that
is not an export (``/dev/zero``, a log, a 200,000-deep JSON) costs a bounded amount of memory
and a clear message, not a traceback.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from coevo.knowledge.heuristics import STATUSES
from coevo.knowledge.store import ImportRecord, KnowledgeStore, default_kb_url
from coevo.search.compose import ComposedProblem
from coevo.search.errors import StorageMissingError, UserInputError
from coevo.search.problem import Problem
from coevo.search.transfer import compatibility, heuristic_compatibility, heuristic_part_of

MAX_ERRORS_SHOWN = 10

MAX_FILE_BYTES = 64 * 1024 * 1024
"""The largest file ``coevo kb import`` reads (64 MiB): an export of thousands of heuristics is a few MB."""

MAX_LINE_BYTES = 1024 * 1024
"""The longest line (one heuristic with its history and evidence) an import reads (1 MiB)."""

MAX_DEPTH = 32
"""How deeply a line's JSON may nest; an exported heuristic nests 4 levels."""

_READ_BYTES = 64 * 1024
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')

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


def nesting_depth(text: str) -> int:
    """How deeply the JSON ``text`` nests (objects and arrays), counted without parsing it.

    Brackets inside strings do not count; an unterminated string ends the count (the parser
    then says what is wrong).

    >>> nesting_depth('{"a": [1, {"b": "]]]"}]}')
    3
    >>> nesting_depth('{"a": [[["unterminated [[[')
    4
    """
    bare = _STRING.sub("0", text)  # a string's text is gone; what quote is left opens an unterminated one
    quote = bare.find('"')
    if quote != -1:
        bare = bare[:quote]
    depth = deepest = 0
    for match in re.finditer(r"[\[\]{}]", bare):
        depth += 1 if match.group() in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def parse_jsonl(text: str, *, source: str, max_depth: int = MAX_DEPTH) -> list[ImportRecord]:
    """Parse and validate an export held in memory; every error names its line.

    Args:
        text: the file's content.
        source: what to call the file in messages (its path).
        max_depth: how deeply a line may nest.

    Raises:
        UserInputError: any line is not a valid heuristic record (all errors listed, up to 10), or
            nests too deeply (that line alone).
    """
    return parse_lines(enumerate(text.splitlines(), start=1), source=source, max_depth=max_depth)


def parse_lines(lines: Iterable[tuple[int, str]], *, source: str, max_depth: int = MAX_DEPTH) -> list[ImportRecord]:
    """Parse and validate numbered lines of an export (:func:`parse_jsonl`; :func:`read_file` reads them bounded)."""
    errors: list[str] = []
    bad = 0
    records: list[ImportRecord] = []
    seen: dict[str, int] = {}
    for number, line in lines:
        if not line.strip():
            continue
        if nesting_depth(line) > max_depth:
            raise _past_limit(source, f"line {number} nests deeper than {max_depth} levels")
        try:
            obj = json.loads(line, parse_constant=_not_a_number, parse_float=_finite)
        except json.JSONDecodeError as exc:
            bad += _note(errors, f"line {number}: not JSON ({exc.msg} at column {exc.colno})")
            continue
        except ValueError as exc:  # a number Python will not read: NaN, 1e999, an integer of thousands of digits
            bad += _note(errors, f"line {number}: {str(exc).split(';')[0]}")
            continue
        problems = _check(obj)
        if problems:
            bad += _note(errors, f"line {number}: {'; '.join(problems)}")
            continue
        if obj["key"] in seen:
            bad += _note(errors, f"line {number}: claim {obj['key']!r} appears again (first on line {seen[obj['key']]})")
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
    if bad:
        shown = "\n  ".join(errors)
        more = f"\n  ... and {bad - len(errors)} more" if bad > len(errors) else ""
        raise UserInputError(f"{source}: {bad} bad line(s), nothing imported:\n  {shown}{more}")
    if not records:
        raise UserInputError(f"{source}: no heuristics in the file (expected one JSON object per line, as `coevo kb export` writes)")
    return records


def _not_a_number(name: str) -> Any:
    """``NaN`` and ``Infinity``, which Python's JSON reader accepts: no export has them, and no confidence or effect may be one."""
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    """A JSON number with a fraction or exponent, as a float: one too large for it (``1e999``) is refused, not infinity."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:20]!r} is too large")
    return value


def _note(errors: list[str], message: str) -> int:
    """Keep ``message`` if fewer than :data:`MAX_ERRORS_SHOWN` are kept (a file of bad lines costs no memory); count it."""
    if len(errors) < MAX_ERRORS_SHOWN:
        errors.append(message)
    return 1


def _check(obj: Any) -> list[str]:
    if not isinstance(obj, dict):
        return [f"expected a JSON object, got {type(obj).__name__}"]
    if obj.get("type", "heuristic") != "heuristic":
        return [f"type {obj.get('type')!r} is not 'heuristic'"]
    try:
        json.dumps(obj, ensure_ascii=False).encode()
    except UnicodeEncodeError as exc:  # a "\ud800" escape: Python reads it, no UTF-8 text (nor the store) can hold it
        return [f"a string holds a lone surrogate ({exc.object[exc.start]!a}), which is not text"]
    problems = _check_fields(obj)
    if obj.get("structured") is not None and not isinstance(obj.get("structured"), dict):
        problems.append("field 'structured' must be an object or null")
    bad = next((k for k, e in enumerate(obj.get("evidence") or []) if not _evidence_ok(e)), None)
    if bad is not None:  # the first bad entry only
        problems.append(
            f"evidence[{bad}] needs study (str), trial (int, 0 or more), kind support|refute, source reasoner|record, effect (number|null)"
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
    if not 0.0 <= obj["confidence"] <= 1.0:  # compared as it is: float() of a 400-digit integer overflows
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
        and 0 <= e["trial"] < 2**63  # a trial number, as the store's integer column holds it
        and e.get("kind") in ("support", "refute")
        and e.get("source") in ("reasoner", "record")
        and (e.get("effect") is None or (isinstance(e.get("effect"), int | float) and abs(e["effect"]) <= sys.float_info.max))
    )


def read_file(
    path: Path, *, max_file_bytes: int = MAX_FILE_BYTES, max_line_bytes: int = MAX_LINE_BYTES, max_depth: int = MAX_DEPTH
) -> list[ImportRecord]:
    """Parse the export at ``path``, read in bounded pieces (module doc); any file, a pipe or a device too.

    Raises:
        UserInputError: no such file, unreadable, past a limit (one line naming the line and
            the limit), or bad lines (each named).
    """
    try:
        size = path.stat().st_size if path.is_file() else 0
        if size > max_file_bytes:
            raise _past_limit(str(path), f"the file is larger than {max_file_bytes} bytes ({size})")
        with path.open("rb") as handle:
            return parse_lines(_lines(handle, str(path), max_file_bytes, max_line_bytes), source=str(path), max_depth=max_depth)
    except FileNotFoundError:
        raise UserInputError(f"no such file: {path}") from None
    except OSError as exc:
        raise UserInputError(f"cannot read {path}: {exc}") from None


def _lines(handle: BinaryIO, source: str, max_file_bytes: int, max_line_bytes: int) -> Iterator[tuple[int, str]]:
    """The numbered lines of ``handle``, read ``_READ_BYTES`` at a time; stops with one line at the first limit passed."""
    number, total, pending = 0, 0, b""
    while True:
        piece = handle.read(_READ_BYTES)
        total += len(piece)
        if total > max_file_bytes:
            raise _past_limit(source, f"the file is larger than {max_file_bytes} bytes")
        pending += piece
        *complete, pending = pending.split(b"\n") if piece else [*pending.split(b"\n"), b""]
        for raw in complete:
            number += 1
            yield number, _line(raw, number, source, max_line_bytes)
        if len(pending) > max_line_bytes:
            raise _past_limit(source, f"line {number + 1} is longer than {max_line_bytes} bytes")
        if not piece:
            return


def _past_limit(source: str, what: str) -> UserInputError:
    """The one-line error of a file past an import limit."""
    return UserInputError(f"{source}: {what}; nothing imported (an export of `coevo kb export` is far within the limits)")


def _line(raw: bytes, number: int, source: str, max_line_bytes: int) -> str:
    """One line as text, within the line limit."""
    if len(raw) > max_line_bytes:
        raise _past_limit(source, f"line {number} is longer than {max_line_bytes} bytes")
    try:
        return raw.decode()
    except UnicodeDecodeError as exc:
        raise UserInputError(f"{source}: line {number} is not UTF-8 text (byte {exc.start + 1}); nothing imported") from None


def records_from(store: KnowledgeStore, source: str) -> list[ImportRecord]:
    """Heuristics from ``source``: an export file, or the name of a knowledge base (study) in ``store``.

    Raises:
        UserInputError: neither a readable file nor a knowledge base of that name, or a knowledge
            base without heuristics.
    """
    path = Path(source)
    if path.is_file():
        return read_file(path)
    if store.exists(source):
        exported = list(store.export(source))
        if not exported:  # parse_jsonl would speak of a file
            raise UserInputError(
                f"--kb-from {source!r}: its knowledge base holds no heuristics (its study has learned none yet); "
                f"give a study whose knowledge base has some (`coevo kb list --study NAME`)"
            )
        return parse_jsonl(to_jsonl(exported), source=source)
    raise _no_source(store.url, source)


def source_records(storage: str | None, source: str, problem: Problem) -> list[ImportRecord]:
    """The heuristics ``--kb-from source`` brings to a search of ``problem`` in ``storage``, checked to fit it.

    As :func:`records_from` resolves ``source``, but nothing is created: the knowledge store
    beside ``storage`` is opened read-only, and only for a name (a store not made yet holds no
    knowledge base of that name). The heuristics must fit ``problem`` (:func:`check_scopes`).

    Raises:
        UserInputError: neither a readable file nor a knowledge base of that name, or heuristics
            that do not fit ``problem``.
    """
    if Path(source).is_file():
        records = read_file(Path(source))
    else:
        try:
            store = KnowledgeStore.for_storage(storage, create=False)
        except StorageMissingError:
            raise _no_source(default_kb_url(storage), source) from None
        records = records_from(store, source)
    check_scopes(records, problem, source=source)
    return records


def check_scopes(records: Sequence[ImportRecord], problem: Problem, *, source: str) -> None:
    """Refuse heuristics that were learned on another problem, or on one whose objectives differ from ``problem``'s.

    A heuristic's scope is the spec of the problem it was learned on and its niche. Every scope
    that names a problem must name ``problem``'s, and each distinct one (niche aside) must fit it
    as a study's spec would (:func:`search.transfer.compatibility`: the same objectives, with
    the same directions and units; other option values are what transfer is for). A scope
    without a problem (a hand-written heuristic) fits any.

    Raises:
        UserInputError: one line: how many heuristics are scoped to which other problem, or
            which objective differs and how.
    """
    records = onto_part(records, problem, source=source)
    scoped = [r for r in records if "problem" in r.scope]
    other = Counter(str(r.scope["problem"]) for r in scoped if r.scope["problem"] != problem.name)
    if other:
        raise UserInputError(
            f"--kb-from {source!r}: {sum(other.values())} of {len(records)} heuristics are scoped to problem "
            f"{', '.join(sorted(other))}; this search is {problem.name} (export the knowledge base of a {problem.name} study)"
        )
    specs = {json.dumps({k: v for k, v in r.scope.items() if k != "niche"}, sort_keys=True) for r in scoped}
    for spec in sorted(specs):
        compatibility(problem, json.loads(spec), source=source)


def onto_part(records: Sequence[ImportRecord], problem: Problem, *, source: str) -> list[ImportRecord]:
    """``records`` with those learned on a part's problem of a composed ``problem`` scoped to that part.

    A heuristic of an ``nb201`` study seeds an ``nb201-accel`` search this way, and one of a
    ``quant`` study a ``deploy-cnn`` search (its ``bits`` part): its scope names ``problem`` and
    gains ``part`` (the part's key) and ``from`` (the problem it was learned on), its other
    options kept (retrieval ignores those ``problem`` lacks: an NB201 device, a quant study's
    fine-tuning epochs); its structured claim gains ``part`` too, and the parameter it names is
    already the joint one (a composition keeps its parts' parameter names,
    :func:`search.compose.check_parts`). Which parts map, and what must match, is
    :func:`search.transfer.heuristic_part_of` and :func:`search.transfer.heuristic_compatibility`.
    ``coevo kb report`` shows each one's part and source (:mod:`knowledge.imported`). Other
    records come back as they are.

    Raises:
        UserInputError: a heuristic of the predicted part whose objective does not carry over
            (learned on another dataset), or of a part whose parameters differ, in one line.
    """
    out = []
    checked: set[str] = set()
    for rec in records:
        key = heuristic_part_of(problem, rec.scope.get("problem"))
        if key is None:
            out.append(rec)
            continue
        assert isinstance(problem, ComposedProblem)  # heuristic_part_of maps only onto a composition's part
        spec = {k: v for k, v in rec.scope.items() if k != "niche"}
        if json.dumps(spec, sort_keys=True) not in checked:
            heuristic_compatibility(problem, key, spec, source=source)
            checked.add(json.dumps(spec, sort_keys=True))
        out.append(_scoped_to_part(rec, problem, key))
    return out


def _scoped_to_part(rec: ImportRecord, problem: ComposedProblem, key: str) -> ImportRecord:
    """``rec`` (learned on part ``key``'s problem) as a heuristic of ``problem``'s part ``key``."""
    scope = {**rec.scope, "problem": problem.name, "part": key, "from": rec.scope["problem"]}
    # the claim's parameter keeps its name: a composition's parameters are its parts' own (check_parts)
    structured = None if rec.structured is None else {**rec.structured, "part": key}
    return dataclasses.replace(rec, scope=scope, structured=structured)


def _no_source(url: str, source: str) -> UserInputError:
    """The one line of a ``--kb-from`` that names nothing (``url``: the knowledge store looked in)."""
    return UserInputError(
        f"--kb-from {source!r}: no such file, and no knowledge base (study) of that name in {url}; "
        "give an export file (`coevo kb export`) or a study name from `coevo kb list --all`"
    )

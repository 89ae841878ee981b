"""What the chat agent loop itself costs: time per tool call (model excluded) and session bytes per 100 turns.

    python -m coevo.figures chat-overhead --turns 100 --runs 3

Each turn is one question, one ``nb201.query`` tool call and one answer, against the
loopback OpenAI-compatible server of the test suite (instant replies), streaming as in the
REPL. Per turn the agent reports its total time, the time inside model calls and inside
the tool; the loop's own time (history rebuild, recording events, adapters, streaming
assembly) is the rest. The session database is measured after a WAL checkpoint.
"""

from __future__ import annotations

import sqlite3
import statistics
import tempfile
from pathlib import Path
from typing import Any

from coevo.agent.chat.loop import ChatAgent
from coevo.agent.chat.store import SessionStore
from coevo.agent.llm_client import LLMSettings, chat_model
from coevo.figures._common import plain_parser
from coevo.tools import REGISTRY

ARCH = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|"


def _db_bytes(path: Path) -> int:
    with sqlite3.connect(path) as con:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.stat().st_size


def _one_run(turns: int) -> dict[str, float]:
    """One fresh session of ``turns`` turns: the medians (ms), the loop's 90th percentile, and the store's growth."""
    # the test suite's loopback OpenAI-compatible server: these figures run from a checkout
    from tests.fakes.openai_server import FakeOpenAI

    folder = Path(tempfile.mkdtemp(prefix="coevo-chat-"))
    db = folder / "chat.sqlite3"
    storage = f"sqlite:///{db}"
    store = SessionStore(storage)
    call = {"name": "nb201_query", "arguments": {"arch": ARCH, "dataset": "cifar10", "device": "fpga"}}
    script: list[Any] = []
    for _ in range(turns + 1):
        script += [{"tool_calls": [call]}, {"content": "Cell 9930: 94.36 % at 7.42 ms on the FPGA (nb201.query)."}]
    with FakeOpenAI(script) as fake:
        session = store.create("fake")
        agent = ChatAgent(
            chat_model(LLMSettings(fake.url, "fake", timeout_s=10, streaming=True)),
            REGISTRY,
            store,
            session,
            storage=storage,
            confirm=lambda tool, a: True,
        )
        agent.turn("warm-up: how good is this cell?")  # imports, table load, first connection
        before = _db_bytes(db)
        loop, tool, model, total = [], [], [], []
        for k in range(turns):
            r = agent.turn(f"question {k}: how good is this cell on the fpga?")
            loop.append(r.loop_s / len(r.tool_calls))
            tool.append(r.tool_s)
            model.append(r.model_s)
            total.append(r.total_s)
        after = _db_bytes(db)
    out = {name: statistics.median(v) * 1e3 for name, v in (("loop", loop), ("tool", tool), ("model", model), ("total", total))}
    out["p90"] = sorted(loop)[int(0.9 * len(loop))] * 1e3
    out["bytes"] = after - before
    out["events"] = len(store.events(session))
    return out


def main(argv: list[str] | None = None) -> int:
    p = plain_parser("chat-overhead", __doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--turns", type=int, default=100)
    p.add_argument("--runs", type=int, default=3, help="fresh sessions; each line gives the median over them and every run's value")
    args = p.parse_args(argv)
    if args.turns < 1 or args.runs < 1:
        p.error(f"--turns {args.turns} / --runs {args.runs}: each at least 1")
    runs = [_one_run(args.turns) for _ in range(args.runs)]

    def over_runs(key: str, digits: int) -> str:
        values = [r[key] for r in runs]
        return f"median {statistics.median(values):.{digits}f} ms (runs: {', '.join(f'{v:.{digits}f}' for v in values)})"

    per_100 = [r["bytes"] * 100 / args.turns / 1024 for r in runs]
    print(f"turns: {args.turns} (1 tool call each), streaming, loopback server; {args.runs} runs, each a fresh session")
    print(f"loop time per tool call (total - model - tool): {over_runs('loop', 2)}; p90 {over_runs('p90', 2)}")
    print(f"tool time (nb201.query): {over_runs('tool', 2)}; model time (2 loopback calls): {over_runs('model', 2)}")
    print(f"turn total: {over_runs('total', 1)}")
    print(
        f"session store: {statistics.median(per_100):.1f} KiB per 100 turns (runs: {', '.join(f'{v:.1f}' for v in per_100)}; "
        f"{runs[0]['events']} events a session)"
    )
    return 0

"""What the chat agent loop itself costs: time per tool call (model excluded) and session bytes per 100 turns.

    python -m coevo.figures chat-overhead --turns 100

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


def main(argv: list[str] | None = None) -> int:
    p = plain_parser("chat-overhead", __doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--turns", type=int, default=100)
    args = p.parse_args(argv)
    # the test suite's loopback OpenAI-compatible server: these figures run from a checkout
    from tests.fakes.openai_server import FakeOpenAI

    folder = Path(tempfile.mkdtemp(prefix="coevo-chat-"))
    db = folder / "chat.sqlite3"
    storage = f"sqlite:///{db}"
    store = SessionStore(storage)
    call = {"name": "nb201_query", "arguments": {"arch": ARCH, "dataset": "cifar10", "device": "fpga"}}
    script: list[Any] = []
    for _ in range(args.turns + 1):
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
        for k in range(args.turns):
            r = agent.turn(f"question {k}: how good is this cell on the fpga?")
            loop.append(r.loop_s / len(r.tool_calls))
            tool.append(r.tool_s)
            model.append(r.model_s)
            total.append(r.total_s)
        after = _db_bytes(db)
    events = len(store.events(session))
    ms = {name: statistics.median(v) * 1e3 for name, v in (("loop", loop), ("tool", tool), ("model", model), ("total", total))}
    p90 = sorted(loop)[int(0.9 * len(loop))] * 1e3
    per_100 = (after - before) * 100 / args.turns / 1024
    print(f"turns: {args.turns} (1 tool call each), streaming, loopback server")
    print(f"loop time per tool call (total - model - tool): median {ms['loop']:.2f} ms, p90 {p90:.2f} ms")
    print(f"tool time (nb201.query): median {ms['tool']:.2f} ms; model time (2 loopback calls): median {ms['model']:.2f} ms")
    print(f"turn total: median {ms['total']:.1f} ms")
    print(f"session store: {after - before} bytes for {args.turns} turns ({per_100:.1f} KiB per 100 turns; {events} events)")
    return 0

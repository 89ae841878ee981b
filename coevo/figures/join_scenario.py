"""Issue 13's double-spend scenario: workers join a default `coevo search`, one is SIGKILLed and replaced.

    python -m coevo.figures join-scenario --storage postgresql://postgres@127.0.0.1:5432/test --runs 3
    python -m coevo.figures join-scenario --storage sqlite:////tmp/join.sqlite3 --runs 3 --checkout /path/to/older/coevo

A `coevo search --budget B --workers 1` starts; after `--join-after` seconds two `coevo worker`s
join the same study; one is SIGKILLed `--kill-after` seconds later and a new one joins. When
all have finished, the study is counted: paid evaluations (COMPLETE trials with query=true),
distinct points among them, coordination claims. A correct system pays exactly B, each point
once, with B claims. `--checkout` runs another checkout's code (e.g. the commit before the
fix) with the same scenario. Prints one JSON line per run and a summary, which the figures runner
saves as docs/bench/distributed/join-scenario.md.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import optuna
import sqlalchemy as sa

from coevo.figures._common import CHECKOUT, plain_parser
from coevo.search.storage import DatabaseTimeouts, engine_options


def _cli(checkout: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    return subprocess.Popen(
        [sys.executable, "-m", "coevo.agent.cli", *args],
        cwd=tempfile.gettempdir(),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def one_run(storage: str, checkout: Path, budget: int, join_after: float, kill_after: float) -> dict[str, object]:
    study = f"join-{uuid.uuid4().hex[:8]}"
    timing = ["--heartbeat", "2", "--grace", "8"]
    common = ["--storage", storage, "--study", study, *timing]
    search = _cli(checkout, "search", "--problem", "nb201", "--dataset", "cifar10", "--device", "raspi4", "--proposer", "pelnas",
                  "--budget", str(budget), "--seed", "4", "--workers", "1", *common)  # fmt: skip
    time.sleep(join_after)
    joined = [_cli(checkout, "worker", *common) for _ in range(2)]
    time.sleep(kill_after)
    joined[0].send_signal(signal.SIGKILL)
    joined[0].wait()
    joined.append(_cli(checkout, "worker", *common))
    codes = [p.wait(timeout=600) for p in (search, *joined[1:])]
    url = storage if not storage.startswith("postgresql://") else "postgresql+psycopg://" + storage.removeprefix("postgresql://")
    trials = optuna.load_study(study_name=study, storage=url).get_trials(deepcopy=False)
    paid = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE and t.user_attrs.get("query", True)]
    engine = sa.create_engine(url, **engine_options(url, DatabaseTimeouts()))  # bounded like coevo's own engines
    with engine.connect() as conn:
        claims = conn.execute(sa.text("select count(*) from coevo_claims where study = :s"), {"s": study}).scalar_one()
    engine.dispose()
    return {
        "study": study,
        "exit_codes": codes,
        "budget": budget,
        "paid": len(paid),
        "distinct": len({t.user_attrs["point_id"] for t in paid}),
        "claims": int(claims),
        "trials": len(trials),
    }


def main(argv: list[str] | None = None) -> None:
    p = plain_parser("join-scenario", __doc__)
    p.add_argument("--storage", required=True)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--budget", type=int, default=400)
    p.add_argument("--join-after", type=float, default=6.0)
    p.add_argument("--kill-after", type=float, default=4.0)
    p.add_argument("--checkout", type=Path, default=CHECKOUT, help="the coevo checkout whose code runs (default: this one)")
    args = p.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rows = []
    for _ in range(args.runs):
        rows.append(one_run(args.storage, args.checkout, args.budget, args.join_after, args.kill_after))
        print(json.dumps(rows[-1]), flush=True)
    for key in ("paid", "distinct", "claims"):
        values = [int(r[key]) for r in rows]  # type: ignore[call-overload]
        print(f"{key}: median {statistics.median(values):g} (runs: {values}); budget {args.budget}")

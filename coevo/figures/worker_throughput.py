"""Evaluations per second with 1, 2 and 4 `coevo worker` processes on one study.

    python -m coevo.figures worker-throughput --storage postgresql://postgres@127.0.0.1:5432/coevo_bench

For each mode (``query``: a table lookup per evaluation, the cheapest problem there is, so
the figure is the coordination overhead; ``zero-cost``: the zero-cost prior of each cell,
which since the shipped proxy table holds all 15,625 cells is a table read too, so this row
no longer builds networks: a worker started by ``coevo worker`` rebuilds the problem with the
default proxy settings, the ones the table was made with) and each worker count, a fresh study with the
random proposer is created and the workers are started together. Two rates are printed:
steady (paid evaluations / time from the first trial's start to the last one's end) and
end-to-end (including process start-up), each the median of ``--runs`` runs (3; the steady
rates of every run are printed beside it). Zero-cost scores are cached in the database: the 64
reference cells that define the percentile scale are computed once (as in any study on a
database) and every other cached score is deleted before each zero-cost configuration
(``--keep-cache`` to skip).
Each worker process gets ``cores / workers`` torch threads.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
import uuid

import optuna
import sqlalchemy as sa

from coevo.figures._common import CHECKOUT, plain_parser
from coevo.search.nb201.space import format_arch
from coevo.search.nb201.zero_cost_problem import ZeroCostNB201
from coevo.search.problems import make_problem
from coevo.search.proposers import get_proposer
from coevo.search.storage import DatabaseTimeouts, engine_options, resolve_storage_url
from coevo.search.study import open_study


def _run(storage: str, mode: str, workers: int, budget: int, keep_cache: bool) -> tuple[float, float, int]:
    options: dict[str, object] = {"dataset": "cifar10", "device": "fpga"}
    if mode != "query":
        options.update(mode=mode)
    problem = make_problem("nb201", options, storage=storage)  # creates the zero-cost cache table when needed
    if isinstance(problem, ZeroCostNB201):
        problem.proxies.reference()  # the robust-z scale: computed once per database, shared by all workers
        if not keep_cache:  # every other cached score goes, so each configuration computes its cells
            keep = [format_arch(c) for c in problem.proxies.reference_cells()]
            url = resolve_storage_url(storage)
            engine = sa.create_engine(url, **engine_options(url, DatabaseTimeouts()))  # bounded like coevo's own engines
            with engine.begin() as conn:
                conn.execute(
                    sa.text("DELETE FROM coevo_zero_cost WHERE arch NOT IN :keep").bindparams(sa.bindparam("keep", expanding=True)),
                    {"keep": keep},
                )
            engine.dispose()
    name = f"throughput-{mode}-{workers}-{uuid.uuid4().hex[:6]}"
    open_study(problem, get_proposer("random"), storage=storage, study_name=name, seed=0, budget=budget)
    threads = str(max(1, (os.cpu_count() or 1) // workers))
    env = {**os.environ, "PYTHONPATH": str(CHECKOUT), "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
    cmd = [sys.executable, "-m", "coevo.agent.cli", "worker", "--storage", storage, "--study", name, "--reasoner", "offline"]
    started = time.perf_counter()
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(workers)]
    codes = [p.wait() for p in procs]
    wall = time.perf_counter() - started
    if any(codes):
        raise SystemExit(f"a worker failed ({codes})")
    trials = optuna.load_study(study_name=name, storage=resolve_storage_url(storage)).get_trials(deepcopy=False)
    paid = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE and t.user_attrs.get("query", True)]
    first = min(t.datetime_start for t in paid if t.datetime_start)
    last = max(t.datetime_complete for t in paid if t.datetime_complete)
    return len(paid) / (last - first).total_seconds(), len(paid) / wall, len(paid)


def main(argv: list[str] | None = None) -> int:
    p = plain_parser("worker-throughput", __doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--storage", required=True)
    p.add_argument("--workers", default="1,2,4")
    p.add_argument("--query-budget", type=int, default=600)
    p.add_argument("--zero-cost-budget", type=int, default=40)
    p.add_argument("--modes", default="query,zero-cost")
    p.add_argument("--keep-cache", action="store_true")
    p.add_argument("--runs", type=int, default=3, help="fresh studies per configuration; the table gives medians (default 3)")
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error(f"--runs {args.runs}: at least 1")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    print(f"| mode | workers | evaluations | steady evals/s, median of {args.runs} | steady, each run | end-to-end evals/s, median |")
    print("|---|---|---|---|---|---|")
    for mode in args.modes.split(","):
        for n in (int(x) for x in args.workers.split(",")):
            budget = args.query_budget if mode == "query" else args.zero_cost_budget
            runs = [_run(args.storage, mode, n, budget, args.keep_cache) for _ in range(args.runs)]
            steady = [r[0] for r in runs]
            each = ", ".join(f"{s:.1f}" for s in steady)
            paid = "/".join(sorted({str(r[2]) for r in runs}))
            overall = statistics.median(r[1] for r in runs)
            print(f"| {mode} | {n} | {paid} | {statistics.median(steady):.1f} | {each} | {overall:.1f} |", flush=True)
    return 0

"""Does a knowledge base learned on one device help a search on another? Paired seeds, one command.

    python -m coevo.figures kb-transfer --source-device fpga --target-device raspi4 --seeds 5 --jobs 2

1. runs (or resumes) the source search: pelnas on the source device, seed 0;
2. runs the target search on ``--seeds`` seeds twice: from an empty knowledge base, and
   seeded with the source study's (``coevo search --kb-from SOURCE_STUDY --kb-from-use heuristics``: its
   heuristics only; the default would seed its paid evaluations, which issue 29's few-evals figure measures);
3. prints the paired HV-ratio and front-recall change with a 95 % interval, and writes it
   as Markdown to ``--out``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import optuna

from coevo.figures._common import plain_parser
from coevo.knowledge.ablation import compare
from coevo.search.problems import make_problem
from coevo.search.runner import run_search
from coevo.search.study import default_study_name


def main(argv: list[str] | None = None) -> int:
    p = plain_parser("kb-transfer", __doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--dataset", default="cifar10")
    p.add_argument("--source-device", default="fpga")
    p.add_argument("--target-device", default="raspi4")
    p.add_argument("--budget", type=int, default=300)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--storage", default="sqlite:///runs/transfer.sqlite3")
    p.add_argument("--out", type=Path, default=Path("bench-out/kb-transfer.md"))
    args = p.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    Path("runs").mkdir(exist_ok=True)
    started = time.perf_counter()
    source_problem = make_problem("nb201", {"dataset": args.dataset, "device": args.source_device})
    source = run_search(source_problem, "pelnas", budget=args.budget, seed=0, storage=args.storage)
    print(f"source {source.study}: HV ratio {source.hv_ratio:.4f}", file=sys.stderr)
    result = compare(
        title=f"Transfer of the {args.source_device} knowledge base to {args.target_device} ({args.dataset})",
        problem="nb201",
        options={"dataset": args.dataset, "device": args.target_device},
        proposer="pelnas",
        budget=args.budget,
        seeds=tuple(range(args.seeds)),
        storage=args.storage,
        variant={"kb_from": source.study, "kb_from_use": "heuristics"},  # the knowledge base alone, as this figure measures
        labels=("empty KB", f"KB from {args.source_device}"),
        study_prefix=default_study_name(make_problem("nb201", {"dataset": args.dataset, "device": args.target_device}), "pelnas", 0)
        + f".transfer-{args.source_device}",
        jobs=args.jobs,
    )
    result.notes.append(f"source study {source.study} ({args.budget} evaluations, HV ratio {source.hv_ratio:.4f})")
    result.notes.append(f"wall time {time.perf_counter() - started:.0f} s with {args.jobs} jobs")
    text = result.markdown()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    return 0

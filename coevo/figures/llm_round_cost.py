"""What an LLM-driven pelnas search would spend: calls and tokens per round.

Runs a real pelnas search with the LLM reasoner against the loopback OpenAI-compatible
server of the test suite (a scripted model that answers every prompt validly), then reads
the per-round usage the engine recorded in the study. Prompt and completion sizes are the
real ones coevo sends and would receive; tokens are estimated as characters / 4 (no
tokenizer is available offline), so expect a real tokenizer to differ by some 10-20 %.

Usage: python -m coevo.figures llm-round-cost [--budget 300] [--device fpga] [--price IN,OUT]
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

import optuna

from coevo.agent.coevolution import make_pelnas
from coevo.agent.reasoners.cache import ResponseCache
from coevo.agent.reasoners.llm import LLMReasoner
from coevo.figures._common import plain_parser
from coevo.search.nb201 import NB201Problem
from coevo.search.round_log import read_round_logs
from coevo.search.runner import run_search


def main(argv: list[str] | None = None) -> None:
    parser = plain_parser("llm-round-cost", __doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=300)
    parser.add_argument("--device", default="fpga")
    parser.add_argument("--price", default="0.15,0.60", help="USD per million input,output tokens (default: a small hosted model)")
    args = parser.parse_args(argv)
    # the test suite's loopback OpenAI-compatible server: these figures run from a checkout
    from tests.fakes import nb201_model
    from tests.fakes.openai_server import FakeOpenAI

    price = tuple(float(x) for x in args.price.split(","))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAI(default=nb201_model.reply) as fake:
        storage = f"sqlite:///{Path(tmp) / 'llm.sqlite3'}"
        reasoner = LLMReasoner(model="loopback-model", base_url=fake.url, cache=ResponseCache(storage), price_per_mtok=price)  # type: ignore[arg-type]
        result = run_search(
            NB201Problem(dataset="cifar10", device=args.device),
            make_pelnas("pelnas", reasoner=reasoner),
            budget=args.budget,
            seed=0,
            storage=storage,
        )
        study = optuna.load_study(study_name=result.study, storage=storage)
        logs = list(read_round_logs(storage, study).values())
    rows = [log["usage_round"] for log in logs if log.get("usage_round", {}).get("calls")]
    print(f"pelnas + LLM reasoner via loopback, budget {args.budget}, {len(logs)} rounds ({len(rows)} with LLM calls)")
    print(f"HV ratio {result.hv_ratio:.4f} (the loopback model proposes random in-niche cells: not a quality figure)")
    for key in ("calls", "prompt_tokens", "completion_tokens"):
        values = [r[key] for r in rows]
        print(f"per round {key}: median {statistics.median(values):.0f}, min {min(values)}, max {max(values)}")
    total = result.llm_usage or {}
    tokens = f"{total.get('prompt_tokens')} prompt + {total.get('completion_tokens')} completion tokens (estimated)"
    print(
        f"whole run: {total.get('calls')} calls, {tokens}, cost at {price[0]}/{price[1]} USD per Mtok: {total.get('cost_usd', 0):.4f} USD"
    )

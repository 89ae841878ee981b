"""The figures behind docs/: every table and plot the docs quote, the command that makes it, and where it goes.

One command runs any of them (from the checkout's root)::

    python -m coevo.figures list                      # name, topic, what each measures
    python -m coevo.figures reram --maps 8            # measure, save the data, render the tables
    python -m coevo.figures reram --report-only       # re-render the tables from the saved data only
    python -m coevo.figures index                     # docs/benchmarks.md and docs/bench/README.md from FIGURES

Outputs go to ``docs/bench/<topic>/`` (``--out DIR`` elsewhere). Each figure module has a
``main(argv)`` that measures, saves its data (CSV/JSON) beside its tables and renders the tables
from that saved data; :mod:`coevo.figures._common` holds what they share (output folder,
provenance, CSV and markdown writing, intervals). :data:`FIGURES` is the one list of them: a new
figure is a module plus one entry here (and ``python -m coevo.figures index`` to update the docs).
Some figures are written by coevo's own commands (``coevo bench``, ``coevo proxies``, ``coevo kb``):
they are listed too, with ``module`` None, so the index names every figure the docs quote.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["FIGURES", "Figure", "get"]


@dataclass(frozen=True)
class Figure:
    """One figure (a family of tables and plots) the docs quote.

    Attributes:
        name: the name on the command line (``python -m coevo.figures NAME``).
        topic: the docs/bench folder it writes to by default (``docs/bench/<topic>``).
        measures: what it measures, in one line.
        command: the command that made the committed outputs (its default command, with the options used).
        outputs: the files it writes, relative to ``docs/bench/<topic>`` (or the repository root when they start
            with a top-level folder such as ``search/``).
        data: the saved data its tables are rendered from (same convention as ``outputs``).
        module: the module of ``coevo.figures`` whose ``main(argv)`` runs it; None when a coevo command writes it.
        renders: whether ``--report-only`` re-renders its tables from ``data`` alone.
        no_render: why not, when ``renders`` is False and the figure saves data.
        quoted_in: the docs pages that quote it.
        also: the other commands that made committed outputs of this figure (variants: another model, a sub-folder).
        prints: the module prints its report rather than writing files; the runner saves what it prints to
            ``outputs[0]`` (with provenance), so the numbers the docs quote from it are on a page too.
    """

    name: str
    topic: str
    measures: str
    command: str
    outputs: tuple[str, ...]
    data: tuple[str, ...] = ()
    module: str | None = None
    renders: bool = False
    no_render: str = ""
    quoted_in: tuple[str, ...] = field(default_factory=tuple)
    also: tuple[str, ...] = ()
    prints: bool = False

    def path(self, rel: str) -> str:
        """``rel`` (an entry of ``outputs`` or ``data``) as a path from the repository root."""
        top = rel.split("/", 1)[0]
        return rel if top in ("search", "docs", "bench-out") else f"docs/bench/{self.topic}/{rel}"


_COEVO = "coevo itself writes it (a bench, proxy or knowledge-base command): rerun that command to remake it"

FIGURES: tuple[Figure, ...] = (
    # ---------------------------------------------------------------- NB201 (search engine, proxies, knowledge)
    Figure(
        "nb201-baselines",
        "nb201",
        "NB201 baselines random, NSGA-II, TPE: HV ratio, IGD, front recall (issue 2)",
        "coevo bench --problem nb201 --dataset cifar10 --devices fpga,raspi4,pixel3,eyeriss --proposers random,nsga2,tpe "
        "--budget 300 --seeds 5 --jobs 2",
        ("issue2-baselines-cifar10.md", "issue2-baselines-cifar10.csv"),
        ("issue2-baselines-cifar10.csv",),
        no_render=_COEVO,
    ),
    Figure(
        "nb201-pelnas",
        "nb201",
        "co-evolution vs its ablations vs baselines on NB201 CIFAR-10 (issue 3)",
        "make bench (coevo bench ... --proposers pelnas,pelnas-noniche,pelnas-nokb,tpe,nsga2,random)",
        ("issue3-pelnas-cifar10.md", "issue3-pelnas-cifar10.csv"),
        ("issue3-pelnas-cifar10.csv",),
        no_render=_COEVO,
    ),
    Figure(
        "nb201-datasets",
        "nb201",
        "co-evolution on CIFAR-100 and ImageNet16-120 (raspi4; issue 3)",
        "coevo bench --dataset cifar100 --devices raspi4 ... and --dataset imagenet16_120",
        ("issue3-pelnas-cifar100-raspi4.md", "issue3-pelnas-imagenet16_120-raspi4.md"),
        no_render=_COEVO,
    ),
    Figure(
        "nb201-proxies",
        "nb201",
        "zero-cost proxy quality (Spearman rho) and cost on 1,000 cells (issue 3)",
        "coevo proxies --cells 1000 --jobs 2",
        ("issue3-proxies.md",),
        no_render=_COEVO,
    ),
    Figure(
        "nb201-zero-cost-search",
        "nb201",
        "search in zero-cost mode: no accuracy query, the front scored afterwards (issue 3)",
        "coevo bench --mode zero-cost --proposers pelnas ...",
        ("issue3-zero-cost-cifar10.md",),
        no_render=_COEVO,
    ),
    Figure(
        "nb201-pelnas-kb",
        "nb201",
        "co-evolution after issue 4 (knowledge store, validation loop), 4 devices x 5 seeds",
        "coevo bench --dataset cifar10 --devices fpga,raspi4,pixel3,eyeriss --proposers pelnas --budget 300 --seeds 5 --jobs 2",
        ("issue4-pelnas-cifar10.md", "issue4-pelnas-cifar10.csv"),
        ("issue4-pelnas-cifar10.csv",),
        no_render=_COEVO,
    ),
    Figure(
        "kb-transfer",
        "nb201",
        "knowledge transfer fpga -> raspi4: paired HV-ratio and front-recall change (issue 4)",
        "python -m coevo.figures kb-transfer --source-device fpga --target-device raspi4 --seeds 5 --jobs 2",
        ("bench-out/kb-transfer.md (quoted in issue4-knowledge.md)",),
        module="kb_transfer",
        no_render="its data are the searches in --storage; it reruns (resumes) them",
        quoted_in=("issue4-knowledge.md",),
    ),
    Figure(
        "kb-ablation",
        "nb201",
        "whole-knowledge-base ablation (raspi4, fpga; issue 4)",
        "coevo kb ablate all --device raspi4 --seeds 5 --jobs 2 (and --device fpga)",
        ("issue4-knowledge.md",),
        no_render=_COEVO,
    ),
    Figure(
        "kb-report",
        "nb201",
        "knowledge-base review report: size and time on a 300-evaluation study (issue 4)",
        "coevo kb report --device raspi4 --out report",
        ("issue4-knowledge.md",),
        no_render=_COEVO,
    ),
    Figure(
        "paired-table",
        "nb201",
        "pelnas before and after issues 13-14: paired HV-ratio differences by device and seed",
        "python -m coevo.figures paired-table docs/bench/nb201/issue4-pelnas-cifar10.csv docs/bench/nb201/issue14-pelnas-cifar10.csv "
        '--title "..." --md issue14-pelnas-cifar10.md',
        ("issue14-pelnas-cifar10.md",),
        ("issue4-pelnas-cifar10.csv", "issue14-pelnas-cifar10.csv"),
        module="paired_table",
        renders=True,
    ),
    Figure(
        "proxy-table",
        "nb201",
        "the shipped proxy table: every zero-cost proxy on NB201 cells (issue 15)",
        "bash coevo/figures/proxy_table_parallel.sh OUT 16 10 470 (on a borrowed GPU machine; search/nb201/data/PROVENANCE.md)",
        ("search/nb201/data/proxies-natural.npz",),
        module="proxy_table",
        no_render="it is the data: scoring cells is the measurement",
    ),
    Figure(
        "nb201-data",
        "nb201",
        "the shipped NB201 x hardware table re-encoded as package data",
        "python -m coevo.figures nb201-data PATH/TO/nb201_accuracy_latency.csv",
        ("search/nb201/data/nb201.npz", "search/nb201/data/PROVENANCE.md"),
        module="nb201_data",
        no_render="it converts a data file; there is no table to render",
    ),
    Figure(
        "zero-cost",
        "nb201",
        "proxies before/after the natural batch, zero-shot recipes, predictor rho by labels (issue 15)",
        "python -m coevo.figures zero-cost",
        (
            "issue15-proxies.md",
            "issue15-proxies.csv",
            "issue15-zero-shot.md",
            "issue15-zero-shot.csv",
            "issue15-predictor.md",
            "issue15-predictor.csv",
        ),
        ("issue15-proxies-gaussian.npz", "search/nb201/data/proxies-natural.npz"),
        module="zero_cost",
        renders=True,
    ),
    Figure(
        "predictor-labels",
        "nb201",
        "each zero-cost proxy's and the search's predictor's rank correlation on held-out cells vs paid labels 0-300 (issue 29)",
        "python -m coevo.figures predictor-labels --draws 5",
        ("issue29-predictor.md", "issue29-predictor.csv"),
        ("issue29-predictor.csv",),
        module="predictor_labels",
        renders=True,
        quoted_in=("docs/engine.md",),
    ),
    Figure(
        "engine-cost",
        "nb201",
        "wall time of a 300-query NB201 pelnas search (what make demo runs) and its predictor's time per round vs labels (issue 29)",
        "python -m coevo.figures engine-cost --repeats 5",
        ("issue29-engine-cost.md", "issue29-engine-cost.csv", "issue29-engine-rounds.csv"),
        ("issue29-engine-cost.csv", "issue29-engine-rounds.csv"),
        module="engine_cost",
        renders=True,
        quoted_in=("docs/engine.md",),
    ),
    Figure(
        "few-evals",
        "nb201",
        "NB201 HV ratio vs paid queries 0/10/30/100/300 per pair and proposer (query and few-shot mode, each against its fair "
        "baseline), and transfer from an earlier study (evaluations, heuristics, both; warm-started TPE beside) (issue 29)",
        "python -m coevo.figures few-evals --pairs cifar10/eyeriss,cifar100/pixel3,imagenet16_120/eyeriss --seeds 3 --jobs 2 --transfer",
        ("issue29-few-evals.md", "issue29-budgets.csv", "issue29-transfer.csv"),
        ("issue29-budgets.csv", "issue29-transfer.csv"),
        module="few_evals",
        renders=True,
        quoted_in=("docs/engine.md",),
    ),
    Figure(
        "nb201-summary",
        "nb201",
        "query mode with ablations and fair baselines, few-shot and zero-cost modes (issue 15)",
        "the coevo bench commands named in the summary, then python -m coevo.figures nb201-summary",
        ("issue15-summary.md",),
        (
            "issue15-query-cifar10.csv",
            "issue15-mobo-cifar10.csv",
            "issue15-fewshot-cifar10.csv",
            "issue15-zerocost-cifar10.csv",
            "issue15-small-cifar10.csv",
            "issue15-baselines-cifar10.csv",
            "issue15-proxies.csv",
            "issue15-zero-shot.csv",
            "issue15-predictor.csv",
        ),
        module="nb201_summary",
        renders=True,
    ),
    # ---------------------------------------------------------------- the agent and the engine
    Figure(
        "reasoner",
        "reasoner",
        "the engine's dependence on its reasoner: simulated reasoners x screening x tools, offline pelnas, pelnas-nokb, TPE (issue 16)",
        "python -m coevo.figures reasoner --devices fpga,raspi4 --seeds 5 --budget 300 --jobs 2 --ensemble sim-oracle-0.25:1,sim-random:1 "
        "--arms floor+tools,floor,tools,plain,screen+tools,screen (cut after 3 seeds: the same with --seeds 3 --existing-only "
        "--storage URL)",
        ("results.md", "runs.csv"),
        ("runs.csv",),
        module="reasoner",
        renders=True,
    ),
    Figure(
        "chat-overhead",
        "agent",
        "chat loop overhead per tool call and session bytes per 100 turns (loopback server)",
        "python -m coevo.figures chat-overhead --turns 100 --runs 3",
        ("chat-overhead.md",),
        prints=True,
        module="chat_overhead",
        quoted_in=("docs/chat.md",),
    ),
    Figure(
        "llm-round-cost",
        "agent",
        "LLM calls and tokens per co-evolution round (loopback server; tokens = characters / 4)",
        "python -m coevo.figures llm-round-cost --budget 300",
        ("llm-round-cost.md",),
        prints=True,
        module="llm_round_cost",
    ),
    Figure(
        "worker-throughput",
        "distributed",
        "evaluations per second with 1, 2 and 4 coevo worker processes on one study",
        "python -m coevo.figures worker-throughput --storage postgresql://postgres@127.0.0.1:5432/coevo_bench --runs 3",
        ("worker-throughput.md",),
        prints=True,
        module="worker_throughput",
        quoted_in=("docs/distributed.md",),
    ),
    Figure(
        "join-scenario",
        "distributed",
        "workers join, one is SIGKILLed and replaced: paid evaluations, distinct points, claims",
        "python -m coevo.figures join-scenario --storage URL --runs 3",
        ("join-scenario.md",),
        prints=True,
        module="join_scenario",
        quoted_in=("docs/distributed.md",),
    ),
    # ---------------------------------------------------------------- pipeline parallelism
    Figure(
        "pipeline-cpsat-gloo",
        "pipeline",
        "pipeline planner: CP-SAT schedules vs 1F1B, gloo bytes and step-time calibration (issue 7)",
        "python -m coevo.figures pipeline-cpsat-gloo",
        ("pipeline-cpsat-gloo.md",),
        prints=True,
        module="pipeline_cpsat_gloo",
        quoted_in=("docs/pipeline.md",),
    ),
    Figure(
        "pipeline-search",
        "pipeline",
        "searches on the pipeline problem: HV over evaluations (issue 7)",
        "coevo bench --problem pipeline --devices v100x16-ib10,v100x16-ib300 --proposers random,nsga2,tpe,pelnas --budget 100 "
        "--seeds 5 --jobs 2",
        ("issue7-pipeline-search.md", "issue7-pipeline-hv-ib10.png"),
        no_render=_COEVO,
    ),
    Figure(
        "pipeline-fair",
        "pipeline",
        "skip-aware vs three block-wise baselines at the same PP x DP (bytes, throughput), best configuration per "
        "partitioner, predicted vs measured activation memory (issue 18)",
        "python -m coevo.figures pipeline-fair",
        ("fair.md", "fair.csv", "best.md", "best.csv", "memory.md", "memory.csv", "facts.csv"),
        ("fair.csv", "best.csv", "memory.csv"),
        module="pipeline_fair",
        renders=True,
        quoted_in=("docs/pipeline.md",),
    ),
    Figure(
        "pipeline-schedules",
        "pipeline",
        "1F1B, interleaved 1F1B, ZB-H1 and CP-SAT on PULSE's plans; hybrid PP x DP with shared NICs",
        "python -m coevo.figures pipeline-schedules --time-limit 10 --workers 2 --seeds 0 1 2 --micro 8 16 --pp 4 8",
        ("pipeline-schedules.md", "pipeline-schedules.csv", "pipeline-network.csv"),
        ("pipeline-schedules.csv", "pipeline-network.csv"),
        module="pipeline_schedules",
        renders=True,
        quoted_in=("docs/pipeline.md",),
    ),
    # ---------------------------------------------------------------- composed problems (co-design)
    Figure(
        "codesign",
        "codesign",
        "joint vs sequential co-design on nb201-accel at equal evaluations and at equal accuracy queries (and TPE, random): "
        "paired HV-ratio differences, exhaustive bounds, the fronts plotted (issue 32)",
        "nice -n 10 python -m coevo.figures codesign --arms joint,sequential,random, then the same with --arms sequential-acc, "
        "then --arms tpe (a run's rows replace its earlier ones, the other arms' are kept), then --arms '' (the derived "
        "tables only: bounds, free-accelerator rescoring)",
        ("codesign.md", "codesign.csv", "codesign-designs.csv", "codesign-bounds.csv", "codesign-free.csv", "codesign-fronts.png"),
        ("codesign.csv", "codesign-designs.csv", "codesign-bounds.csv", "codesign-free.csv"),
        module="codesign",
        renders=True,
        quoted_in=("docs/compose.md",),
    ),
    Figure(
        "kb-joint",
        "codesign",
        "what --kb-from a single-family study does to a joint search: a 100-evaluation nb201 study into a 40-evaluation "
        "nb201-accel search (HV ratio), a 40-evaluation quant study into a 24-evaluation deploy-cnn search (pooled HV ratio, "
        "and what became of the imported heuristics); alone and seeded, paired by seed (issue 32)",
        "nice -n 10 python -m coevo.figures kb-joint --seeds 3",
        ("kb-joint.md", "kb-joint.csv"),
        ("kb-joint.csv",),
        module="kb_joint",
        renders=True,
        quoted_in=("docs/compose.md",),
    ),
    Figure(
        "codesign-cnn",
        "codesign-cnn",
        "joint vs sequential co-design on deploy-cnn (bits and sparsity of cnn-digits x a systolic array) at equal "
        "evaluations: HV ratios against the pooled front, paired differences, the fronts plotted (issue 32)",
        "nice -n 10 python -m coevo.figures codesign-cnn",
        (
            "codesign-cnn.md",
            "codesign-cnn.csv",
            "codesign-cnn-designs.csv",
            "codesign-cnn-best.csv",
            "codesign-cnn-fronts.png",
        ),
        ("codesign-cnn.csv", "codesign-cnn-designs.csv", "codesign-cnn-best.csv"),
        module="codesign_cnn",
        renders=True,
        quoted_in=("docs/compose.md",),
    ),
    Figure(
        "codesign-lm",
        "codesign-lm",
        "joint vs sequential co-design on deploy-lm (sparsity and weight bits of lm-pydoc-tiny x an FPGA transformer accelerator "
        "with top-k attention) at equal evaluations: HV ratios against the pooled front, paired differences, the fronts plotted "
        "(issue 32)",
        "nice -n 10 python -m coevo.figures codesign-lm",
        ("codesign-lm.md", "codesign-lm.csv", "codesign-lm-designs.csv", "codesign-lm-fronts.png"),
        ("codesign-lm.csv", "codesign-lm-designs.csv"),
        module="codesign_lm",
        renders=True,
        quoted_in=("docs/compose.md",),
    ),
    # ---------------------------------------------------------------- networks on chip, accelerators
    Figure(
        "noc",
        "noc",
        "GT routings on an 8x8 mesh with best-effort latency, XY saturation, simulator speed (issue 8)",
        "python -m coevo.figures noc",
        ("mesh-runs.csv", "noc-mesh8-uniform.png", "noc-mesh8-hotspot.png", "issue8-noc.md (its mesh section)"),
        data=("mesh-runs.csv",),
        module="noc",
        renders=True,
        quoted_in=("issue8-noc.md",),
    ),
    Figure(
        "noc-benes",
        "noc",
        "Benes optical NoC with set-up latency, ACK and holding: zero-load check, delay vs length and N, blocking vs the model, "
        "load curves (issue 18)",
        "nice -n 10 python -m coevo.figures noc-benes --jobs 2",
        ("benes.md", "runs.csv", "zero_load.csv", "noc-benes16.png", "noc-benes64.png", "issue8-noc.md (its Benes section)"),
        ("runs.csv", "zero_load.csv"),
        module="noc_benes",
        renders=True,
        quoted_in=("docs/noc.md",),
    ),
    Figure(
        "noc-bee",
        "noc",
        "GT routing on the SDM mesh: bee foraging vs widest-shortest, k-shortest, XY, adaptive, 5 seeds (issue 18)",
        "python -m coevo.figures noc-bee --seeds 5 --cycles 6000",
        ("bee.md", "bee-runs.csv", "bee-summary.csv", "bee-paired.csv"),
        ("bee-runs.csv",),
        module="noc_bee",
        renders=True,
        quoted_in=("docs/noc.md", "issue8-noc.md"),
    ),
    Figure(
        "noc-energy",
        "noc",
        "energy-aware compression on a simulated systolic array; cycles against SCALE-Sim (issue 18)",
        "nice -n 10 python -m coevo.figures noc-energy --seeds 5",
        (
            "energy.md",
            "steps-<model>.csv",
            "choices-<model>.csv",
            "groups-<model>.csv",
            "mapping-<model>.csv",
            "msb-occupancy-<model>.csv",
            "scalesim.csv",
            "issue8-noc.md (its compression section)",
        ),
        (
            "steps-cnn-digits.csv",
            "steps-cnn-mnist5k.csv",
            "choices-cnn-digits.csv",
            "choices-cnn-mnist5k.csv",
            "groups-cnn-digits.csv",
            "groups-cnn-mnist5k.csv",
            "mapping-cnn-digits.csv",
            "mapping-cnn-mnist5k.csv",
            "scalesim.csv",
        ),
        module="noc_energy",
        renders=True,
        quoted_in=("docs/noc.md",),
        also=("one process per model: --models cnn-digits --no-scalesim, --models cnn-mnist5k --no-scalesim, then --report-only",),
    ),
    Figure(
        "fpga-schedule",
        "fpga",
        "length-aware scheduling with per-batch PE re-allocation vs bucketing and padding: paired speed-ups; CP-SAT gaps",
        "nice -n 10 python -m coevo.figures fpga-schedule --draws 10 --calibration 10 --batches 8 16 32 64 --cpsat-seeds 6 "
        "--cpsat-batch 4 --time-limit 10",
        ("schedule.md", "schedule.csv", "schedule_cpsat.csv", "schedule_run.json"),
        ("schedule.csv", "schedule_cpsat.csv", "schedule_run.json"),
        module="fpga_schedule",
        renders=True,
        quoted_in=("docs/fpga.md",),
    ),
    Figure(
        "fpga-search",
        "fpga",
        "the found front of one 60-evaluation pelnas search of fpga-transformer (offline reasoner, seed 0)",
        "coevo search --problem fpga-transformer --proposer pelnas --budget 60 --json > docs/bench/fpga/search-pelnas-60.json",
        ("search-pelnas-60.json",),
        ("search-pelnas-60.json",),
        no_render=_COEVO,
        quoted_in=("docs/fpga.md",),
    ),
    Figure(
        "reram",
        "reram",
        "accuracy / perplexity vs stuck-at fault rate per protection scheme, cnn-digits-cv (8 seeds x 5 folds, each seed its own "
        "models) and lm-pydoc-tiny (4 seeds), paired, area (issues 20, 31)",
        "nice -n 10 python -m coevo.figures reram --maps 8",
        ("reram.md", "reram.csv", "reram-run.json", "reram-*.png"),
        ("reram.csv", "reram-run.json"),
        module="reram",
        renders=True,
        quoted_in=("docs/reram.md",),
    ),
    # ---------------------------------------------------------------- kernels, graphs, encrypted inference
    Figure(
        "spmm",
        "spmm",
        "degree-block SpMM variants naming Accel-GCN's parts vs naive, scipy, torch.sparse on R-MAT / BA graphs; tuned per "
        "width (issues 19, 30)",
        "OMP_WAIT_POLICY=passive python -m coevo.figures spmm --sizes 100k 1m 10m --kinds rmat ba --widths 32 128 --repeats 7 "
        "--budget 16 --threads 1 2",
        ("spmm.md", "spmm.csv", "spmm-tuning.csv", "spmm-run.json"),
        ("spmm.csv", "spmm-tuning.csv", "spmm-run.json"),
        module="spmm",
        renders=True,
        quoted_in=("docs/kernels.md",),
    ),
    Figure(
        "circuit-gnn",
        "gnn",
        "circuit GNN (DR-CircuitGNN) on Yosys netlists: time vs both dense models and PyG, threads over row blocks vs over "
        "the independent subgraphs, one part removed at a time; label error (issues 19, 30)",
        "nice -n 10 python -m coevo.figures circuit-gnn",
        ("circuit.md", "circuit.csv", "circuit_labels.csv", "circuit_run.json"),
        ("circuit.csv", "circuit_labels.csv", "circuit_run.json"),
        module="circuit_gnn",
        renders=True,
        quoted_in=("docs/gnn.md",),
    ),
    Figure(
        "he-gcn",
        "he",
        "LinGCN: accuracy, multiplicative depth, CKKS latency at 3 linearization budgets vs the all-polynomial baseline (issue 30)",
        "nice -n 10 python -m coevo.figures he-gcn --encrypt digits-grid4 digits-grid",
        ("he.md", "he.csv", "he_timing.csv"),
        ("he.csv", "he_timing.csv"),
        module="he_gcn",
        renders=True,
        quoted_in=("docs/he.md",),
    ),
    Figure(
        "attention",
        "attention",
        "sparse attention: perplexity and top-k recall vs k and bits, time and MACs vs length (issue 20)",
        "nice -n 10 python -m coevo.figures attention",
        ("attention.md", "attention.csv", "attention-length.csv", "attention-time.csv", "attention-finetune.csv", "attention-*.png"),
        ("attention.csv", "attention-length.csv", "attention-time.csv", "attention-finetune.csv"),
        module="attention",
        renders=True,
        quoted_in=("docs/attention.md",),
        also=(
            "the parts: --only time, --only quality --models lm-pydoc-tiny, --only length --length-seeds 0 1 2, "
            "--only finetune --tiny-seeds 0",
        ),
    ),
    # ---------------------------------------------------------------- compression and training
    Figure(
        "quant",
        "quant",
        "class-based mixed precision vs uniform, HAWQ-trace and magnitude at 2.5 and 3 average bits on cnn-digits-cv and, "
        "as a second task, cnn-mnist5k-small (issues 17, 31)",
        "nice -n 10 python -m coevo.figures quant (--search: also the quant_search/ bench)",
        ("quant.md", "quant.csv", "quant_search/", "mnist5k-small/"),
        ("quant.csv", "mnist5k-small/quant.csv"),
        module="quant",
        renders=True,
        quoted_in=("docs/quant.md",),
        also=("mnist5k-small/: nice -n 10 python -m coevo.figures quant --model cnn-mnist5k-small --out docs/bench/quant/mnist5k-small",),
    ),
    Figure(
        "zoqat",
        "quant",
        "W4A8 zeroth-order QAT, light (scales) and full ZeroQAT (weights too), by SPSA and P-GAP, vs STE QAT, RTN and GPTQ: "
        "perplexity with paired intervals, peak process memory, time per step (issues 17, 31)",
        "nice -n 10 python -m coevo.figures zoqat --model lm-pydoc-tiny",
        ("zoqat.md", "zoqat.csv", "zoqat-vary-model.md", "zoqat-vary-model.csv", "zoqat-ablation.md", "zoqat-ablation.csv"),
        ("zoqat.csv", "zoqat-vary-model.csv", "zoqat-ablation.csv"),
        module="zoqat",
        renders=True,
        quoted_in=("docs/zoqat.md", "docs/families.md"),
        also=(
            "zoqat-vary-model: nice -n 5 python -m coevo.figures zoqat --model lm-pydoc-tiny --steps 300 --vary-model "
            "--lr-from docs/bench/quant/zoqat.csv --seeds 0,1,2,3,4,5,6,7 (seeds 0-2 first, at 1e2b076; 3-7 added at 55d9ae0)",
            "zoqat-ablation: nice -n 10 python -m coevo.figures zoqat --ablation",
        ),
    ),
    Figure(
        "prune",
        "prune",
        "LM perplexity at 50 % unstructured and 2:4 per pruning score, 32 and 512 calibration tokens, every score paired "
        "against Wanda by seed; with --vary-model the seeds train their own models (issues 17, 31)",
        "nice -n 10 python -m coevo.figures prune",
        ("prune.md", "prune.csv", "prune-tiny/", "prune-pystdlib/", "prune-tiny-vary/", "prune-pystdlib-tiny-vary/"),
        ("prune.csv",),
        module="prune",
        renders=True,
        also=(
            "prune-tiny/: python -m coevo.figures prune --model lm-pydoc-tiny --seeds 0,1,2,3,4 --out docs/bench/prune/prune-tiny",
            "prune-pystdlib/: nice -n 5 python -m coevo.figures prune --model lm-pystdlib --out docs/bench/prune/prune-pystdlib",
            "prune-tiny-vary/: nice -n 10 python -m coevo.figures prune --model lm-pydoc-tiny --vary-model --seeds 0,1,2,3,4 "
            "--out docs/bench/prune/prune-tiny-vary",
            "prune-pystdlib-tiny-vary/: nice -n 10 python -m coevo.figures prune --model lm-pystdlib-tiny --vary-model "
            "--seeds 0,1,2,3,4 --out docs/bench/prune/prune-pystdlib-tiny-vary",
        ),
    ),
    Figure(
        "lm-outliers",
        "prune",
        "activation outliers (channel max/median, kurtosis, top channel's energy share, LLM.int8 outlier channels) of the zoo "
        "LMs, and with --trajectory over the checkpoints of a fresh, longer training (issue 31, item 1)",
        "nice -n 10 python -m coevo.figures lm-outliers",
        ("outliers.md", "outliers.csv", "outlier-trajectory.md", "outlier-trajectory.csv"),
        ("outliers.csv", "outlier-trajectory.csv"),
        module="lm_outliers",
        renders=True,
        quoted_in=("docs/prune.md",),
        also=(
            "outlier-trajectory.md (lm-pydoc-tiny, 32x steps, weight decay 0.1): OMP_NUM_THREADS=1 nice -n 10 "
            "python -m coevo.figures lm-outliers --trajectory lm-pydoc-tiny --steps-multiplier 32 "
            "--checkpoints 8 --weight-decay 0.1 --train-seed 0",
            "outlier-trajectory.md (lm-pydoc-tiny, 32x steps, weight decay 0): OMP_NUM_THREADS=1 nice -n 10 "
            "python -m coevo.figures lm-outliers --trajectory lm-pydoc-tiny --steps-multiplier 32 "
            "--checkpoints 8 --weight-decay 0 --train-seed 0",
            "outlier-trajectory.md (lm-pydoc-tiny, 32x steps, weight decay 0, seed 1): OMP_NUM_THREADS=1 nice -n 10 "
            "python -m coevo.figures lm-outliers --trajectory lm-pydoc-tiny --steps-multiplier 32 "
            "--checkpoints 8 --weight-decay 0 --train-seed 1",
            "outlier-trajectory.md (lm-pystdlib, 1.5x steps): OMP_NUM_THREADS=1 nice -n 10 "
            "python -m coevo.figures lm-outliers --trajectory lm-pystdlib --steps-multiplier 1.5 "
            "--checkpoints 8 --train-seed 0",
            *(
                f"outlier-trajectory.md ({model}, {steps}x steps, weight decay 0, peak learning rate x{lr}): "
                f"OMP_NUM_THREADS=1 nice -n 10 python -m coevo.figures lm-outliers --trajectory {model} "
                f"--steps-multiplier {steps} --checkpoints 8 --weight-decay 0 --lr-multiplier {lr}"
                for model, steps in (("lm-pydoc-tiny", 8), ("lm-pydoc", 1))
                for lr in (1, 3, 10)
            ),
        ),
    ),
    Figure(
        "lm-wide",
        "prune",
        "LLM.int8 outlier features of byte-level LMs at widths 256-1024 (and four training seeds at 1024) trained on a GPU, "
        "and magnitude vs Wanda vs cos+var "
        "vs SparseGPT on each (issue 31)",
        "python -m coevo.figures lm-wide --corpus .gpu --device cuda --deadline-s 340 --commit REV --out OUT (on a lent H200, "
        "after python -m coevo.figures lm-wide --export-corpus .gpu here; OUT's CSVs and wide-run.json then copied to "
        "docs/bench/prune and the page rendered with --report-only)",
        (
            "wide.md",
            "wide-trajectory.csv",
            "wide-prune.csv",
            "wide-run.json",
            "wide-seeds/wide.md",
            "wide-seeds/wide-trajectory.csv",
            "wide-seeds/wide-prune.csv",
            "wide-seeds/wide-run.json",
            "wide-sparse/wide.md",
            "wide-sparse/wide-trajectory.csv",
            "wide-sparse/wide-prune.csv",
            "wide-sparse/wide-run.json",
        ),
        (
            "wide-trajectory.csv",
            "wide-prune.csv",
            "wide-run.json",
            "wide-seeds/wide-trajectory.csv",
            "wide-seeds/wide-prune.csv",
            "wide-seeds/wide-run.json",
            "wide-sparse/wide-trajectory.csv",
            "wide-sparse/wide-prune.csv",
            "wide-sparse/wide-run.json",
        ),
        module="lm_wide",
        renders=True,
        quoted_in=("docs/prune.md", "docs/families.md"),
        also=(
            "wide-seeds/ (width 1,024, four training seeds): python -m coevo.figures lm-wide --corpus .gpu --device cuda "
            "--widths 1024 --seeds 0,1,2,3 --calib-seeds 2 --deadline-s 535 --out OUT --commit REV (on a lent H200; OUT copied "
            "to docs/bench/prune/wide-seeds, the page rendered with --report-only --out docs/bench/prune/wide-seeds)",
            "wide-sparse/ (width 1,024, seed 0, unstructured at 50-70 % and 2:4): python -m coevo.figures lm-wide --corpus .gpu "
            "--device cuda --widths 1024 --seeds 0 --patterns unstructured,2:4 --sparsities 0.5,0.6,0.7 --calib-seeds 2 "
            "--deadline-s 215 --out OUT --commit REV (on a lent H200; OUT copied to docs/bench/prune/wide-sparse, rendered there "
            "with --report-only)",
        ),
    ),
    Figure(
        "budgets",
        "budgets",
        "HV against paid evaluations (10, 20, 40, 60) on quant, prune, reram, fpga-transformer: pelnas vs TPE, random, "
        "qnehvi, 3 seeds, paired (issue 29)",
        "nice -n 5 python -m coevo.figures budgets (each problem: coevo bench --problem P --proposers pelnas,tpe,random,qnehvi "
        "--budgets 10,20,40,60 --seeds 3 --jobs 1 --out docs/bench/budgets/P)",
        ("summary.md", "quant/", "prune/", "reram/", "fpga-transformer/"),
        ("quant/budgets.csv", "prune/budgets.csv", "reram/budgets.csv", "fpga-transformer/budgets.csv"),
        module="budgets",
        renders=True,
        quoted_in=("docs/benchmarks.md",),
    ),
    Figure(
        "stepping",
        "stepping",
        "SteppingNet (importance-driven assignment) vs the fixed partition, slimmable and independent nets at equal MACs, "
        "cross-validated over all 1,797 digits and, as a second task, the 5,000 MNIST images of cnn-mnist5k; stepping latency, "
        "MAC equality (issues 21, 31)",
        "nice -n 10 python -m coevo.figures stepping",
        ("stepping.md", "stepping.csv", "stepping-latency.csv", "stepping-macs.csv", "stepping-run.json", "mnist5k/"),
        ("stepping.csv", "stepping-latency.csv", "stepping-macs.csv", "stepping-run.json", "mnist5k/stepping.csv"),
        module="stepping",
        renders=True,
        quoted_in=("docs/stepping.md",),
        also=(
            "mnist5k/: nice -n 10 python -m coevo.figures stepping --models cnn-mnist5k --seeds 0 1 2 3 4 --epochs cnn-mnist5k=15 "
            "--kinds importance+kd index+kd slimmable independent --out docs/bench/stepping/mnist5k",
        ),
    ),
    Figure(
        "freeze",
        "freeze",
        "layer freezing with a compressed cache vs full training and naive freezing, codec and augmentation ablations",
        "nice -n 10 python -m coevo.figures freeze --model cnn-digits --epochs 20 --freeze-at 6 10 --seeds 0 1 2",
        ("freeze.md", "freeze.csv", "freeze-run.json", "freeze-mnist5k.md", "freeze-mnist5k.csv", "freeze-mnist5k-run.json"),
        ("freeze.csv", "freeze-mnist5k.csv"),
        module="freeze",
        renders=True,
        quoted_in=("docs/freezing.md",),
        also=("freeze-mnist5k.md: python -m coevo.figures freeze --model cnn-mnist5k --epochs 6 --freeze-at 2 4 --seeds 0 --tag=-mnist5k",),
    ),
)
"""Every figure, grouped by topic (the order of the index pages)."""


def get(name: str) -> Figure:
    """The figure called ``name`` (``KeyError`` when there is none)."""
    for figure in FIGURES:
        if figure.name == name:
            return figure
    raise KeyError(name)

#!/usr/bin/env bash
# Build the shipped proxy table on a many-core machine (optionally with a GPU), as it was made:
#   bash coevo/figures/proxy_table_parallel.sh OUT_NPZ WORKERS GPU_WORKERS SECONDS [PROVENANCE]
# WORKERS processes take 64 chunks of the fixed cell order from a shared queue (a chunk is claimed
# by creating its folder); the first GPU_WORKERS score on cuda, the rest on one CPU thread each.
# After SECONDS the workers stop wherever they are and every scored cell is exported; cells left
# out are computed (and cached) on first use. Finally 24 GPU-scored cells are re-scored on the CPU
# and the largest relative difference per proxy is printed, for the table's provenance.
set -uo pipefail
out=$1 workers=$2 gpus=$3 seconds=$4 provenance=${5:-}
work=$(mktemp -d)
chunks=64
run_worker() {
  local w=$1 device=cpu
  [ "$w" -lt "$gpus" ] && device=cuda
  for k in $(seq 0 $((chunks - 1))); do
    mkdir "$work/claim$k" 2>/dev/null || continue
    python3 -m coevo.figures proxy-table --source natural --cells 15625 --shard "$k/$chunks" --device "$device" \
      --storage "sqlite:///$work/w$w.sqlite3" >>"$work/log$w" 2>&1 || echo "worker $w chunk $k failed" >&2
  done
}
for w in $(seq 0 $((workers - 1))); do
  timeout "$seconds" bash -c "$(declare -f run_worker); work=$work chunks=$chunks gpus=$gpus run_worker $w" &
done
wait
pkill -f "coevo.figures proxy-table --source natural --cells" || true  # timeout stops the loops, not their python
sleep 2
tail -qn1 "$work"/log* | head -40
storages=$(ls "$work"/w*.sqlite3 | sed "s|^|sqlite:///|")
# shellcheck disable=SC2086
python3 -m coevo.figures proxy-table --source natural --storage $storages --export "$out" --provenance "$provenance"
python3 - "$work" "$gpus" <<'PY'
import json, sys, sqlite3
import numpy as np
from coevo.search.nb201.space import parse_arch
from coevo.search.zero_cost import PROXIES, ProxyConfig, compute
work, gpus = sys.argv[1], int(sys.argv[2])
rows = []
for w in range(gpus):
    try:
        rows += sqlite3.connect(f"{work}/w{w}.sqlite3").execute("select arch, scores from coevo_zero_cost limit 6").fetchall()
    except sqlite3.Error:
        pass
diff = {p: 0.0 for p in PROXIES}
for arch, scores in rows[:24]:
    gpu, cpu = json.loads(scores), compute(parse_arch(arch), ProxyConfig(batch_source="natural"))
    for p in PROXIES:
        diff[p] = max(diff[p], abs(gpu[p] - cpu[p]) / max(abs(cpu[p]), 1e-12))
print(f"GPU vs CPU on {min(len(rows), 24)} cells, largest relative difference:", json.dumps({p: float(f"{v:.2g}") for p, v in diff.items()}))
PY

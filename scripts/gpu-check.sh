#!/usr/bin/env bash
# The GPU path, proven on one machine with one GPU: prints the device, runs the GPU unit tests, then
# `bench verify specs/<family> --profile full --device cuda` for every family on the embedded models (each spec's
# default set) and on every local model given, and prints per family the seconds `bench plan` predicted (where
# this version has `bench plan`) beside the measured wall time, and the outcomes.  Sized for
# ≤ 8 minutes on one H200-class GPU: the verify runs share VERIFY_BUDGET_S (default 400 s), split evenly into a
# time limit per family and model set, so the script stays bounded even where a family runs long (its row then
# says "timeout").
#
#   scripts/gpu-check.sh [--dry-run] [MODEL_PATH …]
#
# --dry-run lists what it would run, checks the specs and collects the GPU tests; it passes on a CPU machine.
# Frames are measured afresh (a new frame cache that reuses the converted embedded models).
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3)"
DRY=0
EXTRA=()
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY=1 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) [ -e "$arg" ] || { echo "error: model path '$arg' does not exist" >&2; exit 2; }; EXTRA+=("$arg") ;;
  esac
done
FAMILIES=()
for d in specs/*/; do
  compgen -G "$d*.toml" > /dev/null && FAMILIES+=("$(basename "$d")")
done
LIMIT=$(( ${VERIFY_BUDGET_S:-400} / (${#FAMILIES[@]} * (1 + ${#EXTRA[@]})) ))
OUT="$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")"
SRC_CACHE="${BENCH_CACHE:-$HOME/.cache/bench}"
mkdir -p "$OUT/cache"
for shared in models gguf data fingerprints.json; do
  [ -e "$SRC_CACHE/$shared" ] && ln -s "$(readlink -f "$SRC_CACHE/$shared")" "$OUT/cache/$shared"
done
export BENCH_CACHE="$OUT/cache" TOKENIZERS_PARALLELISM=false

echo "== device"
if command -v nvidia-smi > /dev/null; then nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; fi
"$PY" -c "import torch; print('torch', torch.__version__, '| cuda available:', torch.cuda.is_available(),
      '|', torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no CUDA device')"
if [ "$DRY" = 0 ] && ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "error: no CUDA device; run with --dry-run to see what this script would do" >&2
  exit 2
fi

echo "== GPU unit tests"
if [ "$DRY" = 1 ]; then
  "$PY" -m pytest -q --collect-only -m gpu tests/ | tail -n 1 || exit 1
  echo "+ $PY -m pytest -q -m gpu --device cuda tests/"
else
  "$PY" -m pytest -q -m gpu --device cuda tests/ || TESTS_FAILED=1
fi

echo "== bench verify --profile full (families: ${FAMILIES[*]}; extra models: ${EXTRA[*]:-none})"
"$PY" -m bench.cli validate specs/ || exit 2
# Predictions: one `bench plan --json` per model set (a line per cell), summed per family; only where this
# version of bench has the command.
PLAN=1
"$PY" -m bench.cli plan --help > /dev/null 2>&1 || { PLAN=0; echo "bench plan: not available in this version, no predictions"; }
for models in default "${EXTRA[@]}"; do
  [ "$PLAN" = 1 ] || break
  plan="$OUT/plan-$(basename "$models")"
  "$PY" -m bench.cli plan specs/ --profile full --device cuda --models "$models" --json > "$plan.jsonl" 2> "$plan.err" ||
    echo "bench plan --models $models failed: $(tail -n 1 "$plan.err")"
done
predict() {  # FAMILY MODELS → the seconds bench plan predicted for that verify, "n/a" or "failed"
  [ "$PLAN" = 1 ] || { echo "n/a"; return; }
  "$PY" - "$1" "$OUT/plan-$(basename "$2").jsonl" <<'PY'
import json, sys
cells = [json.loads(line) for line in open(sys.argv[2]) if line.startswith('{"claim"')]
mine = [c["predicted_s"] for c in cells if c["claim"].split(".")[0] == sys.argv[1]]
print(f"{sum(mine):.1f} s" if mine else "failed")
PY
}
SUMMARY=()
for fam in "${FAMILIES[@]}"; do
  for models in default "${EXTRA[@]}"; do
    runs="$OUT/runs/$fam-$(basename "$models")"
    cmd=(timeout "$LIMIT" "$PY" -m bench.cli verify "specs/$fam" --profile full --device cuda --models "$models"
         --runs-dir "$runs" --report-dir "$OUT/reports" --no-pdf)
    predicted=$(predict "$fam" "$models")
    if [ "$DRY" = 1 ]; then echo "+ ${cmd[*]}  (predicted: $predicted)"; continue; fi
    t0=$(date +%s%N)
    "${cmd[@]}" > "$OUT/$fam-$(basename "$models").log" 2>&1
    rc=$?
    secs=$(( ($(date +%s%N) - t0) / 1000000 ))
    outcomes=$("$PY" - "$runs" <<'PY'
import collections, json, pathlib, sys
recs = sorted(pathlib.Path(sys.argv[1]).glob("*/record.json"))
if not recs:
    print("no record"); sys.exit()
rec = json.loads(recs[-1].read_text())
c = collections.Counter(cell["verdict"]["outcome"] for cell in rec["cells"] if cell.get("verdict"))
print(", ".join(f"{n} {k.lower()}" for k, n in sorted(c.items())) + f" [{rec['status']}]")
PY
)
    [ $rc = 124 ] && outcomes="timeout after ${LIMIT}s; $outcomes"
    SUMMARY+=("$(printf '%-14s %-22s %11s %6d.%01d s  exit %-3s %s' "$fam" "$(basename "$models")" "$predicted" \
                $((secs / 1000)) $((secs % 1000 / 100)) "$rc" "$outcomes")")
  done
done
if [ "$DRY" = 1 ]; then echo "dry run: nothing was run (work folder $OUT)"; rm -rf "$OUT"; exit 0; fi
echo "== per family (family, models, predicted by bench plan, measured wall time, exit, outcomes)"
printf '%s\n' "${SUMMARY[@]}"
echo "records and logs: $OUT"
[ "${TESTS_FAILED:-0}" = 0 ]

#!/usr/bin/env bash
# Train all six shipped models at once on one GPU (they are small: six processes share it well).
#   scripts/training/train_all.sh OUTDIR [extra train.py args...]
# Iterations per architecture: ITERS_915, ITERS_955 (defaults below). Data: .pack/train_y.npz
# (scripts/training/pack_train_data.py) or TRAIN_DATA; Set5 for the report: SET5; logs: LOGDIR (default OUTDIR).
# ARCHS: which architectures (default "9-1-5 9-5-5"); SCALES: which scales (default "2 3 4").
# ARGS_915, ARGS_955: extra train.py arguments for one architecture only (e.g. ARGS_915="--batch 256").
# Long schedules in pieces: pass --time-limit SECONDS, then the same command with --resume added
# (the state files sit beside the outputs in OUTDIR).
# INIT_DIR: continue from srcnn_<arch>_x<s>.npz files there (e.g. weights/) instead of starting afresh.
# SUFFIX: name the outputs srcnn_<arch>SUFFIX_x<s>.npz (e.g. SUFFIX=-real with --degrade ...: the
# real-source models); INIT_SUFFIX: the same for the INIT_DIR files (default: none, the clean models).
# GPUS: spread the processes over these GPUs in turn (e.g. GPUS="0 1" on a two-GPU machine; default: all
# on the one PyTorch picks). Data: a crop pack works as well (TRAIN_DATA=.pack/i42_crops.npz, issue 42).
set -euo pipefail
out=${1:?usage: train_all.sh OUTDIR [train.py args]}; shift
cd "$(dirname "$0")/../.."  # the repository root (this script lives in scripts/training/)
data=${TRAIN_DATA:-.pack/train_y.npz}
set5=${SET5:-../shared/data/eval/Set5}
[ -d "$set5" ] || set5=shared/data/eval/Set5
logs=${LOGDIR:-$out}
mkdir -p "$out" "$logs"
pids=()
read -r -a gpus <<< "${GPUS:-}"
n=0
for arch in ${ARCHS:-9-1-5 9-5-5}; do
  if [ "$arch" = 9-1-5 ]; then iters=${ITERS_915:-60000} extra=${ARGS_915:-}
  else iters=${ITERS_955:-30000} extra=${ARGS_955:-}; fi
  for s in ${SCALES:-2 3 4}; do
    init=()
    [ -n "${INIT_DIR:-}" ] && init=(--init "$INIT_DIR/srcnn_${arch}${INIT_SUFFIX:-}_x${s}.npz")
    name=${arch}${SUFFIX:-}_x${s}
    gpu=()
    [ ${#gpus[@]} -gt 0 ] && gpu=(env CUDA_VISIBLE_DEVICES="${gpus[$((n % ${#gpus[@]}))]}")
    n=$((n + 1))
    "${gpu[@]}" python3 scripts/training/train.py --arch "$arch" --scale "$s" --data "$data" --iters "$iters" \
      --workers "${WORKERS:-3}" --set5 "$set5" --out "$out/srcnn_${name}.npz" \
      --log "$logs/train_${name}.log" "${init[@]}" $extra "$@" > "$logs/stdout_${name}.txt" 2>&1 &
    pids+=($!)
  done
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
cat "$logs"/train_*.log
[ $rc = 0 ] || tail -n 20 "$logs"/stdout_*.txt
exit $rc

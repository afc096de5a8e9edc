#!/usr/bin/env bash
# Next session's first GPU call (one H200 is enough): what session 30 could not run for want of device time.
# 1. The accuracy bar on the weights issue 42 shipped (cfa6c1f): SERVES_UP_TO_BITS in srgpu/engine/plans.py rests on
#    fused_accuracy.py over the earlier files; every "meets" column must read as before (fp16: yes at 8-16 bits,
#    fp16-fast: yes at 8 only) or the table changes. About 2-3 minutes.
# 2. The fused and layer-wise kernel GPU tests (random models; last run at 394553a's kernels).
# Carry .ffmpeg9 and shared (shared/data/eval/Set5).  Usage (device, repo root): bash dev/s31_call1.sh
source .ffmpeg9/setup.sh
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi -L
t0=$(date +%s)
timeout 300 python3 scripts/benchmarks/fused_accuracy.py --set5 shared/data/eval/Set5 --json $OUT/acc.json > $OUT/acc.txt 2>&1
echo "accuracy rc=$? $(( $(date +%s)-t0 )) s"; sed -n "/^serves/,\$p" $OUT/acc.txt
timeout 240 python3 -m pytest -q -m gpu -rs -p no:cacheprovider tests/kernels/test_gpu_fused.py tests/kernels/test_gpu_kernels.py \
  > $OUT/gpu_kernels.log 2>&1; echo "kernels rc=$? $(tail -1 $OUT/gpu_kernels.log)"

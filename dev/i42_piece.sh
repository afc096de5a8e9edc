#!/usr/bin/env bash
# Issue 42, training run 1: one more piece on the GPU machine, resumed from the states carried in .pack/i42r1
# (from branch i42-training-state: git archive i42-training-state training-state/i42r1 | tar -x -C .pack
# --strip-components 1), with .pack/i42_crops.npz; the states come back as $OUT/i42r1.tgz (commit them to that
# branch again). Usage (device, repo root): bash dev/i42_piece.sh SECONDS [GPUS]   e.g. 540 "0 1"
set -u
limit=${1:?seconds}; gpus=${2:-0 1}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
[ -f .pack/i42_crops.npz ] && [ -d .pack/i42r1 ] || { echo "carry .pack/i42_crops.npz and .pack/i42r1"; exit 2; }
# the states record the commit piece 1 ran at; train.py resumes only under it: the training code must be
# that commit's (checked where git can, else before the call: git diff --quiet $RUN1 -- scripts/training)
RUN1=394553a5a0f7f9975ce8bfdd81f3f0847d88c6c5
if git rev-parse HEAD > /dev/null 2>&1 && ! git diff --quiet $RUN1 -- scripts/training; then
  echo "scripts/training differs from $RUN1, which trained piece 1"; exit 2; fi
rm -rf /tmp/i42r1 && cp -r .pack/i42r1 /tmp/
SRGPU_COMMIT=$RUN1 GPUS="$gpus" SET5=shared/data/eval/Set5 \
  TRAIN_DATA=.pack/i42_crops.npz ITERS_915=160000 ITERS_955=80000 WORKERS=3 LOGDIR=/tmp/i42r1 \
  scripts/training/train_all.sh /tmp/i42r1 --lr 1e-3 --warmup 1000 --batch 256 --val-interval 1000 --seed 42 \
  --hr-scales 1.0 0.95 0.9 0.85 0.8 0.75 0.7 0.65 0.6 0.55 0.5 --time-limit "$limit" --resume
rc=$?
grep -h "stopped by\|finished\|best" /tmp/i42r1/stdout_*.txt | tail -12
tar czf $OUT/i42r1.tgz -C /tmp i42r1
exit $rc

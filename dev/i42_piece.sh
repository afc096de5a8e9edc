#!/usr/bin/env bash
# Issue 42, training run 1: one piece on the GPU machine, with .pack/i42_crops.npz carried (rebuilt here by dev/i42_pack.sh;
# scripts/training/pack_train_data.py --crops, weights/README.md "Issue 42: data"). It resumes from
# dev/training-state/i42r1 where that folder exists (it travels with the tree), else starts the run; the states
# come back as $OUT/i42r1.tgz: unpack them into dev/training-state/ and commit them on main (a branch does not
# reach the next session: run 1's first piece, kept on a branch, was lost that way).
# Usage (device, repo root): bash dev/i42_piece.sh SECONDS [GPUS]   e.g. 540 "0 1"
set -u
limit=${1:?seconds}; gpus=${2:-0 1}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
state=dev/training-state/i42r1
[ -f .pack/i42_crops.npz ] || { echo "carry .pack/i42_crops.npz"; exit 2; }
rm -rf /tmp/i42r1
if [ -d $state ]; then
  # train.py resumes only under the commit the states record: the training code must be that commit's
  run=$(cat $state/COMMIT)
  if git rev-parse HEAD > /dev/null 2>&1 && ! git diff --quiet "$run" -- scripts/training; then
    echo "scripts/training differs from $run, which trained the states"; exit 2; fi
  cp -r $state /tmp/i42r1; resume=--resume
else
  run=${SRGPU_COMMIT:-$(git rev-parse HEAD 2>/dev/null)}  # the GPU machine's copy has no .git: pass it
  [ -n "$run" ] || { echo "set SRGPU_COMMIT to the commit this tree is"; exit 2; }
  mkdir -p /tmp/i42r1; echo "$run" > /tmp/i42r1/COMMIT; resume=
fi
SRGPU_COMMIT=$run GPUS="$gpus" SET5=shared/data/eval/Set5 \
  TRAIN_DATA=.pack/i42_crops.npz ITERS_915=160000 ITERS_955=80000 WORKERS=3 LOGDIR=/tmp/i42r1 \
  scripts/training/train_all.sh /tmp/i42r1 --lr 1e-3 --warmup 1000 --batch 256 --val-interval 1000 --seed 42 \
  --hr-scales 1.0 0.95 0.9 0.85 0.8 0.75 0.7 0.65 0.6 0.55 0.5 --time-limit "$limit" $resume
rc=$?
grep -h "stopped by\|finished\|best" /tmp/i42r1/stdout_*.txt | tail -12
tar czf $OUT/i42r1.tgz -C /tmp i42r1
exit $rc

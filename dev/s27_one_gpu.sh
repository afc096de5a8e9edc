#!/usr/bin/env bash
# Issue 40 on a one-GPU host (nvidia-h200: 16 cores): does x264 want more than one chunk worker on one GPU now?
# Session 26 measured plain ffmpeg's 4 chunks at 1.32x its one process on 16 cores (CPU 74 % -> 96 % busy) while
# srgpu's default (one worker a GPU for x264, SELF_PARALLEL_ENCODERS) stayed at 73 %. The 150 s source, one run a row,
# outputs checked by the bench; about 8 minutes for veryfast, 5 for medium.
#   bash dev/s27_one_gpu.sh [veryfast|medium]     (carry .ffmpeg9 and .old; shared/data/video in the checkout)
# .old: the tree before chunks overlapped in process (git archive de4d913 srgpu weights | tar -x -C .old): the default
# row runs from it too (session 26: 53.38 fps there, the single pipeline 55.95).
source .ffmpeg9/setup.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD
preset=${1:-veryfast}
W=/tmp/w; mkdir -p $W $OUT/r
{ nvidia-smi -L; nproc; date; } > $OUT/r/host.txt
SRC=$(python3 -c "
import sys; sys.path.insert(0,'scripts/benchmarks')
from pathlib import Path; from bench_chunks import default_source
print(default_source(Path('$W'), 150))")
B="scripts/benchmarks/bench_bighost.py --work $W --source $SRC --timeline --settings libx264:$preset"
row() { local name=$1; shift; timeout 200 python3 $B "$@" --json $OUT/r/$name.json > $OUT/r/$name.out 2>&1
  echo "$name rc=$? $(grep -h '"row"' $OUT/r/$name.out | cut -c1-240)"; }
if [ "$preset" = veryfast ]; then
  row plain4 --rows plain4                       # with the warm-up (kernels built, plans tuned)
  row default --no-warmup --rows srgpuall        # today's default: one worker, chunks in process
  [ -d .old/srgpu ] && (cd .old && timeout 200 python3 ../$B --no-warmup --rows srgpuall --json $OUT/r/default_old.json \
    > $OUT/r/default_old.out 2>&1; echo "default_old rc=$? $(grep -h '"row"' $OUT/r/default_old.out | cut -c1-240)")
  row one --no-warmup --rows srgpu1
  row w2 --no-warmup --rows srgpuall-w2
  row w4 --no-warmup --rows srgpuall-w4
  row w4t0 --no-warmup --rows srgpuall-w4 --srgpu-arg=--encoder-arg=-threads --srgpu-arg=--encoder-arg=0
else
  row plain4 --rows plain4
  row default --no-warmup --rows srgpuall
  row w2 --no-warmup --rows srgpuall-w2
  row w4 --no-warmup --rows srgpuall-w4
fi
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r

#!/usr/bin/env bash
# Issue 40 on a one-GPU host (nvidia-h200: 16 cores): the measurements that decide x264's default worker count.
# Session 27 (150 s, veryfast): 4 workers on the one GPU with x264 on 24 threads each (x264's own count on 16 cores)
# ran at 62.56 fps against the default's 47.5 (one worker, 3 chunks in process) and the single pipeline's 51.58;
# plain4 66.2. Before the default changes, the rows where more workers could lose:
#   bash dev/s28_one_gpu.sh a   # ultrafast 150 s; veryfast 30 s (a short video: the single pipeline today);
#                               # a folder of 8 clips of 20 s (in process today)               about 6 minutes
#   bash dev/s28_one_gpu.sh b   # x264 medium (srgpu's default preset) 60 s                     about 6 minutes
# Carry .ffmpeg9; shared/data/video in the checkout. One run a row, outputs checked by the bench.
source .ffmpeg9/setup.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD
part=${1:-a}
W=/tmp/w; mkdir -p $W $OUT/r
{ nvidia-smi -L; nproc; date; } > $OUT/r/host.txt
src() { [ -f $W/bbb_1080p24_$1s.mkv ] && { echo $W/bbb_1080p24_$1s.mkv; return; }; python3 -c "
import sys; sys.path.insert(0,'scripts/benchmarks')
from pathlib import Path; from bench_chunks import default_source
print(default_source(Path('$W'), $1))"; }
T24="--srgpu-arg=--encoder-arg=-threads --srgpu-arg=--encoder-arg=24"
row() { local name=$1 secs=$2 preset=$3; shift 3
  timeout 400 python3 scripts/benchmarks/bench_bighost.py --work $W --source $(src $secs) --settings libx264:$preset \
    "$@" --json $OUT/r/$name.json > $OUT/r/$name.out 2>&1
  echo "$name rc=$? $(grep -h '"row"' $OUT/r/$name.out | cut -c1-200)"; }
if [ "$part" = a ]; then
  row uf_plain 150 ultrafast --rows plain plain4                 # with the warm-up (kernels built, plans tuned)
  row uf_default 150 ultrafast --no-warmup --rows srgpuall
  row uf_w4t24 150 ultrafast --no-warmup --rows srgpuall-w4 $T24
  row vf30 30 veryfast --no-warmup --rows plain plain4 srgpuall
  row vf30_w4t24 30 veryfast --no-warmup --rows srgpuall-w4 $T24
  row folder 150 veryfast --no-warmup --folder-files 8 --folder-seconds 20 --rows folder-plain4 folder-srgpu
  row folder_w4t24 150 veryfast --no-warmup --folder-files 8 --folder-seconds 20 --rows folder-srgpu-w4 $T24
else
  row md_plain 60 medium --rows plain plain4
  row md_default 60 medium --no-warmup --rows srgpuall srgpuall-w2
  row md_w4t24 60 medium --no-warmup --rows srgpuall-w4 $T24
fi
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r

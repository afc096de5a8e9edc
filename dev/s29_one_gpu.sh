#!/usr/bin/env bash
# Issue 40 on a one-GPU host (nvidia-h200: 16 cores), after 47cfe1f (libx264's default workers follow the cores):
# the new default with no flags, against plain ffmpeg in the same call. Session 28 measured the same settings given
# as flags (--workers 4 --encoder-arg=-threads --encoder-arg=24); this checks that the defaults pick them by
# themselves (the run's one line says "on 4 workers on cuda:0 (x4), libx264 on 24 threads each") and measures the
# one-pipeline target (srgpu1 against plain at ultrafast). About 7 minutes.
#   bash dev/s29_one_gpu.sh      # carry .ffmpeg9 and shared (shared/data/video)
source .ffmpeg9/setup.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD
W=/tmp/w; mkdir -p $W $OUT/r
{ nvidia-smi -L; nproc; date; } > $OUT/r/host.txt
src() { [ -f $W/bbb_1080p24_$1s.mkv ] && { echo $W/bbb_1080p24_$1s.mkv; return; }; python3 -c "
import sys; sys.path.insert(0,'scripts/benchmarks')
from pathlib import Path; from bench_chunks import default_source
print(default_source(Path('$W'), $1))"; }
row() { local name=$1 secs=$2 preset=$3; shift 3
  timeout 400 python3 scripts/benchmarks/bench_bighost.py --work $W --source $(src $secs) --settings libx264:$preset \
    "$@" --json $OUT/r/$name.json > $OUT/r/$name.out 2>&1
  echo "$name rc=$? $(grep -h '"row"' $OUT/r/$name.out | cut -c1-200)"; grep -h "chunks,\|files, one per task" $OUT/r/$name.log; }
row vf150 150 veryfast --rows plain4 srgpuall                      # with the warm-up (kernels built, plans tuned)
row uf150 150 ultrafast --no-warmup --rows plain srgpu1
row md60 60 medium --no-warmup --rows plain4 srgpuall
row folder 150 veryfast --no-warmup --folder-files 8 --folder-seconds 20 --rows folder-plain4 folder-srgpu
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r

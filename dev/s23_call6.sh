#!/usr/bin/env bash
# Session 23, sixth device call (nvidia-h200-x2): after the chunk overlap, how long chunks should be
# (the cost model's per-chunk overhead), and x264 medium against plain ffmpeg's chunks.
source .ffmpeg9/setup.sh
W=/tmp/w; mkdir -p $W $OUT/r
{ nvidia-smi -L; nproc; date; } > $OUT/r/host.txt
mk() { python3 -c "
import sys; sys.path.insert(0,'scripts/benchmarks')
from pathlib import Path; from bench_chunks import default_source
print(default_source(Path('$W'), $1))"; }
SRC=$(mk 60); SRC30=$(mk 30)
B="python3 scripts/benchmarks/bench_bighost.py --work $W --timeline"
timeout 120 $B --source $SRC --rows plain2 srgpu2 --json $OUT/r/v_default.json > $OUT/r/v_default.out 2>&1
for cs in 6 4; do
  timeout 60 $B --source $SRC --no-warmup --rows srgpu2 --srgpu-arg=--chunk-seconds --srgpu-arg=$cs \
    --json $OUT/r/v_cs$cs.json > $OUT/r/v_cs$cs.out 2>&1
done
timeout 200 $B --source $SRC30 --no-warmup --settings libx264:medium --rows plain2 plain4 srgpu2 \
  --json $OUT/r/medium30.json > $OUT/r/medium30.out 2>&1
grep -h '"row"' $OUT/r/*.out | cut -c1-260
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r

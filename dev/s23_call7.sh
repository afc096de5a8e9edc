#!/usr/bin/env bash
# Session 23, seventh device call (nvidia-h200-x2): the chunk overlap before and after on one host, 150 s
# source, x264 veryfast ("before": srgpu at the commit before the overlap, carried as .old/).
source .ffmpeg9/setup.sh
W=/tmp/w; mkdir -p $W $OUT/r
{ nvidia-smi -L; nproc; date; } > $OUT/r/host.txt
SRC=$(python3 -c "
import sys; sys.path.insert(0,'scripts/benchmarks')
from pathlib import Path; from bench_chunks import default_source
print(default_source(Path('$W'), 150))")
B="scripts/benchmarks/bench_bighost.py --work $W --timeline --source $SRC"
timeout 200 python3 $B --rows plain2 srgpu2 --json $OUT/r/after.json > $OUT/r/after.out 2>&1
(cd .old && timeout 100 python3 ../$B --no-warmup --rows srgpu2 --json $OUT/r/before.json > $OUT/r/before.out 2>&1)
grep -h '"row"' $OUT/r/*.out | cut -c1-260
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r

#!/usr/bin/env bash
# Session 23, fourth device call (nvidia-h200-x2): issue 40's rows after the chunk overlap and the
# one-GPU workers, and where one pipeline's GPU memory goes.
source .ffmpeg9/setup.sh
W=/tmp/w; mkdir -p $W $OUT/r
{ nvidia-smi -L; nproc; date; } > $OUT/r/host.txt
python3 -c "
import sys; sys.path.insert(0,'scripts/benchmarks')
from pathlib import Path; from bench_chunks import default_source
print(default_source(Path('$W'), 60))" > $W/src.txt
SRC=$(cat $W/src.txt)
timeout 150 python3 scripts/benchmarks/bench_gpu_memory.py --source $SRC --gpu 1 --json $OUT/r/memory.json > $OUT/r/memory.log 2>&1
echo "memory rc=$?"; tail -c 1800 $OUT/r/memory.log
timeout 280 python3 scripts/benchmarks/bench_bighost.py --source $SRC --rows plain2 srgpu2 srgpu2-w4 srgpu1 \
  --timeline --work $W --json $OUT/r/bighost.json > $OUT/r/bighost.out 2>&1
echo "bighost rc=$?"
grep -h '"row"' $OUT/r/bighost.out | cut -c1-300
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r

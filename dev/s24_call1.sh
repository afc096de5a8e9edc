#!/usr/bin/env bash
# Session 24, first device call (nvidia-h200-x4): issue 40's x264 veryfast rows on 4 GPUs, 150 s source
# (plain, plain2/4/8, srgpu on 1, 2 and 4 GPUs with timelines), then the one-pipeline rows at ultrafast.
source .ffmpeg9/setup.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD
W=/tmp/w; mkdir -p $W $OUT/r
{ nvidia-smi -L; nproc; free -g | head -2; date; git log --oneline -1 2>/dev/null; } > $OUT/r/host.txt
t0=$SECONDS
SRC=$(python3 -c "
import sys; sys.path.insert(0,'scripts/benchmarks')
from pathlib import Path; from bench_chunks import default_source
print(default_source(Path('$W'), 150))")
echo "source $SRC made in $((SECONDS-t0)) s" | tee -a $OUT/r/host.txt
B="scripts/benchmarks/bench_bighost.py --work $W --source $SRC"
timeout 400 python3 $B --timeline --rows plain plain2 plain4 plain8 srgpu1 srgpu2 srgpuall --json $OUT/r/veryfast.json > $OUT/r/veryfast.out 2>&1
echo "veryfast rc=$?"
timeout 120 python3 $B --no-warmup --settings libx264:ultrafast --rows plain srgpu1 --json $OUT/r/ultrafast.json > $OUT/r/ultrafast.out 2>&1
echo "ultrafast rc=$?"
grep -h '"row"' $OUT/r/*.out | cut -c1-300
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r

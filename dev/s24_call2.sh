#!/usr/bin/env bash
# Session 24, second device call (nvidia-h200-x4): issue 40's x264 medium and x265 medium rows, 150 s source.
source .ffmpeg9/setup.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD
W=/tmp/w; mkdir -p $W $OUT/r
{ nvidia-smi -L; nproc; date; } > $OUT/r/host.txt
SRC=$W/bbb_1080p24_150s.mkv
[ -f $SRC ] || SRC=$(python3 -c "
import sys; sys.path.insert(0,'scripts/benchmarks')
from pathlib import Path; from bench_chunks import default_source
print(default_source(Path('$W'), 150))")
B="scripts/benchmarks/bench_bighost.py --work $W --source $SRC --timeline"
timeout 230 python3 $B --settings libx264:medium --rows plain8 srgpuall --json $OUT/r/medium.json > $OUT/r/medium.out 2>&1
echo "medium rc=$?"
timeout 340 python3 $B --no-warmup --settings libx265:medium --rows plain8 srgpuall --json $OUT/r/x265.json > $OUT/r/x265.out 2>&1
echo "x265 rc=$?"
grep -h '"row"' $OUT/r/*.out | cut -c1-300
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r

#!/usr/bin/env bash
# Session 26, one H200 and 16 cores (no multi-GPU kind lent): issue 40's rows this host can take, x264 veryfast,
# the 150 s source: plain ffmpeg 1 and 4 processes, srgpu's single pipeline, srgpu's defaults (4 workers on the
# one GPU) from this tree and from the tree before session 25's end-of-run changes (.old = baccd1b~1); then
# ultrafast plain and single pipeline; then the fixed costs of a chunked run of a 60 s source, traced.
# Carry .ffmpeg9 and .old.
source .ffmpeg9/setup.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD
W=/tmp/w; mkdir -p $W $OUT/r
{ nvidia-smi -L; nproc; date; } > $OUT/r/host.txt
src() { python3 -c "
import sys; sys.path.insert(0,'scripts/benchmarks')
from pathlib import Path; from bench_chunks import default_source
print(default_source(Path('$W'), $1))"; }
t0=$(date +%s); SRC=$(src 150); echo "150 s source $(( $(date +%s)-t0 )) s"
B="scripts/benchmarks/bench_bighost.py --work $W --source $SRC --timeline"
row() { local name=$1; shift; timeout 150 python3 $B --no-warmup "$@" --json $OUT/r/$name.json > $OUT/r/$name.out 2>&1
  echo "$name rc=$? $(grep -h '"row"' $OUT/r/$name.out | cut -c1-260)"; }
timeout 150 python3 $B --rows plain --json $OUT/r/plain.json > $OUT/r/plain.out 2>&1; echo "plain (and warm-up) rc=$? $(grep -h '"row"' $OUT/r/plain.out | cut -c1-260)"
row default --rows srgpuall
(cd .old && rm -f weights && ln -s ../weights weights && timeout 150 python3 ../$B --no-warmup --rows srgpuall \
  --json $OUT/r/default_old.json > $OUT/r/default_old.out 2>&1; echo "default_old rc=$? $(grep -h '"row"' $OUT/r/default_old.out | cut -c1-260)")
row one --rows srgpu1
row plain4 --rows plain4
row ultra --settings libx264:ultrafast --rows plain srgpu1
t0=$(date +%s); SRC60=$(src 60); echo "60 s source $(( $(date +%s)-t0 )) s"
traced() { local name=$1; shift
  SRGPU_DEV_TRACE=$W/tr_$name PYTHONPATH=dev/trace_site:/tmp/site:$PWD timeout 100 python3 -m srgpu upscale $SRC60 \
    -o $W/$name.mkv --overwrite --codec libx264 --preset veryfast --crf 18 "$@" > $OUT/r/$name.log 2>&1
  echo "$name rc=$? $(tail -1 $OUT/r/$name.log)"; python3 dev/trace_report.py $W/tr_$name > $OUT/r/trace_$name.txt; rm -f $W/$name.mkv; }
traced tr60_all --gpus all
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r

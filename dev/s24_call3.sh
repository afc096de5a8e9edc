#!/usr/bin/env bash
# Session 24, third device call (run on nvidia-h200-x2: x4 withdrawn): where srgpu's start and single pipeline lose time
# (dev/trace_site timelines of srgpuall and srgpu1 at veryfast, srgpu1 at ultrafast, 150 s source), two
# srgpuall variants (x264's own thread count; 2 workers a GPU), and what SR frames cost each encoder.
source .ffmpeg9/setup.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD
W=/tmp/w; mkdir -p $W $OUT/r
{ nvidia-smi -L; nproc; date; } > $OUT/r/host.txt
SRC=$(python3 -c "
import sys; sys.path.insert(0,'scripts/benchmarks')
from pathlib import Path; from bench_chunks import default_source
print(default_source(Path('$W'), 150))")
ffmpeg -v error -y -i $SRC -t 2 -c copy $W/warm.mkv && python3 -m srgpu upscale $W/warm.mkv -o $W/warm-out.mkv --overwrite --gpus 0 --chunk-seconds 0 > /dev/null 2>&1
traced() { local name=$1; shift
  local t0=$(date +%s.%N)
  SRGPU_DEV_TRACE=$W/tr_$name PYTHONPATH=dev/trace_site:/tmp/site:$PWD timeout 100 python3 -m srgpu upscale $SRC -o $W/$name.mkv --overwrite --codec libx264 "$@" > $OUT/r/$name.log 2>&1
  echo "$name rc=$? wall $(python3 -c "print(round($(date +%s.%N)-$t0,2))") s $(tail -1 $OUT/r/$name.log)" | tee -a $OUT/r/traced.txt
  python3 dev/trace_report.py $W/tr_$name > $OUT/r/trace_$name.txt; rm -f $W/$name.mkv; }
traced all_veryfast --gpus all --preset veryfast --crf 18
traced one_veryfast --gpus 0 --chunk-seconds 0 --preset veryfast --crf 18
traced one_ultrafast --gpus 0 --chunk-seconds 0 --preset ultrafast --crf 18
B="scripts/benchmarks/bench_bighost.py --work $W --source $SRC --no-warmup"
timeout 70 python3 $B --rows srgpuall-w4 --json $OUT/r/w8.json > $OUT/r/w8.out 2>&1; echo "w8 rc=$?"
timeout 70 python3 $B --rows srgpuall --srgpu-arg=--encoder-arg=-threads --srgpu-arg=--encoder-arg=0 --json $OUT/r/threads0.json > $OUT/r/threads0.out 2>&1; echo "threads0 rc=$?"
timeout 200 python3 scripts/benchmarks/bench_encoder_cost.py --source $SRC --seconds 10 --json $OUT/r/encoder_cost.json > $OUT/r/encoder_cost.out 2>&1; echo "encoder cost rc=$?"
grep -h '"row"' $OUT/r/w8.out $OUT/r/threads0.out | cut -c1-250
tail -5 $OUT/r/encoder_cost.out
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r

#!/usr/bin/env bash
# Session 24, fourth device call (nvidia-h200-x2): per-thread CPU and start-up timelines (dev/trace_site) of
# srgpu1 at ultrafast and veryfast and of --gpus all at veryfast, warm, with plain ffmpeg's single process
# beside them; what SR frames cost each encoder (bench_encoder_cost, raw frames in).
source .ffmpeg9/setup.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD
FF=$(python3 -c "from srgpu.video.ffmpeg import ffmpeg_exe; print(ffmpeg_exe())")
W=/tmp/w; mkdir -p $W $OUT/r
{ nvidia-smi -L; nproc; date; } > $OUT/r/host.txt
SRC=$(python3 -c "
import sys; sys.path.insert(0,'scripts/benchmarks')
from pathlib import Path; from bench_chunks import default_source
print(default_source(Path('$W'), 150))")
$FF -v error -y -i $SRC -t 2 -c copy $W/warm.mkv && python3 -m srgpu upscale $W/warm.mkv -o $W/warm-out.mkv --overwrite --gpus 0 --chunk-seconds 0 > $OUT/r/warm.log 2>&1; echo "warm rc=$?"
traced() { local name=$1; shift
  local t0=$(date +%s.%N)
  SRGPU_DEV_TRACE=$W/tr_$name PYTHONPATH=dev/trace_site:/tmp/site:$PWD timeout 100 python3 -m srgpu upscale $SRC -o $W/$name.mkv --overwrite --codec libx264 "$@" > $OUT/r/$name.log 2>&1
  echo "$name rc=$? wall $(python3 -c "print(round($(date +%s.%N)-$t0,2))") s $(tail -1 $OUT/r/$name.log)" | tee -a $OUT/r/traced.txt
  python3 dev/trace_report.py $W/tr_$name > $OUT/r/trace_$name.txt; rm -f $W/$name.mkv; }
traced one_ultrafast --gpus 0 --chunk-seconds 0 --preset ultrafast --crf 18
traced one_veryfast --gpus 0 --chunk-seconds 0 --preset veryfast --crf 18
traced all_veryfast --gpus all --preset veryfast --crf 18
timeout 90 python3 scripts/benchmarks/bench_bighost.py --work $W --source $SRC --no-warmup --settings libx264:ultrafast libx264:veryfast --rows plain --json $OUT/r/plain.json > $OUT/r/plain.out 2>&1; echo "plain rc=$?"
timeout 200 python3 scripts/benchmarks/bench_encoder_cost.py --source $SRC --seconds 10 --json $OUT/r/encoder_cost.json > $OUT/r/encoder_cost.out 2>&1; echo "encoder cost rc=$?"
grep -h '"row"' $OUT/r/plain.out | cut -c1-200
grep -A12 "CPU seconds by thread" $OUT/r/trace_one_ultrafast.txt
grep '"srgpu_over' $OUT/r/encoder_cost.json
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r

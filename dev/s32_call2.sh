#!/usr/bin/env bash
# Session 32, one H200 (16 cores): what decides a chunked run's start (session 31: first frames 3.6-3.8 s in; the
# workers' first decoders, NVDEC, took 0.8-1.0 s from their start to their first frame, the run's critical path).
# 1. dev/decoder_first_frame.py: a chunk's decoder start to its first frame, the CPU's against NVDEC, alone and 4 at once.
# 2. Traced default runs (dev/trace_site), 60 s source, x264 veryfast: NVDEC chunks (default) and --hwdec no.
# 3. bench_bighost.py, 60 s, x264 veryfast: plain4, srgpuall, srgpuall --hwdec no (every output checked).
#   bash dev/s32_call2.sh      # carry .ffmpeg9; shared/data/video travels with the tree
source .ffmpeg9/setup.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD
W=/tmp/w; mkdir -p $W $OUT/r
{ nvidia-smi -L; nproc; lscpu | grep -i "model name"; date; } > $OUT/r/host.txt
SRC=$(python3 -c "
import sys; sys.path.insert(0,'scripts/benchmarks')
from pathlib import Path; from bench_chunks import default_source
print(default_source(Path('$W'), 60))")
t0=$(date +%s)
timeout 120 python3 dev/decoder_first_frame.py $SRC > $OUT/r/first_frame.json 2>&1
echo "first_frame rc=$? $(( $(date +%s)-t0 )) s"; cut -c1-600 $OUT/r/first_frame.json
bench() { local name=$1; shift
  timeout 200 python3 scripts/benchmarks/bench_bighost.py --work $W --source $SRC --settings libx264:veryfast \
    "$@" --json $OUT/r/$name.json > $OUT/r/$name.out 2>&1
  echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  grep -h '"row"' $OUT/r/$name.out | python3 -c "
import sys, json
for l in sys.stdin:
    r = json.loads(l); print(r['row'], r.get('fps'), r.get('wall_s'), r.get('cpu_busy_steady'), r.get('cpu_busy_mean'), r.get('cpu_s_per_frame'))"
  grep -h "chunks,\|wrote" $OUT/r/$name.log; }
bench vf60 --rows plain4 srgpuall              # with the warm-up (kernels built, plans tuned)
bench vf60cpu --no-warmup --rows srgpuall --srgpu-arg=--hwdec --srgpu-arg=no
traced() { local name=$1; shift; local TR=$OUT/r/trace_$name; mkdir -p $TR
  SRGPU_DEV_TRACE=$TR PYTHONPATH=$PWD/dev/trace_site:/tmp/site:$PWD timeout 120 python3 -m srgpu \
    upscale $SRC -o $W/tr60_$name.mkv --overwrite --codec libx264 --preset veryfast --crf 18 "$@" > $OUT/r/trace_$name.log 2>&1
  echo "traced $name rc=$? $(( $(date +%s)-t0 )) s $(tail -1 $OUT/r/trace_$name.log)"
  python3 dev/trace_report.py $TR --min 0.02 > $OUT/r/trace_$name.txt 2>&1; rm -rf $TR
  grep -E "python -c|Reader.frames.first|LocalPool._run|_upscale_chunked|frame_processor" $OUT/r/trace_$name.txt | head -24; }
traced nvdec
traced cpu --hwdec no
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r

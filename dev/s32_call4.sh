#!/usr/bin/env bash
# Session 32, one H200 (16 cores), call 4 (call 3's rows, alternated, every tree's .pyc compiled first): an engine's first chunk starting on the CPU's decoder and handing over to NVDEC
# (the working tree) against NVDEC from its first frame (.base, HEAD before the change), then the GPU tests of the
# chunked, NVDEC and worker paths. .base:
#   rm -rf .base && mkdir .base && git archive HEAD srgpu scripts dev/trace_site dev/trace_report.py | tar -x -C .base
#   bash dev/s32_call4.sh      # carry .ffmpeg9 and .base; shared/data/video travels with the tree
# 1. A warm-up run of each tree (kernels, plans, .pyc), then traced default runs (dev/trace_site), 60 s source,
#    x264 veryfast: before, after.
# 2. bench_bighost.py, 60 s, x264 veryfast, every output checked: plain4, then srgpuall before, after, before, after.
source .ffmpeg9/setup.sh
ROOT=$PWD; ln -sfn $ROOT/weights .base/weights
export PYTHONUNBUFFERED=1
W=/tmp/w; mkdir -p $W $OUT/r
{ nvidia-smi -L; nproc; lscpu | grep -i "model name"; date; } > $OUT/r/host.txt
SRC=$(PYTHONPATH=/tmp/site:$ROOT python3 -c "
import sys; sys.path.insert(0,'scripts/benchmarks')
from pathlib import Path; from bench_chunks import default_source
print(default_source(Path('$W'), 60))")
t0=$(date +%s)
traced() { local name=$1 tree=$2; local TR=$OUT/r/trace_$name; mkdir -p $TR
  (cd $tree && SRGPU_DEV_TRACE=$TR PYTHONPATH=$ROOT/dev/trace_site:/tmp/site:$tree timeout 120 python3 -m srgpu \
    upscale $SRC -o $W/tr60_$name.mkv --overwrite --codec libx264 --preset veryfast --crf 18 > $OUT/r/trace_$name.log 2>&1)
  echo "traced $name rc=$? $(( $(date +%s)-t0 )) s $(tail -1 $OUT/r/trace_$name.log)"
  python3 $ROOT/dev/trace_report.py $TR --min 0.02 > $OUT/r/trace_$name.txt 2>&1; rm -rf $TR
  grep -E "python -c|Reader.frames.first|_upscale_chunked|frame_processor" $OUT/r/trace_$name.txt | head -14; }
bench() { local name=$1 tree=$2; shift 2
  (cd $tree && PYTHONPATH=/tmp/site:$tree timeout 200 python3 scripts/benchmarks/bench_bighost.py --work $W --source $SRC \
    --settings libx264:veryfast "$@" --json $OUT/r/$name.json > $OUT/r/$name.out 2>&1)
  echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  grep -h '"row"' $OUT/r/$name.out | python3 -c "
import sys, json
for l in sys.stdin:
    r = json.loads(l); print(r['row'], r.get('fps'), r.get('wall_s'), r.get('frames_ok'), r.get('cpu_busy_steady'), r.get('cpu_busy_mean'), r.get('cpu_s_per_frame'))"
  grep -h "chunks,\|wrote" $OUT/r/$name.log | grep -v warm-out; }
python3 -m compileall -q srgpu .base/srgpu dev/trace_site
for t in $ROOT $ROOT/.base; do (cd $t && PYTHONPATH=/tmp/site:$t timeout 100 python3 -m srgpu upscale $SRC -o $W/warm.mkv \
  --overwrite --codec libx264 --preset ultrafast > /dev/null 2>&1; echo "warm $t rc=$?"); done
traced before $ROOT/.base
traced after $ROOT
bench vf60p $ROOT --no-warmup --rows plain4
bench vf60b1 $ROOT/.base --no-warmup --rows srgpuall
bench vf60a1 $ROOT --no-warmup --rows srgpuall
bench vf60b2 $ROOT/.base --no-warmup --rows srgpuall
bench vf60a2 $ROOT --no-warmup --rows srgpuall
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r

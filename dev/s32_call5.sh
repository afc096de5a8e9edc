#!/usr/bin/env bash
# Session 32, one H200 (16 cores), call 5, not run (no device time left): NVDEC's check on each engine's chunks
# (cfa1b42 + 4d02260, taken back in 0b8c29a and 90bfd9f: revert those two to test it; the working tree, no trial in the
# coordinator) against .base (3 commits back: NVDEC checked by the coordinator, every chunk decoded on NVDEC from its
# first frame). GPU tests first (real NVDEC), then a traced run of the tree, then a bench row if time allows
# (cut to fit the 325 s of device time left after a refused start).
#   bash dev/s32_call5.sh      # carry .ffmpeg9 and .base; shared/data/video travels with the tree
source .ffmpeg9/setup.sh
ROOT=$PWD; ln -sfn $ROOT/weights .base/weights
export PYTHONUNBUFFERED=1
W=/tmp/w; mkdir -p $W $OUT/r
{ nvidia-smi -L; nproc; lscpu | grep -i "model name"; date; } > $OUT/r/host.txt
t0=$(date +%s)
PYTHONPATH=/tmp/site:$ROOT timeout 110 python3 -m pytest -q -m gpu -rs -p no:cacheprovider tests/video/test_chunks_gpu.py \
  tests/video/test_handover.py tests/video/test_hwdecode.py > $OUT/r/gpu_tests.log 2>&1
echo "gpu tests rc=$? $(( $(date +%s)-t0 )) s: $(tail -1 $OUT/r/gpu_tests.log)"; grep -E "FAILED|Error" $OUT/r/gpu_tests.log | head -10
SRC=$(PYTHONPATH=/tmp/site:$ROOT python3 -c "
import sys; sys.path.insert(0,'scripts/benchmarks')
from pathlib import Path; from bench_chunks import default_source
print(default_source(Path('$W'), 60))")
python3 -m compileall -q srgpu .base/srgpu dev/trace_site
for t in $ROOT; do (cd $t && PYTHONPATH=/tmp/site:$t timeout 60 python3 -m srgpu upscale $SRC -o $W/warm.mkv \
  --overwrite --codec libx264 --preset ultrafast > /dev/null 2>&1; echo "warm $t rc=$? $(( $(date +%s)-t0 )) s"); done
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
traced after $ROOT
[ $(( $(date +%s)-t0 )) -lt 140 ] && bench vf60a1 $ROOT --no-warmup --rows srgpuall
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r

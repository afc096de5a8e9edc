# Sourced by dev/sNN_call*.sh on the GPU machine (carry .ffmpeg9, and .base where a script compares
# against it: rm -rf .base && mkdir .base && git archive REV srgpu scripts | tar -x -C .base).
# Gives $ROOT, $W (outputs under /tmp), $SRC (the 60 s 1080p source built from shared/data/video),
# $t0, and: traced NAME TREE (a default run traced by dev/trace_site, reported by dev/trace_report.py),
# bench NAME TREE ARGS... (scripts/benchmarks/bench_bighost.py in that tree, x264 veryfast unless
# ARGS say otherwise; its JSON rows printed one line each), warm TREE... (a run of each tree: kernels,
# plans, .pyc).
source .ffmpeg9/setup.sh
ROOT=$PWD; [ -d .base ] && ln -sfn $ROOT/weights .base/weights
export PYTHONUNBUFFERED=1
W=/tmp/w; mkdir -p $W $OUT/r
{ nvidia-smi -L; nproc; lscpu | grep -i "model name"; date -u; } > $OUT/r/host.txt
t0=$(date +%s)
source_of() { PYTHONPATH=/tmp/site:$ROOT python3 -c "
import sys; sys.path.insert(0,'scripts/benchmarks')
from pathlib import Path; from bench_chunks import default_source
print(default_source(Path('$W'), $1))"; }
SRC=$(source_of 60)
warm() { python3 -m compileall -q "$@" 2>/dev/null; for t in "$@"; do (cd $t && PYTHONPATH=/tmp/site:$t timeout 100 \
  python3 -m srgpu upscale $SRC -o $W/warm.mkv --overwrite --codec libx264 --preset ultrafast > /dev/null 2>&1
  echo "warm $t rc=$? $(( $(date +%s)-t0 )) s"); done; }
traced() { local name=$1 tree=$2; local TR=$OUT/r/trace_$name; mkdir -p $TR
  (cd $tree && SRGPU_DEV_TRACE=$TR PYTHONPATH=$ROOT/dev/trace_site:/tmp/site:$tree timeout 120 python3 -m srgpu \
    upscale $SRC -o $W/tr60_$name.mkv --overwrite --codec libx264 --preset veryfast --crf 18 > $OUT/r/trace_$name.log 2>&1)
  echo "traced $name rc=$? $(( $(date +%s)-t0 )) s $(tail -1 $OUT/r/trace_$name.log)"
  python3 $ROOT/dev/trace_report.py $TR --min 0.02 > $OUT/r/trace_$name.txt 2>&1; rm -rf $TR
  grep -E "python -c|Reader.frames.first|_upscale_chunked|frame_processor" $OUT/r/trace_$name.txt | head -14; }
bench() { local name=$1 tree=$2; shift 2
  (cd $tree && PYTHONPATH=/tmp/site:$tree timeout ${BENCH_TIMEOUT:-200} python3 scripts/benchmarks/bench_bighost.py --work $W --source $SRC \
    --settings libx264:veryfast "$@" --json $OUT/r/$name.json > $OUT/r/$name.out 2>&1)
  echo "$name rc=$? $(( $(date +%s)-t0 )) s"
  grep -h '^{.*"row"' $OUT/r/$name.out | python3 -c "
import sys, json
for l in sys.stdin:
    r = json.loads(l); print(r['row'], r.get('fps'), r.get('wall_s'), r.get('frames_ok'), r.get('cpu_busy_steady'), r.get('cpu_busy_mean'), r.get('cpu_s_per_frame'))"
  grep -h "chunks,\|wrote" $OUT/r/$name.log 2>/dev/null | grep -v warm-out; }
pack() { tar -czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r; }

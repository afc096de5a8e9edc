#!/usr/bin/env bash
# Session 31, one H200 (16 cores): why srgpu's x264 takes more CPU a frame than plain4's whole pipeline at medium
# (s29_one_gpu.sh on this kind: 0.482 CPU s a frame in srgpu's encoders against 0.399 for plain4's decode, scale and
# encode), and the fixed costs of a chunked 60 s run. Runs the tree of HEAD archived into .base (so the working tree
# may change while the machine starts):
#   rm -rf .base && mkdir .base && git archive HEAD srgpu scripts dev/trace_site dev/trace_report.py | tar -x -C .base
#   bash dev/s31_call2.sh      # carry .ffmpeg9 and .base; shared/ (shared/data/video is enough) travels with the tree
# Session 31 ran it with .base from 3088d73 and the working tree at 6f8a537 (NVDEC's trial beside the scans, taken
# back in a49447c); with .base from HEAD now, the two traced runs are of the same code.
# 1. From raw files (bench_encoder_cost.py), the first 15 s of the 60 s source: x264 medium and veryfast on srgpu's
#    frames against ffmpeg's bicubic ones, one ffmpeg each.
# 2. x264 medium on the 60 s source (plain4 is s29_one_gpu.sh's row): srgpu's default (8 chunks on 4 workers of 24 threads); the same with
#    --chunk-seconds 15 (4 chunks, one a worker: no chunk overlap).
# 3. A traced default run at veryfast (dev/trace_site): the start and the end of a chunked 60 s run, from .base
#    (before) and from the working tree (after: NVDEC's trial beside the scans).
source .ffmpeg9/setup.sh
ROOT=$PWD; cd .base; ln -sfn $ROOT/weights weights
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD
W=/tmp/w; mkdir -p $W $OUT/r
{ nvidia-smi -L; nproc; lscpu | grep -i "model name"; date; } > $OUT/r/host.txt
SRC=$(python3 -c "
import sys; sys.path.insert(0,'scripts/benchmarks')
from pathlib import Path; from bench_chunks import default_source
print(default_source(Path('$W'), 60))")
echo "source $SRC"
t0=$(date +%s)
timeout 200 python3 scripts/benchmarks/bench_encoder_cost.py --source $SRC --seconds 15 \
  --settings libx264:medium libx264:veryfast --json $OUT/r/enc_cost.json > $OUT/r/enc_cost.out 2>&1
echo "enc_cost rc=$? $(( $(date +%s)-t0 )) s"; grep '"row"\|srgpu_over' $OUT/r/enc_cost.out | cut -c1-400 | head -4
row() { local name=$1; shift
  timeout 200 python3 scripts/benchmarks/bench_bighost.py --work $W --source $SRC --settings libx264:medium \
    "$@" --json $OUT/r/$name.json > $OUT/r/$name.out 2>&1
  echo "$name rc=$? $(( $(date +%s)-t0 )) s"; grep -h '"row"' $OUT/r/$name.out | cut -c1-170; grep -h "chunks,\|files, one per task" $OUT/r/$name.log; }
row md60 --rows srgpuall
row md60c15 --no-warmup --rows srgpuall --srgpu-arg=--chunk-seconds --srgpu-arg=15
traced() { local name=$1 tree=$2; local TR=$OUT/r/trace_$name; mkdir -p $TR
  (cd $tree && SRGPU_DEV_TRACE=$TR PYTHONPATH=$ROOT/.base/dev/trace_site:/tmp/site:$tree timeout 120 python3 -m srgpu \
    upscale $SRC -o $W/tr60_$name.mkv --overwrite --codec libx264 --preset veryfast --crf 18 > $OUT/r/trace_$name.log 2>&1)
  echo "traced $name rc=$? $(( $(date +%s)-t0 )) s $(tail -1 $OUT/r/trace_$name.log)"
  python3 $ROOT/.base/dev/trace_report.py $TR --min 0.02 > $OUT/r/trace_$name.txt 2>&1; rm -rf $TR; }
traced before $ROOT/.base
traced after $ROOT
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r

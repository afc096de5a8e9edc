#!/usr/bin/env bash
# Ready for the next time nvidia-h200-x4 is lent (issue 40): on one host, x264 veryfast 150 s, srgpu --gpus all
# with its defaults beside the variants the session 24 figures point to (2 workers a GPU, shorter chunks for an
# even end, x264's thread count), a traced default run (where the 5.3 s before the first encoder go on 4 GPUs)
# and a traced single pipeline; then x265 medium with 16 (default) and 8 workers. Outputs checked by the bench.
#   bash dev/s25_x4.sh [x265|folder]    (the x265 rows, or the folder of 16 clips, only with the argument: about
#   4 and 3 minutes more)
# A/B: with the branch under test in the work tree and the tree before it carried as .old/ (session 25: git archive baccd1b~1 srgpu |
# tar -x -C .old), the default row also runs from .old/ (python -m srgpu there imports .old's srgpu first).
source .ffmpeg9/setup.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD
FF=$(python3 -c "from srgpu.video.ffmpeg import ffmpeg_exe; print(ffmpeg_exe())")
W=/tmp/w; mkdir -p $W $OUT/r
{ nvidia-smi -L; nproc; date; git log --oneline -1 2>/dev/null; } > $OUT/r/host.txt
SRC=$(python3 -c "
import sys; sys.path.insert(0,'scripts/benchmarks')
from pathlib import Path; from bench_chunks import default_source
print(default_source(Path('$W'), 150))")
B="scripts/benchmarks/bench_bighost.py --work $W --source $SRC --timeline"
row() { local name=$1; shift; timeout 100 python3 $B --no-warmup "$@" --json $OUT/r/$name.json > $OUT/r/$name.out 2>&1
  echo "$name rc=$? $(grep -h '"row"' $OUT/r/$name.out | cut -c1-220)"; }
timeout 100 python3 $B --rows plain4 --json $OUT/r/plain4.json > $OUT/r/plain4.out 2>&1; echo "plain4 (and warm-up) rc=$?"
row default --rows srgpuall
row w8 --rows srgpuall-w8
row chunks6 --rows srgpuall --srgpu-arg=--chunk-seconds --srgpu-arg=6
row threads0 --rows srgpuall --srgpu-arg=--encoder-arg=-threads --srgpu-arg=--encoder-arg=0
row default_again --rows srgpuall
if [ -d .old/srgpu ]; then
  (cd .old && rm -f weights && ln -s ../weights weights && timeout 100 python3 ../$B --no-warmup --rows srgpuall \
    --json $OUT/r/default_old.json > $OUT/r/default_old.out 2>&1; echo "default_old rc=$? $(grep -h '"row"' $OUT/r/default_old.out | cut -c1-220)")
fi
traced() { local name=$1; shift
  SRGPU_DEV_TRACE=$W/tr_$name PYTHONPATH=dev/trace_site:/tmp/site:$PWD timeout 100 python3 -m srgpu upscale $SRC \
    -o $W/$name.mkv --overwrite --codec libx264 --preset veryfast --crf 18 "$@" > $OUT/r/$name.log 2>&1
  echo "$name rc=$? $(tail -1 $OUT/r/$name.log)"; python3 dev/trace_report.py $W/tr_$name > $OUT/r/trace_$name.txt; rm -f $W/$name.mkv; }
traced tr_all --gpus all
traced tr_one --gpus 0 --chunk-seconds 0
if [ "${1:-}" = x265 ]; then
  row x265 --settings libx265:medium --rows srgpuall srgpuall-w8 plain8
fi
if [ "${1:-}" = folder ]; then  # 16 clips of 20 s: plain ffmpeg 4 and 8 at a time, srgpu's defaults (about 3 minutes)
  timeout 400 python3 $B --no-warmup --rows folder-plain4 folder-plain8 folder-srgpu --json $OUT/r/folder.json \
    > $OUT/r/folder.out 2>&1; echo "folder rc=$? $(grep -h '"row"' $OUT/r/folder.out | cut -c1-220)"
fi
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r

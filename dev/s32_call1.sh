#!/usr/bin/env bash
# Session 32, one H200 (16 cores): where x264 medium's extra CPU in srgpu comes from (session 29's host: srgpu's
# x264 0.482 CPU s a frame against 0.399 for plain4's whole pipeline; from raw files SR frames cost only 6.7 % more).
# All rows on one host, the 60 s source, x264 medium crf 18, one run each (bench_bighost.py, which also splits each
# ffmpeg's CPU by thread name: demuxer, decoder, filter and x264's threads, encoder, muxer):
#   plain4          plain ffmpeg, 4 chunks at once (x264's own threads: 24 on 16 cores)
#   piped4          the same, each chunk's decoding and scaling in one ffmpeg and x264 in another, raw frames in
#                   Matroska through a pipe between them (as srgpu feeds its encoders): the pipe's own cost
#   srgpuall        srgpu's default (8 chunks on 4 workers, x264 on 24 threads each)
#   srgpuall-t12/-t6  the same with x264 on 12 / 6 threads
#   plain4-t6       plain4 with x264 on 6 threads (its share of 16 cores at 1.5 a core)
#   bash dev/s32_call1.sh      # carry .ffmpeg9; shared/data/video travels with the tree
source .ffmpeg9/setup.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD
W=/tmp/w; mkdir -p $W $OUT/r
{ nvidia-smi -L; nproc; lscpu | grep -i "model name"; date; } > $OUT/r/host.txt
SRC=$(python3 -c "
import sys; sys.path.insert(0,'scripts/benchmarks')
from pathlib import Path; from bench_chunks import default_source
print(default_source(Path('$W'), 60))")
t0=$(date +%s)
timeout 560 python3 scripts/benchmarks/bench_bighost.py --work $W --source $SRC --settings libx264:medium \
  --rows plain4 piped4 srgpuall srgpuall-t12 srgpuall-t6 plain4-t6 --json $OUT/r/md60.json > $OUT/r/md60.out 2>&1
echo "md60 rc=$? $(( $(date +%s)-t0 )) s"
grep -h '"row"' $OUT/r/md60.out | python3 -c "
import sys, json
for l in sys.stdin:
    r = json.loads(l); print(r['row'], r.get('fps'), r.get('cpu_busy_steady'), r.get('cpu_s_per_frame'))"
grep -h "chunks,\|files, one per task" $OUT/r/md60.log
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r

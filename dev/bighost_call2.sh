#!/usr/bin/env bash
# Issue 40, second x4 call: x264's threads per chunk encoder (srgpu's share against x264's own
# count), and x264/x265 medium against plain chunks on a 60 s source. GPU machine, repo root.
source .ffmpeg9/setup.sh; set -o pipefail
python3 -c "
import sys; sys.path.insert(0,'scripts/benchmarks')
from pathlib import Path; import bench_chunks as b
print(b.default_source(Path('/tmp'), 150), b.default_source(Path('/tmp'), 60))"
B="python3 scripts/benchmarks/bench_bighost.py --work /tmp"
T0="--srgpu-arg=--encoder-arg=-threads --srgpu-arg=--encoder-arg=0"
$B --source /tmp/bbb_1080p24_150s.mkv --settings libx264:veryfast --rows srgpuall srgpuall-w8 $T0 --json $OUT/vf_t0.json 2>&1 | grep '^{"codec'
$B --no-warmup --source /tmp/bbb_1080p24_60s.mkv --settings libx264:medium --rows plain4 plain8 srgpuall --json $OUT/med60.json 2>&1 | grep '^{"codec'
$B --no-warmup --source /tmp/bbb_1080p24_60s.mkv --settings libx264:medium --rows srgpuall $T0 --json $OUT/med60_t0.json 2>&1 | grep '^{"codec'
$B --no-warmup --source /tmp/bbb_1080p24_60s.mkv --settings libx265:medium --rows plain4 srgpuall --json $OUT/x265_60.json 2>&1 | grep '^{"codec'

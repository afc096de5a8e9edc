#!/usr/bin/env bash
# Issue 40, third x4 call: where a chunked run's time goes (every process's life, the CLI's lines timed).
source .ffmpeg9/setup.sh; set -o pipefail
python3 -c "
import sys; sys.path.insert(0,'scripts/benchmarks')
from pathlib import Path; import bench_chunks as b
print(b.default_source(Path('/tmp'), 150), b.default_source(Path('/tmp'), 60))"
B="python3 scripts/benchmarks/bench_bighost.py --work /tmp --timeline --interval 0.2"
$B --source /tmp/bbb_1080p24_60s.mkv --settings libx264:medium --rows srgpuall --json $OUT/med60_tl.json 2>&1 | grep '^{"codec'
$B --no-warmup --source /tmp/bbb_1080p24_150s.mkv --settings libx264:veryfast --rows srgpuall srgpu2 --json $OUT/vf150_tl.json 2>&1 | grep '^{"codec'

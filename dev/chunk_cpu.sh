#!/usr/bin/env bash
# Issue 22: CPU seconds by process kind of plain ffmpeg and srgpu, one process and in 4 chunks, x264 medium (GPU machine, repo root; results under $OUT)
source .ffmpeg9/setup.sh; W=$OUT/w; mkdir -p $W
python3 -c "
import sys; sys.argv=['x']; sys.path.insert(0,'scripts/benchmarks')
from pathlib import Path; import bench_chunks as b
import shutil; p=b.default_source(Path('/tmp'), 30, 48); print(p)"
SRC=/tmp/bbb_1080p24_30s.mkv
for k in plain plain_chunks srgpu srgpu_chunks; do
  python3 dev/cpu_by_process.py --json $W/cpu_$k.json -- python3 scripts/benchmarks/bench_chunks.py --source $SRC --settings libx264:medium --workers 4 --chunk-seconds 7.5 --no-resume --only $k > $W/b_$k.txt 2>&1
  python3 -c "import json;r=json.load(open('$W/cpu_$k.json'));print('$k',r['wall_s'],r['cpu_s'],r['user_s'],r['sys_s'],r['cores_busy']);[print('   ',x) for x in r['by_kind'][:6]]"
done
tar -C $W -czf $OUT/b.tgz .

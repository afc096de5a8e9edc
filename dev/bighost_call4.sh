#!/usr/bin/env bash
# Issue 40, fourth x4 call: before (.old = 7ac633b, carried) against after on one machine, where the
# coordinator's and a worker's CPU goes (py-spy), and what SR frames cost the encoder. GPU machine, repo root.
source .ffmpeg9/setup.sh; set -o pipefail; export PATH=/tmp/site/bin:$PATH
python3 -c "
import sys; sys.path.insert(0,'scripts/benchmarks')
from pathlib import Path; import bench_chunks as b
print(b.default_source(Path('/tmp'), 150), b.default_source(Path('/tmp'), 60))"
B="python3 scripts/benchmarks/bench_bighost.py --work /tmp"
# py-spy on the coordinator and one worker, 12 s into the new srgpuall row
( sleep 14; c=$(pgrep -f "srgpu upscale /tmp/bbb_1080p24_150s" | head -1); w=$(pgrep -P $c -f spawn_main | head -1)
  echo "coordinator $c worker $w" > $OUT/spy.txt
  timeout 20 py-spy record --nonblocking -d 6 -r 100 -f raw -o $OUT/spy_coord.txt --pid $c >> $OUT/spy.txt 2>&1 &
  timeout 20 py-spy record --nonblocking -d 6 -r 100 -f raw -o $OUT/spy_worker.txt --pid $w >> $OUT/spy.txt 2>&1
  wait ) &
$B --source /tmp/bbb_1080p24_150s.mkv --settings libx264:veryfast --rows srgpuall plain4 --timeline --interval 0.2 --json $OUT/vf_new.json 2>&1 | grep '^{"codec'
wait
(cd .old && PYTHONPATH=/tmp/site:$PWD python3 ../scripts/benchmarks/bench_bighost.py --work /tmp --no-warmup --source /tmp/bbb_1080p24_150s.mkv --settings libx264:veryfast --rows srgpuall --json $OUT/vf_old.json 2>&1 | grep '^{"codec')
$B --no-warmup --source /tmp/bbb_1080p24_60s.mkv --settings libx264:medium --rows srgpuall plain4 --json $OUT/med_new.json 2>&1 | grep '^{"codec'
python3 scripts/benchmarks/bench_encoder_cost.py --source /tmp/bbb_1080p24_60s.mkv --seconds 10 --settings libx264:veryfast --json $OUT/enc_cost.json 2>&1 | grep '^{"codec'

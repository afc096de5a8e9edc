source .ffmpeg9/setup.sh; W=$OUT/w; mkdir -p $W
timeout 220 python3 scripts/benchmarks/bench_peers.py --arch 9-1-5 --arch 9-5-5 --sweep --not-offered --reps 20 --no-torch --json $W/sweep.json > $W/sweep.txt 2>&1; grep -i 'fp16-fast' $W/sweep.txt | head -20
python3 -c "
import sys; sys.argv=['x']; sys.path.insert(0,'scripts/benchmarks')
from pathlib import Path; import bench_chunks as b
b.default_source(Path('/tmp'), 30, 48)"
SRC=/tmp/bbb_1080p24_30s.mkv
python3 scripts/benchmarks/bench_chunks.py --source $SRC --settings libx265:medium --workers 4 --chunk-seconds 7.5 --no-resume --only plain srgpu_chunks --json $W/x265_w4.json > $W/x265_w4.txt 2>&1; grep -h '_fps"\|mbytes' $W/x265_w4.json
python3 scripts/benchmarks/bench_chunks.py --source $SRC --settings libx265:medium --workers 8 --chunk-seconds 3.75 --no-resume --only srgpu_chunks --json $W/x265_w8.json > $W/x265_w8.txt 2>&1; grep -h '_fps"\|mbytes' $W/x265_w8.json
python3 scripts/benchmarks/bench_chunks.py --source $SRC --settings libx264:medium --no-resume --only plain srgpu --json $W/x264_sizes.json > $W/x264_sizes.txt 2>&1; grep -h '_fps"\|mbytes' $W/x264_sizes.json
tar -C $W -czf $OUT/d.tgz .

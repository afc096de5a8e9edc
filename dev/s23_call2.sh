#!/usr/bin/env bash
# Session 23, second device call (nvidia-h200-x2): GPU tests of this session's changes (free memory
# by NVML, compare, NVENC refusal), where the coordinator calls CuPy, one pipeline's GPU memory, and
# issue 40's rows: 2 workers a GPU against 1, plain ffmpeg with 4 chunks.
source .ffmpeg9/setup.sh
W=/tmp/w; mkdir -p $W $OUT/r
{ nvidia-smi -L; nproc; date; } > $OUT/r/host.txt
timeout 200 python3 -m pytest -q -m gpu -rs -p no:cacheprovider tests/test_gpu_memory.py tests/test_compare.py \
  tests/test_gpu_nvenc.py > $OUT/r/gpu_tests.log 2>&1
echo "tests rc=$? $(tail -1 $OUT/r/gpu_tests.log)"
python3 -c "
import sys; sys.path.insert(0,'scripts/benchmarks')
from pathlib import Path; from bench_chunks import default_source
print(default_source(Path('$W'), 60))" > $W/src.txt
SRC=$(cat $W/src.txt); echo "source $SRC"
timeout 60 python3 dev/who_calls_cupy.py upscale $SRC -o $W/who.mkv --gpus 0,1 --preset ultrafast -q > $OUT/r/who.log 2>&1
echo "who rc=$?"; grep who_calls $OUT/r/who.log | head -30
timeout 150 python3 scripts/benchmarks/bench_gpu_memory.py --source $SRC --gpu 1 --json $OUT/r/memory.json > $OUT/r/memory.log 2>&1
echo "memory rc=$?"; tail -c 1500 $OUT/r/memory.log
timeout 250 python3 scripts/benchmarks/bench_bighost.py --source $SRC --rows plain4 srgpu2 srgpu2-w4 srgpu1-w2 \
  --timeline --work $W --json $OUT/r/bighost.json > $OUT/r/bighost.out 2>&1
echo "bighost rc=$?"
grep -h '"row"' $OUT/r/bighost.out | cut -c1-330
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r

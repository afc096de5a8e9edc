#!/usr/bin/env bash
# Session 23, first device call (nvidia-h200-x2): the new GPU tests (deinterlace, compare), the
# NVENC/chunk/worker GPU tests, where one pipeline's GPU memory goes, and issue 40's rows on 2 GPUs
# with the context fix beside the code before it (.old: git archive of 71fce58's srgpu/).
source .ffmpeg9/setup.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD
W=/tmp/w; mkdir -p $W
{ nvidia-smi -L; nproc; date; } > $OUT/host.txt
timeout 260 python3 -m pytest -q -m gpu -rs -p no:cacheprovider tests/test_deinterlace.py tests/test_compare.py \
  tests/test_gpu_nvenc.py tests/test_chunks_gpu.py tests/test_folder_workers_gpu.py > $OUT/gpu_tests.log 2>&1
echo "tests rc=$? $(tail -1 $OUT/gpu_tests.log)"
python3 -c "
import sys; sys.path.insert(0,'scripts/benchmarks')
from pathlib import Path; from bench_chunks import default_source
print(default_source(Path('$W'), 60))" > $W/src.txt
SRC=$(cat $W/src.txt); echo "source $SRC"
timeout 150 python3 scripts/benchmarks/bench_gpu_memory.py --source $SRC --gpu 1 --json $OUT/memory.json > $OUT/memory.log 2>&1
echo "memory rc=$?"
timeout 200 python3 scripts/benchmarks/bench_bighost.py --source $SRC --rows plain plain2 srgpu1 srgpu2 \
  --timeline --work $W --json $OUT/bighost_new.json > $OUT/bighost_new.out 2>&1
echo "bighost new rc=$?"
(cd .old && rm -f weights && ln -s ../weights weights && timeout 80 python3 ../scripts/benchmarks/bench_bighost.py --source $SRC \
  --rows srgpu2 --timeline --no-warmup --work $W --json $OUT/bighost_old.json > $OUT/bighost_old.out 2>&1)
echo "bighost old rc=$?"
grep -h '"row"' $OUT/bighost_new.out $OUT/bighost_old.out | cut -c1-400
